"""Which loss, when — vision, the CPU proxy (CIFAR-10 SimCLR): the field's losses beside InfoNCE and WEINCE, paired by
seed.

    python experiments/results/which_loss_vision/compute.py

Reads ../which_loss_vision.json, written by `python -m weince_lab.experiments.vision_cpu --losses infonce weince
hardness_infonce hcl dcl focal_infonce sigmoid:temperature=0.1 --seeds 0 1 2 --runs_dir
outputs/experiments/which_loss_vision --out experiments/results/which_loss_vision --extra --num_train_epochs 4`:
every arm trained in the same session, the same initial weights and data order at each seed
(`configs/vision/cpu_proxy_cifar10.yaml` at 4 epochs, the vision quickstart's length: slim ResNet-18, 5,000 CIFAR-10
images, batch 128, NT-Xent layout), and ./epochs.json (each run's k-NN 200 at every epoch, from its run log:
gather.py). Writes output.json and output.md beside this file.

Two kinds of figure. The recipe evaluates k-NN 200 on the probe test set after every epoch, keeps the best
checkpoint by it and scores that one (linear probe, k-NN, R@1): every arm is the best of its 4 epochs, chosen on the
test images (the last epoch in 15 of the 21 runs). So the table leads with the last model's k-NN 200 (epoch 4, no
selection), ranks by it, and gives the kept checkpoint's figures beside it, marked as selected.

The tuning budget is one configuration per arm: each loss at the recipe's τ 0.5 and its own defaults (the papers'
knobs); the sigmoid loss at its paper's start t = 10, b = −10 (τ 0.1: at the recipe's τ its start would be t = 2,
b = −10, every logit below −8), t and b learned at the run's rate. Nothing is selected, so no selection is
reported on the test seeds. Per loss: mean ± sd over the seeds, the difference to InfoNCE paired by seed with a
95 % Student-t interval, and the rank by the last model's mean k-NN 200.
"""

import json
from pathlib import Path

import numpy as np

from weince_lab.experiments.common import variant_folder
from weince_lab.simulation.search import mean_interval

HERE = Path(__file__).resolve().parent
stored = json.loads((HERE.parent / "which_loss_vision.json").read_text())
epochs = json.loads((HERE / "epochs.json").read_text())
SEEDS = stored["seeds"]
METRICS = ["knn200_last", "linear_probe", "knn200", "R@1"]
LAST = "4"
CONFIGURATIONS = {
    "infonce": "τ 0.5",
    "weince": "τ 0.5, β mode ols (the recipe's)",
    "hardness_infonce": "τ 0.5, in-batch negatives, strength 9",
    "hcl": "τ 0.5, β 1, τ⁺ 0.1",
    "dcl": "τ 0.5, no von Mises weight",
    "focal_infonce": "τ 0.5, margin 0.3",
    "sigmoid:temperature=0.1": "t 10, b −10 at the start (τ 0.1), learned",
}


def interval(values: list[float]) -> list[float]:
    return list(mean_interval(values))  # mean and 95 % Student-t interval


runs = {name: {m: by_metric[m]["runs"] for m in METRICS[1:]} for name, by_metric in stored["losses"].items()}
out_kept = {}
for name in runs:
    by_seed = epochs[variant_folder(name)]  # keyed by the run folder's name
    runs[name]["knn200_last"] = [by_seed[str(s)]["knn200_by_epoch"][LAST] for s in SEEDS]
    out_kept[name] = [by_seed[str(s)]["kept_epoch"] for s in SEEDS]
assert set(runs) == set(CONFIGURATIONS), sorted(runs)
out: dict = {"seeds": SEEDS, "configurations": CONFIGURATIONS, "kept_epoch": out_kept, "losses": {}}
for name, by_metric in runs.items():
    row = {}
    for metric in METRICS:
        values = by_metric[metric]
        assert len(values) == len(SEEDS), (name, metric)
        diffs = [v - b for v, b in zip(values, runs["infonce"][metric], strict=True)]
        row[metric] = {"mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)),
                       "minus_infonce": interval(diffs) if name != "infonce" else None}  # fmt: skip
    out["losses"][name] = row
order = sorted(out["losses"], key=lambda n: -out["losses"][n]["knn200_last"]["mean"])
for rank, name in enumerate(order, 1):
    out["losses"][name]["rank_knn200_last"] = rank


def cell(row: dict, metric: str) -> str:
    d = row[metric]
    diff = d["minus_infonce"]
    shown = f"{d['mean']:.2f} ± {d['sd']:.2f}"
    return shown + (" | —" if diff is None else f" | {diff[0]:+.2f} [{diff[1]:+.2f}, {diff[2]:+.2f}]")


lines = [
    "# Which loss, when: vision, the CPU proxy (CIFAR-10 SimCLR, `configs/vision/cpu_proxy_cifar10.yaml` at 4 epochs)",
    "",
    f"Slim ResNet-18, 5,000 training images, batch 128, 156 steps; probes on 2,000 / 1,000 images; accuracy × 100, "
    f"mean ± sd over seeds {', '.join(map(str, SEEDS))}; difference to InfoNCE paired by seed (same initial weights "
    "and data order), mean [95 % t interval]. One configuration per arm, nothing tuned. *Last model*: k-NN 200 after "
    "the 4th epoch, nothing selected (ranked by it). *Kept*: the checkpoint the recipe kept, the best of the 4 "
    "epochs by k-NN 200 on the probe test set (selected on test images, every arm alike), and its linear probe, "
    "k-NN 200 and R@1.",
    "",
    "| rank | loss | configuration | k-NN 200, last model | − InfoNCE | linear probe, kept | − InfoNCE "
    "| k-NN 200, kept | − InfoNCE | R@1, kept | − InfoNCE | kept epoch per seed |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for name in order:
    row = out["losses"][name]
    cells = " | ".join(cell(row, m) for m in METRICS)
    kept = ", ".join(map(str, out_kept[name]))
    lines.append(f"| {row['rank_knn200_last']} | {name.split(':')[0]} | {CONFIGURATIONS[name]} | {cells} | {kept} |")
(HERE / "output.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
(HERE / "output.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
