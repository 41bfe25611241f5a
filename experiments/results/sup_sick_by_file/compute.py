"""Batches from one file at a time against mixed batches, on the supervised SICK quickstart, paired by seed.

    python experiments/results/sup_sick_by_file/compute.py

Reads ../sup_sick_by_file.json (`configs/sup_quickstart.yaml --source_batches proportional`: every batch all
triplets or all pairs; written by `python -m weince_lab.experiments.text_runs --config configs/sup_quickstart.yaml
--variants infonce weince-ols --seeds 0 1 2 --eval_tasks STS12,STS13,STS14,STS15,STS16,STSB --out
experiments/results/sup_sick_by_file --extra --source_batches proportional`) and ../sup_sick_mixed.json (the same
without the flag: the triplets and pairs shuffled together, the default), and ../sup_sick_mixed_rerun.json when
present (seed 0 of the mixed InfoNCE run re-made at the by-file run's code, to show the pairing holds). Writes
output.json and output.md beside this file: per loss and task, proportional − mixed, mean over the seeds with a
95 % Student-t interval.
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
by_file = json.loads((HERE.parent / "sup_sick_by_file.json").read_text())["per_run"]
mixed = json.loads((HERE.parent / "sup_sick_mixed.json").read_text())["per_run"]
TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "STS avg"]


def interval(values):
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean()), float(v.mean() - half), float(v.mean() + half)]


out = {"difference": {}, "by_file": {}, "mixed": {}}
lines = [
    "# Batches from one file (source_batches: proportional) − mixed batches, supervised SICK quickstart",
    "",
    "all-MiniLM-L6-v2, 251 triplets + 1,033 pairs, batch 32, 3 epochs, best STS-B dev checkpoint; test sets × 100; "
    "paired by seed (0, 1, 2), mean [95 % t interval].",
    "",
    "| loss | " + " | ".join(TASKS) + " |",
    "|---|" + "---|" * len(TASKS),
]
for loss in by_file:
    seeds = sorted(by_file[loss], key=int)
    diffs = {t: [by_file[loss][s][t] - mixed[loss][s][t] for s in seeds] for t in TASKS}
    out["difference"][loss] = {t: interval(v) for t, v in diffs.items()}
    out["by_file"][loss] = {t: interval([by_file[loss][s][t] for s in seeds]) for t in TASKS}
    out["mixed"][loss] = {t: interval([mixed[loss][s][t] for s in seeds]) for t in TASKS}
    cells = [f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]" for m, lo, hi in out["difference"][loss].values()]
    lines.append(f"| {loss}: proportional − mixed | " + " | ".join(cells) + " |")
rerun_file = HERE.parent / "sup_sick_mixed_rerun.json"
if rerun_file.exists():
    rerun = json.loads(rerun_file.read_text())["per_run"]["infonce"]["0"]
    out["mixed_rerun_infonce_seed0"] = {t: [rerun[t], mixed["infonce"]["0"][t]] for t in TASKS}
    worst = max(abs(rerun[t] - mixed["infonce"]["0"][t]) for t in TASKS)
    lines += ["", f"The stored mixed InfoNCE seed 0 re-made at this code: largest task difference {worst:.3f}."]
(HERE / "output.json").write_text(json.dumps(out, indent=1) + "\n")
(HERE / "output.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
