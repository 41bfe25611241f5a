"""Does WEINCE behave differently when the tail has more negatives? Batch 128 vs batch 512, CPU scale.

    .venv/bin/python -m weince_lab.experiments.vision_batch [--seeds 0 1 2] [--losses infonce weince] [--epochs 5]

The CPU proxy recipe, ``cpu_proxy_cifar10.yaml`` (slim ResNet-18, 5,000-image CIFAR-10 subset, τ 0.5), for
``--epochs`` epochs at batch 128 and at batch 512 with ``gradient_cache_chunk_size 128``: the batch-norm layers see
128 images in both arms, so the arms differ in the number of negatives each anchor is scored against (254 vs
1,022) — and in the number of optimizer steps (4× fewer at 512 for the same epochs). Reports, per loss and batch,
the probe metrics and WEINCE's statistics over training (mean λ, ΔAIC, ρ), mean ± std over seeds, and the paired
difference 512 − 128. Finished runs are reused and a killed one resumes from its last complete checkpoint. Writes
``experiments/results/vision_batch.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from weince_lab.experiments.common import REPO, continue_argv, mean_std, run_module, write_results
from weince_lab.report import table

METRICS = ("linear_probe", "knn200", "R@1")
DIAGNOSTICS = ("lambda", "delta_aic", "rho")
ARMS = {128: [], 512: ["--gradient_cache_chunk_size", "128"]}
COMMON = ("--eval_before_training", "false", "--disable_tqdm", "true")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--losses", nargs="+", default=["infonce", "weince"])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--config", default=str(REPO / "configs/vision/cpu_proxy_cifar10.yaml"))
    ap.add_argument("--runs_dir", default=str(REPO / "outputs/experiments"))
    ap.add_argument("--out", default=str(REPO / "experiments/results/vision_batch"))
    args = ap.parse_args()
    runs: dict[tuple[str, int], dict[int, dict[str, float]]] = {}
    for seed in args.seeds:
        for batch, extra in ARMS.items():
            for loss in args.losses:
                out = Path(args.runs_dir) / f"vision_batch_b{batch}" / f"{loss}-seed{seed}"
                if not (out / "results.json").is_file():  # finished runs are reused, a killed one resumed
                    train = [args.config, "--loss", loss, "--seed", str(seed), "--output_dir", str(out), *COMMON]
                    train += ["--num_train_epochs", str(args.epochs), "--per_device_train_batch_size", str(batch)]
                    train += [*extra, *continue_argv(out)[0]]
                    run_module("simcse_weince.cli.train_vision", train, out.with_suffix(".log"))
                res = json.loads((out / "results.json").read_text())
                row = {m: res["after"][m] for m in METRICS} | {"steps": res["steps"]}
                row |= {d: res.get(f"mean_{d}") for d in DIAGNOSTICS}
                runs.setdefault((loss, batch), {})[seed] = row
                print(f"{loss} batch {batch} seed {seed}: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    table, summary = batch_table(runs, args.seeds)
    header = (
        f"SimCLR at CPU scale ({Path(args.config).name}, {args.epochs} epochs): batch 128 vs batch 512 (gradient "
        f"caching, chunk 128), seeds {args.seeds}; mean ± std over seeds, and the paired difference 512 − 128"
    )
    write_results(Path(args.out), table, summary, header)
    print(header + "\n\n" + table)


def batch_table(runs: dict[tuple[str, int], dict[int, dict]], seeds: list[int]) -> tuple[str, dict]:
    """Markdown rows per (loss, batch), per loss the paired difference 512 − 128, and with both losses the
    paired A/B (WEINCE − InfoNCE) at each batch and its change from 128 to 512, over the seeds."""
    cols = [*METRICS, *DIAGNOSTICS]
    names = {"lambda": "mean λ", "delta_aic": "mean ΔAIC", "rho": "mean ρ"}
    rows = []
    summary: dict = {"seeds": seeds, "arms": {}, "difference": {}}

    def cell(values: list) -> str:
        if any(v is None for v in values):
            return "–"
        mu, sd = mean_std(values)
        return f"{mu:.3f} ± {sd:.3f}" if abs(mu) < 10 else f"{mu:.2f} ± {sd:.2f}"

    for (loss, batch), by_seed in runs.items():
        seeded = [by_seed[s] for s in seeds]
        summary["arms"][f"{loss}-b{batch}"] = {c: [r[c] for r in seeded] for c in [*cols, "steps"]}
        rows.append([loss, batch, seeded[0]["steps"], *(cell([r[c] for r in seeded]) for c in cols)])
    for loss in dict.fromkeys(loss for loss, _ in runs):
        if (loss, 128) in runs and (loss, 512) in runs:
            diffs = {
                c: [
                    None if runs[(loss, 512)][s][c] is None else runs[(loss, 512)][s][c] - runs[(loss, 128)][s][c]
                    for s in seeds
                ]
                for c in cols
            }
            summary["difference"][loss] = diffs
            rows.append([loss, "512 − 128 (paired)", "", *(cell(diffs[c]) for c in cols)])
    # the A/B at each batch size, and how it changes with 4× the negatives (the interaction), paired by seed
    gaps: dict[int, dict[str, list[float]]] = {}
    for batch in (128, 512):
        if ("weince", batch) in runs and ("infonce", batch) in runs:
            w, i = runs[("weince", batch)], runs[("infonce", batch)]
            gaps[batch] = {c: [w[s][c] - i[s][c] for s in seeds] for c in METRICS}
            rows.append(["weince − infonce (paired)", batch, "", *(cell(gaps[batch][c]) if c in METRICS else "–"
                                                                    for c in cols)])  # fmt: skip
    summary["weince_minus_infonce"] = {str(b): g for b, g in gaps.items()}
    if len(gaps) == 2:
        inter = {c: [b - a for a, b in zip(gaps[128][c], gaps[512][c], strict=True)] for c in METRICS}
        summary["interaction"] = inter
        rows.append(["(weince − infonce) at 512 − at 128", "", "", *(cell(inter[c]) if c in METRICS else "–"
                                                                   for c in cols)])  # fmt: skip
    return "\n".join(table(["loss", "batch", "steps", *(names.get(c, c) for c in cols)], rows)), summary


if __name__ == "__main__":
    main()
