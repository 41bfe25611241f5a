"""Saved files get the mode ``open()`` gives (``simcse_weince/core/file_modes.py``): widened from a temporary file's
0600
to ``0o666 & ~umask``, never narrowed, the umask respected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simcse_weince.core.file_modes import current_umask, give_usual_modes


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_0600_file_gets_the_mode_of_open(umask: int, tmp_path: Path) -> None:
    saved = os.umask(umask)
    try:
        assert current_umask() == umask
        (tmp_path / "sub").mkdir()
        written = tmp_path / "sub" / "model.safetensors"
        written.write_bytes(b"w")
        os.chmod(written, 0o600)  # as tempfile.mkstemp creates it
        plain = tmp_path / "config.json"
        plain.write_text("{}")
        opened = plain.stat().st_mode & 0o777
        wide = tmp_path / "run.sh"
        wide.write_text("")
        os.chmod(wide, 0o755)
        give_usual_modes(tmp_path)
    finally:
        os.umask(saved)
    assert written.stat().st_mode & 0o777 == opened == 0o666 & ~umask
    assert wide.stat().st_mode & 0o777 == 0o755 | (0o666 & ~umask)  # never narrowed
