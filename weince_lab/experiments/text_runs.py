"""Seeded text runs: train each loss variant × seed with ``simcse_weince.cli.train_text``, evaluate every model with
``evaluate_sts`` (STS and optionally transfer), add alignment / uniformity, and assemble mean ± std tables.

    # warm start at CPU scale (all-MiniLM-L6-v2 on ~29k Wikipedia sentences; 5.5 min per run, 50 min in all here)
    .venv/bin/python -m weince_lab.experiments.text_runs --config configs/quickstart.yaml \\
        --variants infonce weince-unit weince-ols --seeds 0 1 2 --out experiments/results/text_warmstart
    # paper scale (GPU): see experiments/paper_scale.sh

Variants: ``infonce``, ``weince-unit``, ``weince-ols``, ``weince-hill``, every other registered loss by its name at
its defaults (the link losses' learned (a, b) at the end of each run are tabled), and any of them with settings,
``NAME:key=value,...`` (one configuration of a tuning budget). Finished runs are reused and a killed one resumes
from its last complete checkpoint (one killed before its first is started again), so an interrupted experiment is
resumed by running the same command again.

Besides the scores, each run's training time (``train_minutes``, from its ``results.json``) and its validation curve
(``dev_curve``: the STS-B dev Spearman at every evaluation, plotted into ``<out>_dev.png``) are reported.
``--diagnose`` adds, per final model, the anisotropy (the mean cosine of random sentence pairs) and
``simcse-diagnose``'s ξ̂ and link (a, b) (:func:`weince_lab.experiments.text_space.space_diagnostics`, issue 44),
computed once
and kept in the run's ``eval/diagnose.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from weince_lab.experiments.common import (
    REPO,
    continue_argv,
    mean_std,
    plot_metrics,
    run_function,
    run_log,
    run_module,
    split_variant,
    start_runs,
    summary_table,
    variant_folder,
    write_results,
)
from weince_lab.experiments.text_space import space_diagnostics
from weince_lab.report import table

STS_COLUMNS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")


LINK_VARIANTS = ("learned_link", "learned_temperature", "profiled_link", "arctanh")


def variant_args(variant: str) -> list[str]:
    """The training flags of a variant: ``infonce``, ``weince-unit|ols|hill``, any registered loss by its name at
    its defaults, or any of these with settings after a colon, ``NAME:key=value,key=value`` (``hcl:hcl_beta=2,
    temperature=0.1``: one configuration of a tuning budget)."""
    from simcse_weince.losses import LOSSES

    base, extra = split_variant(variant)
    if base in LOSSES and base != "weince":
        return ["--loss", base, *extra]
    loss, _, beta = base.partition("-")
    if loss != "weince" or beta not in ("unit", "ols", "hill"):
        raise ValueError(
            f"unknown variant {variant!r}; expected weince-unit|ols|hill or a registered loss ({', '.join(LOSSES)}), "
            "optionally with :key=value,... settings"
        )
    return ["--loss", loss, "--beta_mode", beta, *extra]


def run_folder(runs_dir: Path, variant: str, seed: int) -> Path:
    """A run's folder, ``<variant_folder(variant)>-seed<N>`` (``hcl:temperature=0.1`` -> ``hcl_temperature_0.1-seed0``:
    no ``:`` or ``=`` in a path). A folder named by the variant's raw text, as runs were named before, is the run's
    when it exists and the new name does not, so stored runs are still reused and resumed."""
    named = runs_dir / f"{variant_folder(variant)}-seed{seed}"
    raw = runs_dir / f"{variant}-seed{seed}"
    return raw if raw != named and raw.is_dir() and not named.exists() else named


def geometry(model_dir: Path, cache: Path) -> dict[str, float]:
    """Alignment and uniformity of the exported model on STS-B (see ``simcse-diagnose``); kept in ``cache``,
    computed in a run process (the driver never imports torch)."""
    if not cache.is_file():
        run_function(write_geometry, model_dir, cache)
    return json.loads(cache.read_text())


def write_geometry(model_dir: Path, cache: Path) -> None:
    from simcse_weince.core.paths import senteval_root
    from simcse_weince.diagnostics.text_geometry import stsb_sentences_and_pairs, text_geometry
    from simcse_weince.text.checkpoint import load_text_checkpoint

    ckpt = load_text_checkpoint(str(model_dir))
    model, tok = ckpt.model, ckpt.tokenizer
    sentences, pairs = stsb_sentences_and_pairs(senteval_root())
    g = text_geometry(model, tok, sentences, pairs, seed=0)
    cache.write_text(json.dumps({"alignment": g["alignment"], "uniformity": g["uniformity"]}))


def diagnostics(model_dir: Path, cache: Path) -> dict:
    """:func:`~weince_lab.experiments.text_space.space_diagnostics` of the exported model in its own inference pooler,
    with the
    anisotropy on the STS-B dev + test sentences; kept in ``cache`` (the diagnosis itself in the folder of that name
    without ``.json``), computed in a run process."""
    if not cache.is_file():
        run_function(write_diagnostics, model_dir, cache)
    return json.loads(cache.read_text())


def write_diagnostics(model_dir: Path, cache: Path) -> None:
    from simcse_weince.core.paths import senteval_root
    from simcse_weince.diagnostics.text_geometry import stsb_sentences_and_pairs

    sentences, _ = stsb_sentences_and_pairs(senteval_root())
    found = space_diagnostics(str(model_dir), cache.with_suffix(""), None, sentences)
    cache.write_text(json.dumps(found))


def curve_from_logs(histories: list[list[dict]], metric: str, before: float | None = None) -> list[list[float]]:
    """``[step, score]`` of every evaluation of ``metric`` (the Trainer's log key ``eval_<metric>``) in the log
    histories, in step order (a step logged in several histories counts once), with ``before`` at step 0."""
    points = {0: float(before)} if before is not None else {}
    for history in histories:
        for entry in history:
            if f"eval_{metric}" in entry and "step" in entry:
                points[int(entry["step"])] = float(entry[f"eval_{metric}"])
    return [[step, points[step]] for step in sorted(points)]


def dev_curve(run: Path, results: dict) -> list[list[float]]:
    """The run's validation curve (STS-B dev Spearman by default): the Trainer's evaluations from the
    ``log_history`` of every checkpoint's ``trainer_state.json`` (and of ``results.json`` if it has one), and
    ``eval_before_training``'s score (``results.json``'s ``before``) at step 0.

    The newest checkpoint's history holds every evaluation up to it; a run with ``save_total_limit: 1`` keeps only
    its best checkpoint, so its curve ends at the best step."""
    chosen = results.get("validation") or {"setting": "stsb", "metric": "stsb_spearman"}
    key = "stsb_dev" if chosen.get("setting", "stsb") == "stsb" else "validation"  # train_text's name for it
    histories = [
        json.loads(p.read_text()).get("log_history", []) for p in sorted(run.glob("checkpoint-*/trainer_state.json"))
    ]
    histories.append(results.get("log_history") or [])
    return curve_from_logs(histories, chosen["metric"], (results.get("before") or {}).get(key))


LAMBDA_STATS = ("lambda", "lambda_frac_gt_half", "delta_aic", "rho")
LINK_STATS = ("link_a_final", "link_b_final")
DIAG_STATS = {"diag_xi": "xi", "diag_a": "a", "diag_a_ci": "a_ci", "diag_b": "b", "diag_b_ci": "b_ci",
              "diag_identified": "link_identifiable"}  # fmt: skip


def run_stats(results: dict) -> dict[str, float | list | None]:
    """A run's mean λ stats (``mean_<stat>``), its link loss's final (a, b) and its training time in minutes
    (``train_seconds``: the session that finished the run) from its ``results.json``."""
    stats: dict[str, float | list | None] = {k: results.get(f"mean_{k}") for k in LAMBDA_STATS}
    stats.update({k: results.get(k) for k in LINK_STATS})
    seconds = results.get("train_seconds")
    stats["train_minutes"] = seconds / 60 if seconds is not None else None
    return stats


def score_row(report: dict, eval_mode: str, short: dict[str, str]) -> dict[str, float]:
    """The scores of one evaluation report (``evaluate``'s json): STS Spearman ('all') under the ``short`` names,
    transfer accuracy, retrieval nDCG@10 × 100 and the families' averages; a family it lacks adds nothing."""
    row = {short.get(k, k): r["spearman"]["all"] for k, r in report.get("sts", {}).items()}
    row.update({k: r["test_acc" if eval_mode != "dev" else "dev_acc"] for k, r in report.get("transfer", {}).items()})
    # retrieval (evaluate_sts.py --tasks ...,retrieval): nDCG@10 × 100, the family's headline, per task
    row.update({k: 100 * r["metrics"]["ndcg@10"] for k, r in report.get("retrieval", {}).items()})
    for family, label in (("sts", "STS avg"), ("transfer", "transfer avg"), ("retrieval", "retrieval avg")):
        if report.get(f"{family}_avg") is not None:
            row[label] = report[f"{family}_avg"]
    return row


def link_table(stats: dict[str, dict[int, dict[str, float | None]]]) -> str:
    """The link losses' final (a, b) per variant and seed (``results.json``), or an empty string without any."""
    rows = [
        [v, seed, f"{r['link_a_final']:.2f}", "–" if r.get("link_b_final") is None else f"{r['link_b_final']:.3f}"]
        for v, runs in stats.items()
        for seed, r in runs.items()
        if r.get("link_a_final") is not None
    ]
    return "\n".join(table(["variant", "seed", "learned a", "learned b"], rows)) if rows else ""


def lambda_table(stats: dict[str, dict[int, dict[str, float | None]]]) -> str:
    """What λ did during training, per variant (mean ± std over seeds of the run means): mean λ, the share of
    anchors with λ > 0.5, mean ΔAIC, mean ρ (1 − the anchor's hardest negative score); InfoNCE computes none."""
    rows = []
    for v, runs in stats.items():
        cells = []
        for key in LAMBDA_STATS:
            values = [r[key] for r in runs.values() if r.get(key) is not None]
            cells.append("{:.3f} ± {:.3f}".format(*mean_std(values)) if values else "–")
        rows.append([v, *cells])
    return "\n".join(table(["variant", "mean λ", "share λ > 0.5", "mean ΔAIC", "mean ρ"], rows))


def time_table(stats: dict[str, dict[int, dict[str, float | None]]]) -> str:
    """Training minutes per run, mean ± std over seeds per variant, or an empty string without any."""
    rows = []
    for v, runs in stats.items():
        values = [r["train_minutes"] for r in runs.values() if r.get("train_minutes") is not None]
        if values:
            rows.append([v, "{:.1f} ± {:.1f}".format(*mean_std(values)), len(values)])
    return "\n".join(table(["variant", "minutes per run", "runs"], rows)) if rows else ""


def _interval(ci: list[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–"


def diagnose_table(per_run: dict[str, dict[int, dict[str, float]]], stats: dict[str, dict[int, dict]]) -> str:
    """Anisotropy and ``simcse-diagnose``'s ξ̂ and (a, b) with their 95 % intervals per variant and seed (runs
    diagnosed with ``--diagnose``), and whether the diagnosis identified (a, b) (not when the positive ranks first
    for nearly every anchor), or an empty string without any."""
    rows = [
        [v, seed, f"{per_run[v][seed]['anisotropy']:.3f}", f"{r['diag_xi']:.3f}",
         f"{r['diag_a']:.2f} {_interval(r.get('diag_a_ci'))}", f"{r['diag_b']:.3f} {_interval(r.get('diag_b_ci'))}",
         "no" if r.get("diag_identified") is False else "yes"]
        for v, runs in stats.items()
        for seed, r in runs.items()
        if r.get("diag_a") is not None
    ]  # fmt: skip
    header = ["variant", "seed", "anisotropy", "ξ̂", "a [95 % interval]", "b [95 % interval]", "(a, b) identified"]
    return "\n".join(table(header, rows)) if rows else ""


def interval_table(summary: dict, metrics: list[str]) -> str:
    """Every variant's paired difference from the base (``summary_table``'s per-seed differences): mean and 95 %
    Student-t interval over the seeds, per metric; each interval also stored in ``summary`` (``interval95``). An
    empty string with one variant or fewer than two seeds (an interval needs two)."""
    from weince_lab.simulation.search import mean_interval  # imported at the end: the driver runs without torch

    if not summary["difference"] or len(summary["seeds"]) < 2:
        return ""
    rows = []
    for other, by_metric in summary["difference"].items():
        cells = []
        for m in metrics:
            mean, low, high = mean_interval(by_metric[m]["per_seed"])
            by_metric[m]["interval95"] = [low, high]
            cells.append(f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]")
        rows.append([f"{other} − {summary['base']}", *cells])
    return "\n".join(table(["paired difference", *metrics], rows))


def plot_dev_curves(curves: dict[str, dict[int, list]], path: Path, title: str) -> None:
    """One line per run (step, dev score), one colour per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (v, runs) in enumerate(curves.items()):
        for k, pts in enumerate(runs.values()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=f"C{i}", alpha=0.7, marker=".",
                    label=v if k == 0 else None)  # fmt: skip
    ax.set_xlabel("step")
    ax.set_ylabel("dev Spearman × 100")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
        "--diagnose",
        action="store_true",
        help="also the anisotropy and simcse-diagnose's xi and (a, b) of each final model (cached in its eval folder)",
    )
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
    dev: dict[str, dict[int, list]] = {v: {} for v in variants}
    for seed in args.seeds:
        for v, vargs in variants.items():
            out = run_folder(runs_dir, v, seed)
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
                    *continue_argv(out)[0],  # a killed run resumes from its last complete checkpoint
                ]
                run_module("simcse_weince.cli.train_text", train_args, run_log(out, ".train"))
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
                run_module("simcse_weince.cli.evaluate", eval_args, run_log(out, ".eval"))
            report = json.loads((ev / f"eval_{args.eval_mode}.json").read_text())
            row = score_row(report, args.eval_mode, STS_SHORT)
            row.update(geometry(out / "model", ev / "geometry.json"))
            hist = json.loads((out / "results.json").read_text())
            lam_stats[v][seed] = run_stats(hist)
            if args.diagnose:
                diag = diagnostics(out / "model", ev / "diagnose.json")
                row["anisotropy"] = diag["anisotropy"]
                lam_stats[v][seed].update({k: diag.get(key) for k, key in DIAG_STATS.items()})
            per_run[v][seed] = row
            if curve := dev_curve(out, hist):
                dev[v][seed] = curve
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
    summary["dev_curve"] = {v: {str(s): c for s, c in runs.items()} for v, runs in dev.items()}
    if intervals := interval_table(summary, metrics):
        table += f"\n\nPaired by seed ({len(summary['seeds'])} seeds): mean [95 % t interval]\n\n" + intervals
    table += "\n\n" + lambda_table(lam_stats)
    if links := link_table(lam_stats):
        table += "\n\nThe link losses' (a, b) at the end of each run:\n\n" + links
    if diagnosed := diagnose_table(per_run, lam_stats):
        table += "\n\nThe anisotropy and simcse-diagnose (a, b) of each final model:\n\n" + diagnosed
    if times := time_table(lam_stats):
        table += "\n\nTime per run, minutes, mean ± std per variant (the session that finished each run):\n\n" + times
    prefix = Path(args.out)
    write_results(prefix, table, summary, header)
    if any(dev.values()):
        plot_dev_curves(dev, prefix.with_name(prefix.name + "_dev.png"), "validation curve per run: " + header[:100])
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
