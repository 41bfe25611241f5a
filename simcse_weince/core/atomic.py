"""Files replaced whole: written under a temporary name beside the target, then renamed onto it (``os.replace``),
so that a reader, or a run killed while writing, sees the previous version or the new one, never half a file.

The temporary file is not created here: the writer creates it with a plain ``open()`` (or a library's), so it
has the permissions any file of its folder has under the umask (:mod:`~simcse_weince.core.file_modes`), and keeps
them when renamed. Its name (``.<name>.<pid>.<random>.tmp``) is hidden, unique to the writer (two processes
writing the same file never write into each other's temporary file) and holds ``.tmp``, the mark by which a
checkpoint with a leftover one is known as a save that did not finish
(:func:`~simcse_weince.training.run_folder.is_temporary`). A write that fails removes it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write (not created: the writer creates it, with the usual
    permissions); renamed onto ``path`` when the block ends, removed if it fails. The parent folders are created.

    Example:
        >>> with atomic_file(folder / "table.png") as tmp:  # doctest: +SKIP
        ...     fig.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Replace ``path`` whole with ``text`` (UTF-8) through :func:`atomic_file`; returns ``path``."""
    path = Path(path)
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
