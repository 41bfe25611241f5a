"""What a file holds, by content: the digests that let a checkpoint, an exported model and a training file be
checked against what was written or read before.

A digest is XXH3-128 (:mod:`xxhash`) of the file's bytes, streamed in 8 MiB blocks: it detects damage (a flipped
byte, a truncation, a file edited in place), not tampering, at about 3 GB/s here, so that a bert-base checkpoint
(1.3 GB with its optimizer state) is checked in about half a second (``bench/checkpoint_digest.py`` measures it
against the save). A folder's digests are ``{relative path: {"bytes": size, "xxh3_128": hex}}``, kept under
``files`` in the folder's ``run_record.json`` (a checkpoint's, an exported model's:
:mod:`~simcse_weince.training.run_record`), which :func:`folder_damage` checks the folder against.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from pathlib import Path

import xxhash

ALGORITHM = "xxh3_128"
RECORD_FILE = "run_record.json"
BLOCK = 1 << 23


def read_digest(path: str | Path) -> str:
    """The XXH3-128 hex digest of a file's bytes, read now."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _remembered(path: str, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    return read_digest(path)


def file_digest(path: str | Path) -> str:
    """The XXH3-128 hex digest of a file's bytes, remembered for the process while the file's inode, size and
    modification and change times stay the same (a run that labels a file and keys its token cache reads it
    once; any write changes the change time, which no tool can set back)."""
    resolved = Path(path).resolve()
    st = resolved.stat()
    return _remembered(str(resolved), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def folder_digests(folder: str | Path, exclude: Iterable[str] = ()) -> dict[str, dict[str, int | str]]:
    """``{relative path: {"bytes": size, "xxh3_128": digest}}`` of every file under ``folder`` (sorted), except
    the relative paths in ``exclude``."""
    root = Path(folder)
    skip = set(exclude)
    found = {}
    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel not in skip:
                found[rel] = {"bytes": path.stat().st_size, ALGORITHM: read_digest(path)}
    return found


def damage(folder: str | Path, expected: dict[str, dict[str, int | str]]) -> list[str]:
    """What differs between ``folder``'s files and the digests ``expected`` of them, one phrase per damaged file
    (``model.safetensors is missing``, ``optimizer.pt is 1000 bytes, 4096 when it was saved (truncated)``,
    ``model.safetensors: its content differs from when it was saved``); empty when every file matches. Files
    that ``expected`` does not list are not checked."""
    root = Path(folder)
    found = []
    for rel, want in expected.items():
        path = root / rel
        if not path.is_file():
            found.append(f"{rel} is missing")
            continue
        size = path.stat().st_size
        if size != want["bytes"]:
            how = "truncated" if size < int(want["bytes"]) else "grown"
            found.append(f"{rel} is {size} bytes, {want['bytes']} when it was saved ({how})")
        elif read_digest(path) != want[ALGORITHM]:
            found.append(f"{rel}: its content differs from when it was saved")
    return found


def recorded_digests(folder: str | Path) -> dict[str, dict[str, int | str]] | None:
    """The digests ``folder``'s ``run_record.json`` holds, or ``None`` (no record, none in it, or a record that is
    not JSON: then the folder's own loading fails, naming the file)."""
    path = Path(folder) / RECORD_FILE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = saved.get("files") if isinstance(saved, dict) else None
    return files if isinstance(files, dict) else None


def folder_damage(folder: str | Path) -> list[str] | None:
    """:func:`damage` of ``folder`` against its recorded digests, or ``None`` when it records none."""
    expected = recorded_digests(folder)
    return None if expected is None else damage(folder, expected)
