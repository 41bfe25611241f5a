"""Failures of the files the project writes and reads, in plain words: which file, why, and what was kept.

The libraries save through torch (``inline_container.cc``: ``unexpected pos``, ``file write failed``), safetensors
(``IoError(Os { code: 28 ... })``), ``datasets``/Arrow and plain ``open``; each reports a full disk or a file-size
limit its own way, often without the file's name. :func:`writing` wraps a save and turns any of these into one
:class:`FileFault` (an ``OSError``: the commands print it as one ``error:`` line) naming the file and the cause
(``the disk holding /x is full: 3 MB free of 400 MB after the failed write``, ``a file reached the file-size limit
of this process (ulimit -f: 10 MB)``, ``permission denied``), plus what was kept; :func:`reading` does the same
for a file that cannot be read back (truncated, not parseable).
"""

from __future__ import annotations

import errno
import re
import resource
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FileFault", "cause", "reading", "refuse_folder", "writing"]

LOW_SPACE = 64 << 20  # less free space than this after a failed write: the disk is taken to be full

_ERRNO_IN_TEXT = re.compile(r"(?:code: |\[Errno |errno )(\d+)")
_PHRASES = {
    errno.ENOSPC: "no space left",
    errno.EFBIG: "file too large",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
}


class FileFault(OSError):
    """A file that could not be written or read: the message names it, the cause and what was kept."""


def _errno_of(err: BaseException) -> int | None:
    """The OS error number of ``err`` or of an error it was raised from, or one written in its message (torch and
    safetensors put it there)."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno:
            return seen.errno
        found = _ERRNO_IN_TEXT.search(str(seen))
        if found:
            return int(found.group(1))
        lowered = str(seen).lower()
        for number, phrase in _PHRASES.items():
            if phrase in lowered:
                return number
        seen = seen.__cause__ or seen.__context__
    return None


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (where the free space is measured)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def free_mb(path: str | Path) -> float:
    return shutil.disk_usage(_existing(Path(path).absolute())).free / 2**20


def file_size_limit() -> int | None:
    """This process's file-size limit in bytes (``ulimit -f``), or ``None`` when there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB" if n >= 1 << 10 else f"{n} bytes"


def cause(err: BaseException, path: str | Path) -> str:
    """Why writing ``path`` failed, in plain words (the original message, shortened, when it says nothing known)."""
    number = _errno_of(err)
    where = _existing(Path(path).absolute())
    where = where if where.is_dir() else where.parent
    limit = file_size_limit()
    if number in (errno.ENOSPC, errno.EDQUOT) or (number is None and free_mb(path) * 2**20 < LOW_SPACE):
        if number == errno.EDQUOT:
            return f"the disk quota for {where} is exceeded ({free_mb(path):.0f} MB free on its disk)"
        total = shutil.disk_usage(where).total / 2**20
        return f"the disk holding {where} is full: {free_mb(path):.0f} MB free of {total:.0f} MB after the failed write"
    if number == errno.EFBIG or (number is None and limit is not None):
        shown = "a limit" if limit is None else _size(limit)
        return f"a file reached the file-size limit of this process (ulimit -f: {shown})"
    if number in _PHRASES:
        return f"{_PHRASES[number]} ({where})"
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}"


@contextmanager
def writing(path: str | Path, what: str, kept: str | None = None) -> Iterator[None]:
    """Run a save of ``what`` into ``path``; a failure to write ends in one :class:`FileFault`:
    ``could not write <what> <path>: <cause>; <kept>``.

    Errors that are not about the file (``ValueError``, a :class:`FileFault` already explained) pass unchanged;
    ``RuntimeError`` is taken as a write failure only when it names a write (torch's stream writer).
    """
    try:
        yield
    except FileFault:
        raise
    except (OSError, RuntimeError) as err:
        if isinstance(err, RuntimeError) and not _is_write_error(err):
            raise
        tail = f"; {kept}" if kept else ""
        raise FileFault(f"could not write {what} {path}: {cause(err, path)}{tail}") from err
    except Exception as err:  # safetensors' SafetensorError is neither OSError nor RuntimeError
        if type(err).__name__ != "SafetensorError":
            raise
        tail = f"; {kept}" if kept else ""
        raise FileFault(f"could not write {what} {path}: {cause(err, path)}{tail}") from err


def _is_write_error(err: RuntimeError) -> bool:
    text = str(err)
    return "inline_container" in text or "write" in text.lower() or _errno_of(err) is not None


@contextmanager
def reading(
    path: str | Path, what: str, advice: str | Callable[[], str], passing: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    """Run a load of ``what`` from ``path``; any failure but those of the types in ``passing`` ends in one
    :class:`FileFault`: ``could not read <what> <path> (<the library's message>): <advice>`` (``advice`` may be a
    function, called only on a failure, when finding it costs work)."""
    try:
        yield
    except (FileFault, *passing):
        raise
    except Exception as err:
        if isinstance(err, MemoryError):
            raise
        text = brief(str(err)) or type(err).__name__
        said = advice() if callable(advice) else advice
        raise FileFault(f"could not read {what} {path} ({text}); {said}") from err


def brief(text: str, limit: int = 200) -> str:
    """A library's error message on one line and at most about ``limit`` characters, never cut mid-word: the whole
    message if it fits, else its first sentence if that fits, else its words up to ``limit`` and ``…``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    end = text.find(". ")
    if 0 < end < limit:
        return text[: end + 1]
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit] + " …"


def refuse_folder(path: str | Path, what: str, expected: str) -> None:
    """Refuse a folder given where a file is expected, before any check of its name (a folder's name has no
    suffix: the check would say ``unsupported suffix '(none)'``, which hides what is wrong).

    Raises:
        IsADirectoryError: ``<what> <path> is a folder; expected <expected>``.
    """
    if Path(path).is_dir():
        raise IsADirectoryError(f"{what} {path}".strip() + f" is a folder; expected {expected}")
