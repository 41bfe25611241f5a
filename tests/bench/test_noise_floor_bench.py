"""bench/noise_floor.py runs end to end against a stand-in for the authors' script (their script is not in this
repository): the stand-in writes their CSV columns from this library at their seed, so the bench must find the
closed forms equal and the same-seed curves identical — a wrong column mapping or seed fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bench]  # `make test-bench`, not `make test`

REPO = Path(__file__).resolve().parents[2]

STAND_IN = """
import argparse, csv
from pathlib import Path
from weince_lab.simulation.noise_floor import closed_forms, simulate_noise_floor
p = argparse.ArgumentParser()
p.add_argument("--n-reps", type=int)
p.add_argument("--out-dir", type=Path)
p.add_argument("--seed", type=int, default=20260113)
a = p.parse_args()
cf = closed_forms()
a.out_dir.mkdir(parents=True, exist_ok=True)
with open(a.out_dir / "noise_floor_results.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["n", "mse_lambda_weibit", "mse_lambda_softmax", "true_log_odds", "softmax_pseudo_log_odds",
                "softmax_bias_floor", "softmax_godambe_floor", "weibit_fisher_floor_log_odds"])
    for r in simulate_noise_floor(replications=a.n_reps, seed=a.seed):
        w.writerow([float(r.n), r.mse_weibit, r.mse_softmax, cf.true_log_odds, cf.softmax_pseudo_log_odds,
                    cf.softmax_bias_floor, cf.softmax_godambe, cf.weibit_c])
"""


def test_bench_compares_closed_forms_and_curves(tmp_path: Path) -> None:
    script = tmp_path / "noise_floor_simulation.py"
    script.write_text(STAND_IN)
    cmd = [sys.executable, "bench/noise_floor.py", "--authors_script", str(script), "--runs", "1",
           "--replications", "300"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "closed forms: largest |authors - ours| = 0.00e+00 over 5 quantities" in out
    assert "speed-up (authors / ours)" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.count(" | ") == 5 and "estimator" not in line]
    assert len(rows) == 14
    for row in rows:
        assert row[2] == row[3]  # same seed: the same draws, the same MSE
        assert abs(float(row[5])) < 5  # an independent seed: within sampling error
