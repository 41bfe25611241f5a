"""Content digests (``simcse_weince/core/digests.py``): the block tree equals a plain loop over the blocks, whatever the
threads; damage is named per file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import xxhash

from simcse_weince.core import digests


def loop_reference(data: bytes, block: int) -> str:
    parts = [xxhash.xxh3_128(data[i : i + block]).digest() for i in range(0, len(data), block)]
    return xxhash.xxh3_128(b"".join(parts)).hexdigest()


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 5])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_digest_is_the_tree_of_its_blocks(
    size: int, threads: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(digests, "BLOCK", 4096)
    monkeypatch.setattr(digests, "THREADS", threads)
    data = bytes((i * 7 + i // 13) % 256 for i in range(size))
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert digests.read_digest(path) == loop_reference(data, 4096)


def test_a_changed_file_is_read_again_even_with_its_old_time(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"abc\n")
    first = digests.file_digest(path)
    stamp = path.stat()
    path.write_bytes(b"abd\n")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same size, same modification time
    assert digests.file_digest(path) != first


def test_damage_names_each_file_and_how(tmp_path: Path) -> None:
    for name, data in [("a.bin", b"x" * 100), ("b.bin", b"y" * 100), ("c.bin", b"z" * 100), ("d.bin", b"w")]:
        (tmp_path / name).write_bytes(data)
    expected = digests.folder_digests(tmp_path)
    assert list(expected) == ["a.bin", "b.bin", "c.bin", "d.bin"]
    (tmp_path / "a.bin").write_bytes(b"x" * 50)
    (tmp_path / "b.bin").write_bytes(b"y" * 99 + b"Y")
    (tmp_path / "c.bin").unlink()
    assert digests.damage(tmp_path, expected) == [
        "a.bin is 50 bytes, 100 when it was saved (truncated)",
        "b.bin: its content differs from when it was saved",
        "c.bin is missing",
    ]


def test_a_transient_marker_stays_out_of_the_digests(tmp_path: Path) -> None:
    """transformers' JIT checkpoint writes ``checkpoint-is-incomplete.txt`` during a save and deletes it after: were it
    digested, the finished checkpoint would be refused as damaged (``... is missing``)."""
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "checkpoint-is-incomplete.txt").write_text("Checkpoint started at step 7 and in progress...")
    found = digests.folder_digests(tmp_path)
    assert list(found) == ["model.safetensors"]
    (tmp_path / "checkpoint-is-incomplete.txt").unlink()
    assert digests.damage(tmp_path, found) == []
