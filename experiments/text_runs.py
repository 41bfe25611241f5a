"""Seeded text runs: train each loss variant × seed with ``simcse_weince.cli.train_text``, evaluate every model with
``evaluate_sts`` (STS and optionally transfer), add alignment / uniformity, and assemble mean ± std tables.

    # warm start at CPU scale (all-MiniLM-L6-v2 on ~29k Wikipedia sentences; 5.5 min per run, 50 min in all here)
    .venv/bin/python -m experiments.text_runs --config configs/quickstart.yaml \\
        --variants infonce weince-unit weince-ols --seeds 0 1 2 --out experiments/results/text_warmstart
    # paper scale (GPU): see experiments/paper_scale.sh

Variants: ``infonce``, ``weince-unit``, ``weince-ols``, ``weince-hill``, and the link losses ``learned_link``,
``learned_temperature``, ``profiled_link``, ``arctanh`` at their defaults (their learned (a, b) at the end of each run
are tabled). Finished runs are reused, so an interrupted experiment can be resumed by running the same command
again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.common import (
    REPO,
    mean_std,
    plot_metrics,
    run_function,
    run_module,
    start_runs,
    summary_table,
    write_results,
)

STS_COLUMNS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")


LINK_VARIANTS = ("learned_link", "learned_temperature", "profiled_link", "arctanh")


def variant_args(variant: str) -> list[str]:
    if variant in LINK_VARIANTS:  # the link losses at their defaults (issue 43)
        return ["--loss", variant]
    loss, _, beta = variant.partition("-")
    if loss not in ("infonce", "weince") or (loss == "weince" and beta not in ("unit", "ols", "hill")):
        raise ValueError(
            f"unknown variant {variant!r}; expected infonce, weince-unit|ols|hill or one of {', '.join(LINK_VARIANTS)}"
        )
    return ["--loss", loss] + (["--beta_mode", beta] if beta else [])


def geometry(model_dir: Path, cache: Path) -> dict[str, float]:
    """Alignment and uniformity of the exported model on STS-B (see ``simcse-diagnose``); kept in ``cache``,
    computed in a run process (the driver never imports torch)."""
    if not cache.is_file():
        run_function(write_geometry, model_dir, cache)
    return json.loads(cache.read_text())


def write_geometry(model_dir: Path, cache: Path) -> None:
    from simcse_weince.diagnostics.text_geometry import stsb_sentences_and_pairs, text_geometry
    from simcse_weince.paths import senteval_root
    from simcse_weince.text.checkpoint import load_text_checkpoint

    ckpt = load_text_checkpoint(str(model_dir))
    model, tok = ckpt.model, ckpt.tokenizer
    sentences, pairs = stsb_sentences_and_pairs(senteval_root())
    g = text_geometry(model, tok, sentences, pairs, seed=0)
    cache.write_text(json.dumps({"alignment": g["alignment"], "uniformity": g["uniformity"]}))


LAMBDA_STATS = ("lambda", "lambda_frac_gt_half", "delta_aic", "rho")
LINK_STATS = ("link_a_final", "link_b_final")


def link_table(stats: dict[str, dict[int, dict[str, float | None]]]) -> str:
    """The link losses' final (a, b) per variant and seed (``results.json``), or an empty string without any."""
    rows = [
        f"| {v} | {seed} | {r['link_a_final']:.2f} | "
        + ("–" if r.get("link_b_final") is None else f"{r['link_b_final']:.3f}")
        + " |"
        for v, runs in stats.items()
        for seed, r in runs.items()
        if r.get("link_a_final") is not None
    ]
    return "\n".join(["| variant | seed | learned a | learned b |", "|---|---|---|---|", *rows]) if rows else ""


