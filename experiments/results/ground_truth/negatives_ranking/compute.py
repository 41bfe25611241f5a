"""Ranking beside KL for the stored `negatives` sweep, paired by seed, from its cells as stored (no re-run).

    python experiments/results/ground_truth/negatives_ranking/compute.py

Reads ../negatives.cells.jsonl (the full-size sweep, 3 seeds) and writes output.json and output.md beside this file:
for every kernel, arm and k, the arm − InfoNCE difference of the universe KL and of top-1 agreement with the Bayes
retriever, mean over seeds with a 95 % Student-t interval. The cells predate recall@10 and the best-link KL, which
only a re-run (`simcse-simulate negatives --workers 2 --out experiments/results/ground_truth`, ~20 min) adds.
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
cells = [json.loads(line) for line in (HERE.parent / "negatives.cells.jsonl").read_text().splitlines() if line]
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
                    "top1": interval([a["top1"] - b["top1"] for a, b in pairs]),
                }
            )

(HERE / "output.json").write_text(json.dumps({"seeds": seeds, "rows": rows}, indent=1) + "\n")
fmt = "{:+.4f} [{:+.4f}, {:+.4f}]".format
md = [
    "Arm − InfoNCE, paired by seed (seeds " + ", ".join(map(str, seeds)) + "), τ = 0.1, 100,000 pairs; mean [95 % t "
    "interval]. KL lower is better, top-1 higher. From the stored negatives.cells.jsonl (`compute.py`).",
    "",
    "| kernel | arm | k | universe KL | top-1 | disagree |",
    "|---|---|---|---|---|---|",
]
for r in rows:
    kl, t1 = r["universe_kl"], r["top1"]
    disagree = (kl[2] < 0 and t1[2] < 0) or (kl[1] > 0 and t1[1] > 0)
    md.append(f"| {r['kernel']} | {r['arm']} | {r['k']} | {fmt(*kl)} | {fmt(*t1)} | {'**yes**' if disagree else ''} |")
(HERE / "output.md").write_text("\n".join(md) + "\n")
