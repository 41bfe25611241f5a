"""What a file holds, by content: the digests that let a checkpoint, an exported model and a training file be
checked against what was written or read before.

A digest is XXH3-128 (:mod:`xxhash`) of the XXH3-128 digests of the file's 64 MiB blocks, in order (a two-level
tree, so that the blocks are hashed on several threads at once: xxhash releases the GIL; the file is memory-mapped,
not copied). It detects damage (a flipped byte, a truncation, a file edited in place), not tampering, at about
7 GB/s on this machine's 2 cores, so that a bert-base checkpoint (1.3 GB with its optimizer state) is checked in
about 0.2 s (``bench/checkpoint_digest.py`` measures it against the save). A folder's digests are
``{relative path: {"bytes": size, ALGORITHM: hex}}``, kept under
``files`` in the folder's ``run_record.json`` (a checkpoint's, an exported model's:
:mod:`~simcse_weince.training.run_record`), which :func:`folder_damage` checks the folder against.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import xxhash

ALGORITHM = "xxh3_128_64mib_blocks"
RECORD_FILE = "run_record.json"
FILES_KEY = "files"  # the record's key holding the folder's digests
BLOCK = 1 << 26  # 64 MiB: a file's blocks are hashed in parallel
THREADS = max(1, min(8, os.cpu_count() or 1))
# Files another program writes into a folder for the time of a save and deletes right after (transformers' JIT
# checkpoint sentinel): a digest of one would make the finished folder look damaged, so none is ever taken.
TRANSIENT = frozenset({"checkpoint-is-incomplete.txt"})


def read_digest(path: str | Path) -> str:
    """The digest of a file's bytes (see the module docstring), read now."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except (OSError, ValueError):  # a file system without memory maps: read block by block
            mapped = None
        if mapped is None:
            blocks = [xxhash.xxh3_128(block).digest() for block in iter(lambda: f.read(BLOCK), b"")]
        else:
            with mapped:
                blocks = _mapped_blocks(mapped, size)
    return xxhash.xxh3_128(b"".join(blocks)).hexdigest()


def _mapped_blocks(mapped: mmap.mmap, size: int) -> list[bytes]:
    view = memoryview(mapped)
    try:

        def block(start: int) -> bytes:
            part = view[start : start + BLOCK]
            try:
                return xxhash.xxh3_128(part).digest()
            finally:
                part.release()

        starts = range(0, size, BLOCK)
        if len(starts) == 1 or THREADS == 1:
            return [block(s) for s in starts]
        with ThreadPoolExecutor(min(THREADS, len(starts))) as pool:
            return list(pool.map(block, starts))
    finally:
        view.release()


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
    """``{relative path: {"bytes": size, ALGORITHM: digest}}`` of every file under ``folder`` (sorted), except
    the relative paths in ``exclude`` and the :data:`TRANSIENT` files (deleted once the save is over)."""
    root = Path(folder)
    skip = set(exclude)
    found = {}
    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel not in skip and name not in TRANSIENT:
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
    files = saved.get(FILES_KEY) if isinstance(saved, dict) else None
    return files if isinstance(files, dict) else None


def folder_damage(folder: str | Path) -> list[str] | None:
    """:func:`damage` of ``folder`` against its recorded digests, or ``None`` when it records none."""
    expected = recorded_digests(folder)
    return None if expected is None else damage(folder, expected)
