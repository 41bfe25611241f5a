"""``python -m weince_lab.experiments.ground_truth SWEEP ...``, kept for the commands written before the sweeps moved
under
``simcse-simulate``: the same command, the same files (the sweeps themselves: ``tests/lab/test_simulate_sweeps.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from weince_lab.experiments import ground_truth


def test_the_driver_runs_simcse_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    argv = ["proposition", "--quick", "--kernels", "vmf", "--ks", "16", "64", "--samples", "2000", "--seeds", "0"]
    assert ground_truth.main([*argv, "--out", str(out)]) == 0
    assert "Whiteley lower" in (out / "proposition.md").read_text()
    assert {p.name for p in out.iterdir()} == {
        f"proposition.{ext}" for ext in ("md", "json", "png", "cells.jsonl", "settings.json")
    }
    capsys.readouterr()
    assert ground_truth.main(["negatives", "--quick", "--ks", "2", "4", "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --ks must be integers >= 3") and "\n" not in err
    assert not (tmp_path / "never").exists()
