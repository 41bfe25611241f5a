"""Which hard negatives for supervised SimCSE on SICK? InfoNCE vs WEINCE (β OLS), 3 seeds each, continuing from
all-MiniLM-L6-v2 (``configs/sup_quickstart.yaml``) on the same 1,284 (premise, entailment) pairs of SICK's
training split with three kinds of negatives, one arm each:

* ``sick``: SICK's own contradictions, today's quickstart (``weince_lab.experiments.sick_nli``: 251 triplets + 1,033
pairs);
* ``mined``: one negative per pair mined by all-MiniLM-L6-v2 (``simcse-mine``, the top candidate at least
  ``--margin`` below the positive among the ``--range_max`` nearest), the pairs without one kept as pairs;
* ``none``: the pairs alone (``text_columns [sent0, sent1]``).

Each arm is one ``weince_lab.experiments.text_runs`` run (finished runs are reused: run the same command again to
resume),
written to ``<out>-<arm>.{md,json,png}``; then ``<out>.{md,json}``: every metric per arm and loss (mean ± std
over seeds), WEINCE − InfoNCE per arm and each arm − sick per loss (paired by seed), and mean λ, share λ > 0.5,
mean ρ and mean ΔAIC per arm (WEINCE; InfoNCE computes none). The retrieval task SICK-entailment is built from
SICK's test split, whose sentences share the training pool: in-domain, to be read apart (like SICK-R).

    python -m weince_lab.experiments.sick_mining_ab --seeds 0 1 2 \\
        --eval_tasks STS12,STS13,STS14,STS15,STS16,STSB,retrieval \\
        --out experiments/results/sup_sick_negatives
    # the rows of the three arms only, and the text_runs commands
    python -m weince_lab.experiments.sick_mining_ab --prepare_only
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from weince_lab.experiments.common import child_env, mean_std, run_child, write_results  # noqa: E402
from weince_lab.experiments.sick_nli import build_rows, read_sick, write_csv  # noqa: E402
from weince_lab.report import table  # noqa: E402

ARMS = ("sick", "mined", "none")
LAMBDA = (("lambda", "mean λ"), ("lambda_frac_gt_half", "share λ > 0.5"), ("rho", "mean ρ"),
          ("delta_aic", "mean ΔAIC"))  # fmt: skip
Mine = Callable[[list[str]], int]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs/sup_quickstart.yaml"))
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--variants", nargs="+", default=["infonce", "weince-ols"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval_tasks", default="STS12,STS13,STS14,STS15,STS16,STSB,retrieval")
    ap.add_argument("--eval_mode", default="test")
    ap.add_argument("--data_dir", default=None, help="SentEval data/downstream folder (default: the shared data)")
    ap.add_argument("--rows_dir", default=str(REPO / "outputs/sick_mining_ab"), help="the arms' training rows")
    ap.add_argument("--runs_dir", default=None, help="default: outputs/experiments/<out name>/<arm>")
    ap.add_argument("--out", default=str(REPO / "experiments/results/sup_sick_negatives"))
    ap.add_argument("--mining_model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--mining_pooler", default=None, help="--pooler of simcse-mine (default: the model's own)")
    ap.add_argument("--margin", type=float, default=0.1, help="simcse-mine --absolute_margin")
    ap.add_argument("--range_max", type=int, default=50, help="simcse-mine --range_max")
    ap.add_argument("--prepare_only", action="store_true", help="write the arms' rows, print the runs, stop")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="overrides of every training run (last)")
    return ap


# ---- the rows of the arms -----------------------------------------------------------------------------------
def write_if_changed(path: Path, header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Path:
    """Write the CSV unless it holds exactly these rows already (its date then stays, and so does the token
    cache built from it)."""
    if path.is_file():
        with path.open(encoding="utf-8", newline="") as f:
            if [tuple(r) for r in csv.reader(f)] == [header, *rows]:
                return path
    return write_csv(path, header, rows)


def mining_argv(pairs: Path, output: Path, args: argparse.Namespace) -> list[str]:
    """The ``simcse-mine`` command line of the mined arm."""
    argv = ["--pairs", str(pairs), "--model", args.mining_model, "--absolute_margin", str(args.margin),
            "--range_max", str(args.range_max), "--num_negatives", "1", "--keep_unmined",
            "--output", str(output)]  # fmt: skip
    return argv + (["--pooler", args.mining_pooler] if args.mining_pooler else [])


def mine_in_a_process(argv: list[str]) -> int:
    """``python -m simcse_weince.cli.mine argv`` in a process of its own (the driver imports no torch)."""
    cmd = [sys.executable, "-m", "simcse_weince.cli.mine", *argv]
    return run_child(cmd, cwd=REPO, env=child_env()).returncode


def mine_once(pairs: Path, folder: Path, args: argparse.Namespace, mine: Mine) -> list[Path]:
    """The mined arm's files: mined now, or reused when mined before from the same pairs with the same model and
    settings (another mining would leave its finished runs stale: refused)."""
    triplets, summary = folder / "triplets.csv", folder / "triplets_scores.json"
    want = {"model": args.mining_model, "pooler": args.mining_pooler, "absolute_margin": args.margin,
            "range_max": args.range_max}  # fmt: skip
    if summary.is_file() and triplets.is_file():
        done = json.loads(summary.read_text(encoding="utf-8"))
        got = {"model": done["model"], "pooler": done["pooler"], **{k: done["settings"][k] for k in list(want)[2:]}}
        if got != want or triplets.stat().st_mtime < pairs.stat().st_mtime:
            raise SystemExit(
                f"{folder} was mined with {got} (or from older pairs), not {want}: remove it and the mined arm's "
                "runs, or ask for the same mining"
            )
    elif mine(mining_argv(pairs, triplets, args)) != 0:
        raise SystemExit(f"mining the negatives of {pairs} failed (see above)")
    unmined = folder / "triplets_unmined.csv"
    return [triplets, *([unmined] if unmined.is_file() else [])]


def prepare_arms(
    rows_dir: Path, data_dir: str | None, args: argparse.Namespace, arms: Sequence[str], mine: Mine
) -> dict[str, list[str]]:
    """Write the rows of ``arms`` under ``rows_dir``; returns each arm's training overrides (``--train_files ...``
    and, for ``none``, its two columns). Every arm holds the same (anchor, positive) pairs."""
    from simcse_weince.core.paths import senteval_root

    root = senteval_root(data_dir)
    if root is None:
        raise SystemExit("no SentEval data folder: pass --data_dir or set SIMCSE_WEINCE_DATA")
    triplets, pairs = build_rows(read_sick(Path(root) / "SICK" / "SICK_train.txt"))
    sick = [write_if_changed(rows_dir / "sick" / "triplets.csv", ("sent0", "sent1", "hard_neg"), triplets),
            write_if_changed(rows_dir / "sick" / "pairs.csv", ("sent0", "sent1"), pairs)]  # fmt: skip
    every_pair = [(a, p) for a, p, _ in triplets] + pairs
    alone = write_if_changed(rows_dir / "none" / "pairs.csv", ("sent0", "sent1"), every_pair)
    files = {"sick": sick, "none": [alone]}
    if "mined" in arms:
        files["mined"] = mine_once(alone, rows_dir / "mined", args, mine)
    columns = {"none": ["--text_columns", "sent0", "sent1", "--allow_missing_negatives", "false"]}
    return {arm: ["--train_files", *map(str, files[arm]), *columns.get(arm, [])] for arm in arms}


# ---- the runs and the table ---------------------------------------------------------------------------------
def text_runs_argv(arm: str, overrides: list[str], args: argparse.Namespace) -> list[str]:
    """The ``weince_lab.experiments.text_runs`` command line of one arm."""
    out = Path(args.out)
    runs = Path(args.runs_dir) if args.runs_dir else REPO / "outputs/experiments" / out.name
    return ["--config", args.config, "--variants", *args.variants, "--seeds", *map(str, args.seeds),
            "--eval_tasks", args.eval_tasks, "--eval_mode", args.eval_mode, "--runs_dir", str(runs / arm),
            "--out", f"{out}-{arm}", "--extra", *overrides, *args.extra]  # fmt: skip


def paired(runs: dict[str, dict[str, float]], base: dict[str, dict[str, float]], metric: str) -> tuple[float, float]:
    """Mean ± std over the seeds both have of ``runs[seed][metric] - base[seed][metric]``."""
    seeds = sorted(set(runs) & set(base))
    return mean_std([runs[s][metric] - base[s][metric] for s in seeds])


def combine(summaries: dict[str, dict], variants: Sequence[str]) -> tuple[str, dict]:
    """The table across arms from each arm's ``text_runs`` summary (its ``per_run`` and ``lambda``): means,
    paired differences (the last variant − the first per arm; each arm − the first arm per variant), λ stats."""
    per_run = {arm: s["per_run"] for arm, s in summaries.items()}
    first = next(iter(per_run.values()))[variants[0]]
    metrics = list(next(iter(first.values())))
    cell = "{:.2f} ± {:.2f}"
    means, differences, lambdas = [], [], []
    out: dict = {"metrics": metrics, "mean": {}, "difference": {}, "lambda": {}}
    for arm, runs in per_run.items():
        for v in variants:
            stats = [mean_std([r[m] for r in runs[v].values()]) for m in metrics]
            out["mean"][f"{arm} / {v}"] = dict(zip(metrics, stats, strict=True))
            means.append([f"{arm} / {v}", *(cell.format(*x) for x in stats)])
    base_arm = next(iter(per_run))
    pairs = [(f"{arm}: {variants[-1]} − {variants[0]}", runs[variants[-1]], runs[variants[0]])
             for arm, runs in per_run.items() if len(variants) > 1]  # fmt: skip
    pairs += [(f"{v}: {arm} − {base_arm}", runs[v], per_run[base_arm][v])
              for v in variants for arm, runs in per_run.items() if arm != base_arm]  # fmt: skip
    for name, runs, base in pairs:
        stats = [paired(runs, base, m) for m in metrics]
        out["difference"][name] = dict(zip(metrics, stats, strict=True))
        differences.append([name, *("{:+.2f} ± {:.2f}".format(*x) for x in stats)])
    for arm, s in summaries.items():
        for v in variants:
            values = [[r[k] for r in s["lambda"][v].values() if r.get(k) is not None] for k, _ in LAMBDA]
            out["lambda"][f"{arm} / {v}"] = {
                k: mean_std(x) if x else None for (k, _), x in zip(LAMBDA, values, strict=True)
            }
            lambdas.append([f"{arm} / {v}", *(cell.format(*mean_std(x)) if x else "–" for x in values)])
    lines = [
        *table(["arm / loss", *metrics], means),
        "", *table(["paired difference (by seed)", *metrics], differences),
        "", *table(["arm / loss", *(label for _, label in LAMBDA)], lambdas),
    ]  # fmt: skip
    return "\n".join(lines), out


def main() -> None:
    args = build_parser().parse_args()
    if not Path(args.config).is_file():
        raise SystemExit(f"--config {args.config}: no such file")
    overrides = prepare_arms(Path(args.rows_dir), args.data_dir, args, args.arms, mine_in_a_process)
    commands = {arm: text_runs_argv(arm, overrides[arm], args) for arm in args.arms}
    for arm, argv in commands.items():
        print(f"{arm}: python -m weince_lab.experiments.text_runs {shlex.join(argv)}", flush=True)
        if not args.prepare_only:
            run_child(
                [sys.executable, "-m", "weince_lab.experiments.text_runs", *argv], cwd=REPO, env=child_env(), check=True
            )
    if args.prepare_only:
        return
    summaries = {arm: json.loads(Path(f"{args.out}-{arm}.json").read_text(encoding="utf-8")) for arm in args.arms}
    table, out = combine(summaries, args.variants)
    header = (f"Negatives for supervised SimCSE on SICK: arms {args.arms}; variants {args.variants}; seeds "
              f"{args.seeds}; {args.eval_tasks} ({args.eval_mode}); mined by {args.mining_model}, margin "
              f"{args.margin}, range_max {args.range_max}{'; ' + ' '.join(args.extra) if args.extra else ''}; "
              "mean ± std over seeds")  # fmt: skip
    write_results(Path(args.out), table, {"header": header, **out}, header)
    print(f"{header}\n\n{table}")


if __name__ == "__main__":
    main()
