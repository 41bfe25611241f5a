"""InfoNCE vs WEINCE at CPU scale, vision (the paper's own regime, from scratch).

    python -m weince_lab.experiments.vision_cpu [--seeds 0 1 2] [--config configs/vision/cpu_proxy_cifar10.yaml]

Each (loss, seed) is a full run of the CPU proxy recipe, ``cpu_proxy_cifar10.yaml`` (slim ResNet-18, 5,000-image
class-balanced CIFAR-10 subset from the JPEG zips, 14 epochs, batch 128, τ 0.5; the vision quickstart is this
recipe trained for 4 epochs); both losses share every seed, hence the same initial weights and data order.
Writes ``experiments/results/vision_cpu.{md,json,png}`` with mean ± std per loss and the paired difference from
the first loss. ``--losses`` takes any registered loss by name (at the config's settings and the loss's defaults),
or with settings, ``NAME:key=value,...`` (``sigmoid:temperature=0.1``), checked before any run.
Time: 8–9 min per run on 2 idle CPU cores (about 50 min for 2 losses × 3 seeds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from weince_lab.experiments.common import (
    REPO,
    continue_argv,
    mean_std,
    plot_metrics,
    run_log,
    run_module,
    split_variant,
    summary_table,
    variant_folder,
    write_results,
)
from weince_lab.report import table

METRICS = ("linear_probe", "knn200", "knn20", "R@1", "R@8")
DIAGNOSTICS = ("lambda", "delta_aic", "rho")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--losses", nargs="+", default=["infonce", "weince"], help="registered losses, NAME or NAME:key=value,..."
    )
    ap.add_argument("--config", default=str(REPO / "configs/vision/cpu_proxy_cifar10.yaml"))
    ap.add_argument("--runs_dir", default=str(REPO / "outputs/experiments/vision_cpu"))
    ap.add_argument("--out", default=str(REPO / "experiments/results/vision_cpu"))
    ap.add_argument(
        "--extra",
        nargs=argparse.REMAINDER,
        default=[],
        help="overrides for every run, e.g. --extra --num_train_epochs 1 (must come last)",
    )
    args = ap.parse_args()
    try:
        flags = {loss: loss_args(loss) for loss in args.losses}
        for loss in args.losses:  # every run's command line parsed before the first run starts
            check_run(args.config, [*flags[loss], *args.extra])
    except ValueError as err:
        print(f"error: --losses: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    per_run: dict[str, dict[int, dict[str, float]]] = {loss: {} for loss in args.losses}
    diag: dict[str, dict[int, dict[str, float]]] = {}
    curves: dict[str, list] = {}
    for seed in args.seeds:
        for loss in args.losses:
            out = Path(args.runs_dir) / f"{variant_folder(loss)}-seed{seed}"
            if not (out / "results.json").is_file():  # finished runs are reused, a killed one resumed
                run_module(
                    "simcse_weince.cli.train_vision",
                    [
                        args.config,
                        *flags[loss],
                        "--seed",
                        str(seed),
                        "--output_dir",
                        str(out),
                        "--eval_before_training",
                        "false",
                        "--disable_tqdm",
                        "true",
                        *args.extra,
                        *continue_argv(out)[0],
                    ],
                    run_log(out),
                )
            res = json.loads((out / "results.json").read_text())
            per_run[loss][seed] = res["after"]
            if res.get("mean_lambda") is not None:
                diag.setdefault(loss, {})[seed] = {k: res[f"mean_{k}"] for k in DIAGNOSTICS}
            if res.get("lambda_curve"):
                curves[f"{loss} seed {seed}"] = res["lambda_curve"]
            print(f"{loss} seed {seed}: " + ", ".join(f"{m} {res['after'][m]:.2f}" for m in METRICS), flush=True)
    table, summary = summary_table(per_run, METRICS, args.losses[0])
    if diag:  # what the loss saw: mean λ, ΔAIC (Gumbel − Weibull) and ρ over the training logs
        diag_table, summary["diagnostics"] = diagnostics_table(diag)
        table += "\n\nWEINCE's statistics over training (mean of the training logs, mean ± std over seeds):\n\n"
        table += diag_table
    header = (
        f"SimCLR at CPU scale ({Path(args.config).name} {' '.join(args.extra)}), seeds {args.seeds}: "
        "accuracy / recall × 100 on the probe sets, mean ± std over seeds"
    )
    prefix = Path(args.out)
    write_results(prefix, table, summary, header)
    plot_metrics(per_run, METRICS, prefix.with_suffix(".png"), curves, header)
    print(header + "\n\n" + table)


def loss_args(variant: str) -> list[str]:
    """The training flags of a ``--losses`` entry: ``--loss NAME`` and its settings' flags; ``ValueError`` naming
    the entry for an unknown loss or a malformed setting."""
    from simcse_weince.losses import LOSSES

    base, extra = split_variant(variant)
    if base not in LOSSES:
        raise ValueError(f"unknown loss {base!r} in {variant!r}; expected one of {', '.join(LOSSES)}")
    return ["--loss", base, *extra]


def check_run(config: str, argv: list[str]) -> None:
    """Parse a run's command line as ``train_vision`` does (no run, nothing written); ``ValueError`` with the
    one-line reason for a setting it refuses."""
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.training.config import ConfigError, parse_config

    try:
        parse_config(ARG_GROUPS, [config, *argv])
    except (ConfigError, SystemExit) as err:
        raise ValueError(f"{' '.join(argv)}: {err}") from None


def diagnostics_table(diag: dict[str, dict[int, dict[str, float]]]) -> tuple[str, dict]:
    """Markdown table (and summary) of the per-run diagnostic means, mean ± std over seeds, per loss."""
    rows = []
    summary: dict = {}
    for loss, runs in diag.items():
        cells = []
        for k in DIAGNOSTICS:
            values = [runs[s][k] for s in sorted(runs)]
            mu, sd = mean_std(values)
            summary.setdefault(loss, {})[k] = {"mean": mu, "std": sd, "runs": values}
            cells.append(f"{mu:.3f} ± {sd:.3f}")
        rows.append([loss, *cells])
    return "\n".join(table(["loss", "mean λ", "mean ΔAIC", "mean ρ"], rows)), summary


if __name__ == "__main__":
    main()
