"""E1 side by side: ``simcse-simulate e1`` against the WEINCE authors' own noise-floor script, as whole commands.

The authors' script (``synthetic/noise_floor_simulation.py`` of github.com/hsme98/weince, MIT) is not part of this
repository: fetch it yourself and point ``--authors_script`` at it (it needs numpy, pandas and matplotlib; give the
Python that has them with ``--authors_python``). Both commands run ``--runs`` times in turn (A B A B ...) at the same
number of replications; the script prints the median wall time of each and their ratio, then compares the numbers:

* closed forms: the authors' CSV columns against ours (largest absolute difference; agreement means < 1e-6);
* Monte Carlo: our MSE curves at the authors' seed (the same numpy draws: equal to round-off) and at an independent
  seed (equal within sampling error: the z-score of each difference, with the standard error of a difference of
  two independent estimates of one design, √2·SE).

    .venv/bin/python bench/noise_floor.py --authors_script /tmp/weince/synthetic/noise_floor_simulation.py \\
        --authors_python /tmp/authors_venv/bin/python
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, child_env

AUTHORS_SEED = 20260113
CLOSED_FORM_COLUMNS = {
    "true_log_odds": "true_log_odds",
    "softmax_pseudo_log_odds": "softmax_pseudo_log_odds",
    "softmax_bias_floor": "softmax_bias_floor",
    "softmax_godambe_floor": "softmax_godambe",
    "weibit_fisher_floor_log_odds": "weibit_c",
}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return elapsed


def ours(out: Path, replications: int, seed: int) -> list[str]:
    return [sys.executable, "-m", "weince_lab.simulate", "e1", "--replications", str(replications),
            "--seed", str(seed), "--out", str(out)]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--authors_script", type=Path, required=True)
    p.add_argument("--authors_python", default=sys.executable)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--replications", type=int, default=12_000)
    args = p.parse_args()
    if not args.authors_script.is_file():
        raise SystemExit(f"error: --authors_script {args.authors_script}: no such file")
    tmp = Path(tempfile.mkdtemp(prefix="noise_floor_bench_"))
    theirs_cmd = [args.authors_python, str(args.authors_script.resolve()), "--n-reps", str(args.replications),
                  "--out-dir", str(tmp / "authors")]  # fmt: skip
    times: dict[str, list[float]] = {"authors": [], "ours": []}
    for _ in range(args.runs):
        times["authors"].append(timed(theirs_cmd))
        times["ours"].append(timed(ours(tmp / "ours", args.replications, AUTHORS_SEED)))
    timed(ours(tmp / "independent", args.replications, AUTHORS_SEED + 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"whole commands, {args.replications:,} replications, median of {args.runs} runs (A B A B ...):")
    for k, v in times.items():
        print(f"  {k:8s} median {med[k]:8.2f} s  (min {min(v):.2f}, max {max(v):.2f})")
    print(f"  speed-up (authors / ours): {med['authors'] / med['ours']:.1f}x")
    with open(tmp / "authors" / "noise_floor_results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    same = json.loads((tmp / "ours" / "e1.json").read_text())
    indep = json.loads((tmp / "independent" / "e1.json").read_text())
    cf = same["closed_forms"]
    worst = max(abs(float(rows[0][col]) - cf[key]) for col, key in CLOSED_FORM_COLUMNS.items())
    print(f"closed forms: largest |authors - ours| = {worst:.2e} over {len(CLOSED_FORM_COLUMNS)} quantities")
    print("n | estimator | authors MSE | ours (same seed) | ours (seed +1) | z (seed +1)")
    for row, a, b in zip(rows, same["rows"], indep["rows"], strict=True):
        for est in ("weibit", "softmax"):
            theirs = float(row[f"mse_lambda_{est}"])
            z = (b[f"mse_{est}"] - theirs) / (2**0.5 * b[f"mse_{est}_se"])
            print(f"{int(float(row['n'])):>6} | {est:7s} | {theirs:.6e} | {a[f'mse_{est}']:.6e} | "
                  f"{b[f'mse_{est}']:.6e} | {z:+.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
