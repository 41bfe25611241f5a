"""``bench/grad_cache.py`` runs end to end at toy size; its ratios are checked against their definitions (the
measured figures themselves are not asserted)."""

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
    """Peak ratio: against the first point's peak; time ratio: ms per sentence against the uncached step at the
    same batch, ``None`` (printed ``-``) where no uncached step of that batch was measured."""
    out = tmp_path / "points.json"
    cmd = [sys.executable, "bench/grad_cache.py", "--points", "8:0", "8:3", "6:2", "--layers", "1", "--hidden",
           "32", "--length", "8", "--repeats", "1", "--json", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "peak / base" in proc.stdout and "time / uncached" in proc.stdout
    rows = json.loads(out.read_text())
    assert [(r["batch"], r["chunk"]) for r in rows] == [(8, 0), (8, 3), (6, 2)]
    assert all(r["peak_mb"] > 0 and r["step_s"] > 0 for r in rows)
    uncached, cached, unmatched = rows
    for r in rows:
        assert r["ms_per_sentence"] == pytest.approx(1e3 * r["step_s"] / r["batch"], rel=1e-12)
        assert r["peak_ratio"] == pytest.approx(r["peak_mb"] / uncached["peak_mb"], rel=1e-12)
    assert cached["time_ratio"] == pytest.approx(cached["ms_per_sentence"] / uncached["ms_per_sentence"], rel=1e-12)
    assert unmatched["time_ratio"] is None  # no uncached step at batch 6
    table = [line.split() for line in proc.stdout.splitlines() if line.split()[:2] in (["8", "3"], ["6", "2"])]
    assert [row[-2:] for row in table] == [
        [f"{cached['peak_ratio']:.2f}", f"{cached['time_ratio']:.2f}"],
        [f"{unmatched['peak_ratio']:.2f}", "-"],
    ]
