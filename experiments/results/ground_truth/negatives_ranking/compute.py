"""Ranking beside KL for the stored `negatives` sweep, paired by seed, from its cells as stored (no re-run).

    python experiments/results/ground_truth/negatives_ranking/compute.py
    python experiments/results/ground_truth/negatives_ranking/compute.py experiments/results/ground_truth_annealed

Reads SWEEP/negatives.cells.jsonl (SWEEP: the folder above this file by default, the full-size sweep, 3 seeds,
re-run with `simcse-simulate negatives --workers 2 --out experiments/results/ground_truth`, 21 min on 2 cores; or
the sweep folder given) and writes output.json and output.md in SWEEP/negatives_ranking:
for every kernel, arm and k, the arm − InfoNCE difference of the universe KL, of the best-link KL (the KL under the
link refitted on the table's cosines), of top-1 agreement and of recall@10 with the Bayes retriever, mean over seeds
with a 95 % Student-t interval.
"""

import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

SWEEP = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
HERE = SWEEP / "negatives_ranking"
HERE.mkdir(exist_ok=True)
cells = [json.loads(line) for line in (SWEEP / "negatives.cells.jsonl").read_text().splitlines() if line]
by = {(c["cell"]["kernel"], c["cell"]["loss"], c["cell"]["k"], c["cell"]["seed"]): c for c in cells}
kernels = list(dict.fromkeys(c["cell"]["kernel"] for c in cells))
arms = [a for a in dict.fromkeys(c["cell"]["loss"] for c in cells) if a != "infonce"]
ks = sorted({c["cell"]["k"] for c in cells})
seeds = sorted({c["cell"]["seed"] for c in cells})


def interval(values):
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean()), float(v.mean() - half), float(v.mean() + half)]


rows = []
for kernel in kernels:
    for arm in arms:
        for k in ks:
            if (kernel, arm, k, seeds[0]) not in by:
                continue
            pairs = [(by[(kernel, arm, k, s)], by[(kernel, "infonce", k, s)]) for s in seeds]
            rows.append(
                {
                    "kernel": kernel,
                    "arm": arm,
                    "k": k,
                    "universe_kl": interval([a["universe_gap"] - b["universe_gap"] for a, b in pairs]),
                    "best_link_kl": interval([a["best_link_gap"] - b["best_link_gap"] for a, b in pairs]),
                    "top1": interval([a["top1"] - b["top1"] for a, b in pairs]),
                    "recall10": interval([a["recall10"] - b["recall10"] for a, b in pairs]),
                }
            )

(HERE / "output.json").write_text(json.dumps({"seeds": seeds, "rows": rows}, indent=1) + "\n")
fmt = "{:+.4f} [{:+.4f}, {:+.4f}]".format
md = [
    "Arm − InfoNCE, paired by seed (seeds " + ", ".join(map(str, seeds)) + "), τ = 0.1, 100,000 pairs; mean [95 % t "
    "interval]. KL and best-link KL lower is better, top-1 and recall@10 higher; *disagree*: the KL and top-1 "
    "intervals both exclude 0 and point opposite ways. From the stored negatives.cells.jsonl (`compute.py`).",
    "",
    "| kernel | arm | k | universe KL | best-link KL | top-1 | recall@10 | disagree |",
    "|---|---|---|---|---|---|---|---|",
]
for r in rows:
    kl, t1 = r["universe_kl"], r["top1"]
    disagree = (kl[2] < 0 and t1[2] < 0) or (kl[1] > 0 and t1[1] > 0)
    md.append(
        f"| {r['kernel']} | {r['arm']} | {r['k']} | {fmt(*kl)} | {fmt(*r['best_link_kl'])} | {fmt(*t1)} | "
        f"{fmt(*r['recall10'])} | {'**yes**' if disagree else ''} |"
    )
(HERE / "output.md").write_text("\n".join(md) + "\n")