def lambda_table(stats: dict[str, dict[int, dict[str, float | None]]]) -> str:
    """What λ did during training, per variant (mean ± std over seeds of the run means): mean λ, the share of
    anchors with λ > 0.5, mean ΔAIC, mean ρ (1 − the anchor's hardest negative score); InfoNCE computes none."""
    lines = ["| variant | mean λ | share λ > 0.5 | mean ΔAIC | mean ρ |", "|---|---|---|---|---|"]
    for v, runs in stats.items():
        cells = []
        for key in LAMBDA_STATS:
            values = [r[key] for r in runs.values() if r.get(key) is not None]
            cells.append("{:.3f} ± {:.3f}".format(*mean_std(values)) if values else "–")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--variants", nargs="+", default=["infonce", "weince-ols"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval_tasks", default="sts")
    ap.add_argument("--eval_mode", default="test")
    ap.add_argument("--runs_dir", default=None, help="default: outputs/experiments/<out name>")
    ap.add_argument("--out", default=str(REPO / "experiments/results/text"))
    ap.add_argument(
        "--extra", nargs=argparse.REMAINDER, default=[], help="overrides passed to every training run (must come last)"
    )
    args = ap.parse_args()
    variants = {v: variant_args(v) for v in args.variants}
    start_runs()  # the run server imports the libraries while this process imports the evaluation's names
    from simcse_weince.evaluation.families.sts import STS_SHORT

    runs_dir = Path(args.runs_dir or REPO / "outputs/experiments" / Path(args.out).name)
    per_run: dict[str, dict[int, dict[str, float]]] = {v: {} for v in variants}
    curves: dict[str, list] = {}
    lam_stats: dict[str, dict[int, dict[str, float | None]]] = {v: {} for v in variants}
    for seed in args.seeds:
        for v, vargs in variants.items():
            out = runs_dir / f"{v}-seed{seed}"
            if not (out / "results.json").is_file():
                train_args = [
                    args.config,
                    *vargs,
                    "--seed",
                    str(seed),
                    "--output_dir",
                    str(out),
                    "--disable_tqdm",
                    "true",
                    *args.extra,
                ]
                run_module("simcse_weince.cli.train_text", train_args, out.with_suffix(".train.log"))
            ev = out / "eval"
            if not (ev / f"eval_{args.eval_mode}.json").is_file():
                eval_args = [
                    "--model",
                    str(out),
                    "--tasks",
                    args.eval_tasks,
                    "--mode",
                    args.eval_mode,
                    "--output_dir",
                    str(ev),
                    "--no_progress",
                ]
                run_module("simcse_weince.cli.evaluate", eval_args, out.with_suffix(".eval.log"))
            report = json.loads((ev / f"eval_{args.eval_mode}.json").read_text())
            row = {STS_SHORT.get(k, k): r["spearman"]["all"] for k, r in report["sts"].items()}
            row.update(
                {k: r["test_acc" if args.eval_mode != "dev" else "dev_acc"] for k, r in report["transfer"].items()}
            )
            # retrieval (evaluate_sts.py --tasks ...,retrieval): nDCG@10 × 100, the family's headline, per task
            row.update({k: 100 * r["metrics"]["ndcg@10"] for k, r in report.get("retrieval", {}).items()})
            for family, label in (("sts", "STS avg"), ("transfer", "transfer avg"), ("retrieval", "retrieval avg")):
                if report.get(f"{family}_avg") is not None:
                    row[label] = report[f"{family}_avg"]
            row.update(geometry(out / "model", ev / "geometry.json"))
            per_run[v][seed] = row
            hist = json.loads((out / "results.json").read_text())
            lam_stats[v][seed] = {k: hist.get(f"mean_{k}") for k in LAMBDA_STATS}
            lam_stats[v][seed].update({k: hist.get(k) for k in LINK_STATS})
            lam = hist.get("lambda_curve")  # (step, mean λ) at every logging step; none for InfoNCE
            if lam:
                curves[f"{v} seed {seed}"] = lam
            shown = ", ".join(f"{k} {x:.3f}" for k, x in row.items())
            print(f"{v} seed {seed}: {shown} (steps {hist['steps']})", flush=True)
    metrics = list(next(iter(per_run[args.variants[0]].values())))
    table, summary = summary_table(per_run, metrics, args.variants[0])
    header = (
        f"Text runs: {Path(args.config).name} {' '.join(args.extra)}; variants {args.variants}; seeds "
        f"{args.seeds}; {args.eval_mode} Spearman × 100 ('all'), accuracy, retrieval nDCG@10 × 100, alignment / "
        "uniformity (lower is better for both); mean ± std over seeds"
    )
    summary["per_run"] = {v: {str(s): r for s, r in runs.items()} for v, runs in per_run.items()}
    summary["lambda"] = {v: {str(s): r for s, r in runs.items()} for v, runs in lam_stats.items()}
    table += "\n\n" + lambda_table(lam_stats)
    if links := link_table(lam_stats):
        table += "\n\nThe link losses' (a, b) at the end of each run:\n\n" + links
    prefix = Path(args.out)
    write_results(prefix, table, summary, header)
    plot_metrics(
        per_run,
        [m for m in metrics if m in ("STS avg", "STS-B", "alignment", "uniformity")],
        prefix.with_suffix(".png"),
        curves,
        header[:120],
    )
    print(header + "\n\n" + table)


if __name__ == "__main__":
    main()
