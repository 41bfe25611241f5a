"""Which loss, when — known truth: the field's losses beside InfoNCE and WEINCE on trained tables, paired by seed.

    python experiments/results/which_loss_truth/compute.py

Reads temperature.cells.jsonl beside this file (written by `simcse-simulate temperature --kernels vmf endpoint --ks 64
--taus 0.1 --losses infonce weince hardness_infonce hcl dcl focal_infonce sigmoid --seeds 0 1 2 --steps 6000 --pairs
100000 --out experiments/results/which_loss_truth --workers 1`) and writes output.json and output.md.

Every arm has one configuration (τ = 0.1, the loss's own defaults): nothing is tuned or selected. Per kernel and
loss: the universe KL of the model's search law (softmax of the loss's ``search_logits``: s/τ, the sigmoid loss's
t·s + b) to the ideal search, the best-link KL (the best (a, b) link fitted on the learned cosines: the table's
ranking information, whatever law the loss implies), top-1 and recall@10 among 256 candidates; differences to
InfoNCE paired by seed, 95 % Student-t intervals; the convergence check (the KL at 1.5× the steps moves by at most
0.005 nats). Arms are ranked by KL and by top-1 only where every seed of every ranked cell passed the check.
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
cells = [json.loads(line) for line in (HERE / "temperature.cells.jsonl").read_text().splitlines() if line.strip()]
LOSSES = ["infonce", "weince", "hardness_infonce", "hcl", "dcl", "focal_infonce", "sigmoid"]
METRICS = {"universe_gap": "KL", "best_link_gap": "best-link KL", "top1": "top-1", "recall10": "recall@10"}


def interval(values):
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean()), float(v.mean() - half), float(v.mean() + half)]


by = {(c["cell"]["kernel"], c["cell"]["loss"], c["cell"]["seed"]): c for c in cells}
kernels = sorted({c["cell"]["kernel"] for c in cells}, key=["vmf", "endpoint", "blend"].index)
seeds = sorted({c["cell"]["seed"] for c in cells})
out: dict = {"seeds": seeds, "steps": cells[0]["convergence"]["steps"], "kernels": {}}
lines = [
    "# Which loss, when: known truth (trained tables, k = 64, τ = 0.1, each loss at its defaults)",
    "",
    f"N = 512 items, d = 8, {out['steps']} steps of 256 anchors, 100,000 training pairs, seeds {seeds}; means [95 % t "
    "interval] over seeds; differences to InfoNCE paired by seed. KL lower is better, top-1 and recall@10 higher. "
    "Converged: the universe KL at 1.5× the steps moved by at most 0.005 nats, in every seed.",
]
for kernel in kernels:
    rows, table = {}, []
    for loss in LOSSES:
        runs = [by[kernel, loss, s] for s in seeds if (kernel, loss, s) in by]
        if len(runs) < len(seeds):
            continue
        moved = [r["convergence"]["moved"] for r in runs]
        row = {
            "converged": all(r["convergence"]["converged"] for r in runs),
            "moved": [float(m) for m in moved],
            **{m: interval([r[m] for r in runs]) for m in METRICS},
        }
        if loss != "infonce":
            base = [by[kernel, "infonce", s] for s in seeds]
            row["minus_infonce"] = {
                m: interval([r[m] - b[m] for r, b in zip(runs, base, strict=True)]) for m in METRICS
            }
        rows[loss] = row
    ranked = [loss for loss, row in rows.items() if row["converged"]]
    for key, metric, sign in (("rank_kl", "universe_gap", 1), ("rank_top1", "top1", -1)):
        for rank, loss in enumerate(sorted(ranked, key=lambda n, m=metric, s=sign: s * rows[n][m][0]), 1):
            rows[loss][key] = rank
    out["kernels"][kernel] = rows
    header = "| loss | converged (KL moved) | KL | best-link KL | top-1 | recall@10 | KL − InfoNCE | top-1 − InfoNCE"
    lines += ["", f"## {kernel}", "", header + " | rank by KL | rank by top-1 |", "|" + "---|" * 10]
    for loss, row in rows.items():
        diff = row.get("minus_infonce")
        cells_ = [f"{row[m][0]:.4f}" if m.endswith("gap") else f"{row[m][0]:.3f}" for m in METRICS]
        kl_d = "—" if diff is None else "{:+.4f} [{:+.4f}, {:+.4f}]".format(*diff["universe_gap"])
        t1_d = "—" if diff is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*diff["top1"])
        status = ("yes" if row["converged"] else "**no**") + " (" + ", ".join(f"{m:+.4f}" for m in row["moved"]) + ")"
        ranks = [str(row.get(k, "not ranked")) for k in ("rank_kl", "rank_top1")]
        lines.append(
            f"| {loss} | {status} | " + " | ".join(cells_) + f" | {kl_d} | {t1_d} | " + " | ".join(ranks) + " |"
        )
(HERE / "output.json").write_text(json.dumps(out, indent=1) + "\n")
(HERE / "output.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
