"""Files replaced whole (``simcse_weince/core/atomic.py``): the new version or the previous one, never half a file; no
temporary file left; the mode a plain ``open()`` gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simcse_weince.core.atomic import atomic_file, write_text_atomic


def test_the_file_is_replaced_whole_and_nothing_else_is_left(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.json"  # the parent folder is created
    assert write_text_atomic(path, "first") == path
    write_text_atomic(path, "second, longer")
    assert path.read_text(encoding="utf-8") == "second, longer"
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


@pytest.mark.parametrize("stop", [OSError("disk full"), KeyboardInterrupt()])
def test_a_write_that_fails_keeps_the_previous_version_and_removes_its_temporary_file(
    stop: BaseException, tmp_path: Path
) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("previous", encoding="utf-8")
    seen = []
    with pytest.raises(type(stop)), atomic_file(path) as tmp:
        seen.append(tmp)
        tmp.write_text("half of the new ver", encoding="utf-8")
        raise stop
    assert path.read_text(encoding="utf-8") == "previous"
    assert not seen[0].exists() and [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_the_temporary_file_is_hidden_beside_the_target_unique_and_marked_tmp(tmp_path: Path) -> None:
    """Beside it (``os.replace`` within one file system), hidden, ``.tmp`` in its name (how a checkpoint with one
    left is known as unfinished), and one per writer."""
    path = tmp_path / "run_record.json"
    with atomic_file(path) as a, atomic_file(path) as b:
        a.write_text("a", encoding="utf-8")
        b.write_text("b", encoding="utf-8")
    assert a != b and a.parent == b.parent == tmp_path
    assert a.name.startswith(".run_record.json.") and a.name.endswith(".tmp") and str(os.getpid()) in a.name
    assert path.read_text(encoding="utf-8") == "a"  # the outer block ends last


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_the_file_has_the_mode_open_gives(umask: int, tmp_path: Path) -> None:
    saved = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "eval_dev.md", "text")
        (tmp_path / "plain.md").write_text("text", encoding="utf-8")
    finally:
        os.umask(saved)
    mode = (tmp_path / "eval_dev.md").stat().st_mode & 0o777
    assert mode == (tmp_path / "plain.md").stat().st_mode & 0o777 == 0o666 & ~umask
