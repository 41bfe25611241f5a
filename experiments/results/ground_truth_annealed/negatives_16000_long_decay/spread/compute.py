"""How far apart the trained tables of one cell land when only the schedule differs (k = 4 to 256).

    python experiments/results/ground_truth_annealed/negatives_16000_long_decay/spread/compute.py [OUT]

Reads the cells of this sweep (16,000 steps, the rate decaying to 0 over the last 15,000; each checked against
24,000 steps with the same decay) and the same (kernel, loss, k, seed) cells of the 12,000-step sweeps
(``negatives_12000_<kernel>``: 12,000 steps, a 4,000-step decay, checked against 18,000). Each cell so has four
trained tables, all from the same seed (universe, pairs, negatives' stream, initial table), whose schedules differ.
Writes output.json and output.md beside this file (or into OUT): per cell the four universe KLs and their standard
deviation s_w (the schedules differ in length too, so s_w holds any drift with the budget besides the spread of the
end point); per (kernel, k) the pooled within-cell deviation sqrt(mean s_w^2) against the seeds' spread (the
standard deviation over seeds of the 12,000-step KL), and the share of checks that would pass if a check's two
tables differed by chance alone: with each of deviation s_w, their difference is normal of deviation sqrt(2) s_w and
lies within the tolerance t = 0.005 nats with probability erf(t / (2 s_w)).
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
LONG = HERE.parent
ANNEALED = LONG.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
TOLERANCE = 0.005


def read(path: Path) -> dict:
    cells = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {tuple(c["cell"][f] for f in ("kernel", "loss", "k", "seed")): c for c in cells}


long = read(LONG / "negatives.cells.jsonl")
kernels = {kernel for kernel, *_ in long}
twelve = {kernel: read(ANNEALED / f"negatives_12000_{kernel}" / "negatives.cells.jsonl") for kernel in kernels}
rows, groups = [], {}
for key in sorted(long):
    kernel, loss, k, seed = key
    short = twelve[kernel][key]
    tables = []
    for cell in (short, long[key]):
        c = cell["convergence"]
        tables += [
            {"steps": c["steps"], "anneal": c["anneal"], "kl": c["universe_gap"]},
            {"steps": c["check_steps"], "anneal": c["anneal"], "kl": c["check_universe_gap"]},
        ]
    kls = np.array([t["kl"] for t in tables])
    within = float(kls.std(ddof=1))
    rows.append(
        {
            "kernel": kernel,
            "loss": loss,
            "k": k,
            "seed": seed,
            "tables": tables,
            "within_sd": within,
            "moves": [short["convergence"]["moved"], long[key]["convergence"]["moved"]],
        }
    )
    groups.setdefault((kernel, loss, k), []).append(rows[-1])

summary = []
for (kernel, loss, k), members in groups.items():
    pooled = float(np.sqrt(np.mean([m["within_sd"] ** 2 for m in members])))
    seeds_sd = float(np.std([m["tables"][0]["kl"] for m in members], ddof=1))
    passed = [sum(abs(m["moves"][i]) <= TOLERANCE for m in members) for i in (0, 1)]
    summary.append(
        {
            "kernel": kernel,
            "loss": loss,
            "k": k,
            "seeds": len(members),
            "pooled_within_sd": pooled,
            "between_seed_sd_12000": seeds_sd,
            "checks_passed_12000": passed[0],
            "checks_passed_16000": passed[1],
            "pass_share_by_chance": math.erf(TOLERANCE / (2 * pooled)),
        }
    )

(OUT / "output.json").write_text(json.dumps({"cells": rows, "summary": summary}, indent=2) + "\n", encoding="utf-8")
lines = [
    "Four trained tables per cell, one seed, schedules differing: universe KL at 12,000 and 18,000 steps (a 4,000-step",
    "decay), 16,000 and 24,000 steps (a 15,000-step decay); s_w their standard deviation (drift with the budget",
    "included).",
    "",
    "| kernel | loss | k | seed | 12,000 | 18,000 | 16,000 | 24,000 | s_w |",
    "|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    kl = " | ".join(f"{t['kl']:.4f}" for t in r["tables"])
    lines.append(f"| {r['kernel']} | {r['loss']} | {r['k']} | {r['seed']} | {kl} | {r['within_sd']:.4f} |")
lines += [
    "",
    f"Per arm: the pooled within-cell deviation, the seeds' deviation at 12,000 steps, checks passed (tolerance "
    f"{TOLERANCE}) with the 4,000-step and the 15,000-step decay, and the share a check passes if its two tables",
    "differ by chance alone, erf(0.005 / (2 pooled s_w)):",
    "",
    "| kernel | loss | k | pooled s_w | seeds' sd | passed, 4,000-step decay | passed, 15,000-step decay | by chance |",
    "|---|---|---|---|---|---|---|---|",
]
for s in summary:
    lines.append(
        f"| {s['kernel']} | {s['loss']} | {s['k']} | {s['pooled_within_sd']:.4f} | {s['between_seed_sd_12000']:.4f} "
        f"| {s['checks_passed_12000']}/{s['seeds']} | {s['checks_passed_16000']}/{s['seeds']} "
        f"| {s['pass_share_by_chance']:.2f} |"
    )
(OUT / "output.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
