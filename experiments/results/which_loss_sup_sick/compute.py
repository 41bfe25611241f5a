"""Which loss, when — supervised SICK with hard negatives: the field's losses beside InfoNCE and WEINCE, paired by seed.

    python experiments/results/which_loss_sup_sick/compute.py

Reads ../which_loss_sup_sick.json (the field's five losses at their defaults on `configs/sup_quickstart.yaml`; written
by `python -m weince_lab.experiments.text_runs --config configs/sup_quickstart.yaml --variants hardness_infonce hcl
dcl focal_infonce "sigmoid:loss_learning_rate=0.001" --seeds 0 1 2 --eval_tasks STS12,STS13,STS14,STS15,STS16,STSB
--out experiments/results/which_loss_sup_sick`) and ../sup_sick_mixed.json (InfoNCE and WEINCE (ols) on the same
recipe and seeds, the default mixed batches; their seed 0 re-made at later code gives the same scores,
../sup_sick_mixed_rerun.json). Writes output.json and output.md beside this file.

The tuning budget is one configuration per arm: each loss at its defaults (the papers' knobs), τ = 0.05 (the
recipe's), the sigmoid loss's t and b with their own learning rate 1e-3 (they barely move at the encoder's 3e-5);
nothing is selected, so no selection is reported on the test seeds. Per loss: the mean STS avg and STS-B over the
seeds, the difference to InfoNCE paired by seed with a 95 % Student-t interval, and the rank by mean STS avg.
"""

import json
from pathlib import Path

import numpy as np

from weince_lab.simulation.search import mean_interval

HERE = Path(__file__).resolve().parent
field = json.loads((HERE.parent / "which_loss_sup_sick.json").read_text())["per_run"]
stored = json.loads((HERE.parent / "sup_sick_mixed.json").read_text())["per_run"]
runs = {"infonce": stored["infonce"], "weince-ols": stored["weince-ols"], **field}
METRICS = ["STS avg", "STS-B"]
SEEDS = ["0", "1", "2"]


def interval(values: list[float]) -> list[float]:
    return list(mean_interval(values))  # mean and 95 % Student-t interval


out: dict = {"seeds": SEEDS, "configurations": {}, "losses": {}}
for name, by_seed in runs.items():
    assert sorted(by_seed) == SEEDS, (name, sorted(by_seed))
    row = {}
    for metric in METRICS:
        values = [by_seed[s][metric] for s in SEEDS]
        diffs = [by_seed[s][metric] - runs["infonce"][s][metric] for s in SEEDS]
        row[metric] = {"mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)),
                       "minus_infonce": interval(diffs) if name != "infonce" else None}  # fmt: skip
    out["losses"][name] = row
    out["configurations"][name] = "τ 0.05, its defaults" + (", loss lr 1e-3" if name.startswith("sigmoid") else "")
order = sorted(out["losses"], key=lambda n: -out["losses"][n]["STS avg"]["mean"])
for rank, name in enumerate(order, 1):
    out["losses"][name]["rank_sts_avg"] = rank


def cell(row: dict, metric: str) -> str:
    d = row[metric]
    diff = d["minus_infonce"]
    shown = f"{d['mean']:.2f} ± {d['sd']:.2f}"
    return shown + ("" if diff is None else f" | {diff[0]:+.2f} [{diff[1]:+.2f}, {diff[2]:+.2f}]")


lines = [
    "# Which loss, when: supervised SICK with hard negatives (all-MiniLM-L6-v2, `configs/sup_quickstart.yaml`)",
    "",
    "251 triplets + 1,033 pairs, batch 32, 3 epochs (123 steps), best STS-B dev checkpoint; test Spearman × 100, "
    "mean ± sd over seeds 0, 1, 2; difference to InfoNCE paired by seed, mean [95 % t interval]. One configuration "
    "per arm (its defaults, τ 0.05): nothing tuned, nothing selected.",
    "",
    "| rank (STS avg) | loss | configuration | STS avg | − InfoNCE | STS-B | − InfoNCE |",
    "|---|---|---|---|---|---|---|",
]
for name in order:
    row = out["losses"][name]
    avg, stsb = cell(row, "STS avg"), cell(row, "STS-B")
    if name == "infonce":
        avg, stsb = avg + " | —", stsb + " | —"
    lines.append(f"| {row['rank_sts_avg']} | {name.split(':')[0]} | {out['configurations'][name]} | {avg} | {stsb} |")
(HERE / "output.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
(HERE / "output.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
