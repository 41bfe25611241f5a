"""``bench/grad_cache.py`` runs end to end at toy size and prints its ratio table (figures not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_grad_cache_bench_prints_ratios_against_the_uncached_step(tmp_path: Path) -> None:
    out = tmp_path / "points.json"
    cmd = [sys.executable, "bench/grad_cache.py", "--points", "8:0", "8:3", "--layers", "1", "--hidden", "32",
           "--length", "8", "--repeats", "1", "--json", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "peak / base" in proc.stdout and "time / uncached" in proc.stdout
    rows = json.loads(out.read_text())
    assert [(r["batch"], r["chunk"]) for r in rows] == [(8, 0), (8, 3)]
    assert rows[0]["peak_ratio"] == 1.0 and rows[0]["time_ratio"] == 1.0
    assert all(r["peak_mb"] > 0 and r["step_s"] > 0 and r["time_ratio"] > 0 for r in rows)
