"""The benchmark scripts run end to end at toy size (their figures are read by people, not asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses and end-to-end runs

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_train_throughput_profile_splits_each_recipe_into_phases(wiki_sample: Path) -> None:
    cmd = [
        sys.executable,
        "bench/train_throughput.py",
        "--steps",
        "5",
        "--profile",
        "2",
        "--batch",
        "8",
        "--layers",
        "1",
        "--hidden",
        "32",
        "--max-len",
        "16",
        "--data",
        str(wiki_sample),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {}
    for line in proc.stdout.splitlines():
        parts = line.rsplit(maxsplit=3)
        if len(parts) == 4 and parts[0] in ("data", "encoder forward", "loss", "backward", "optimizer", "total"):
            rows[parts[0]] = [float(x) for x in parts[1:]]
    assert set(rows) == {"data", "encoder forward", "loss", "backward", "optimizer", "total"}, proc.stdout
    for phase, values in rows.items():  # ours-infonce, ours-weince, st-mnrl: every phase was found
        assert all(v > 0 for v in values), (phase, values)
    for v in range(3):
        assert sum(rows[p][v] for p in ("encoder forward", "loss", "backward")) < rows["total"][v]
    assert proc.stdout.count("top ops by self time") == 3
