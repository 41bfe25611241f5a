"""Which loss, when — known truth at one tuning budget (issues 55 and 56): the field's losses beside InfoNCE and
WEINCE on trained tables, every arm choosing among six configurations on validation universes and reported on test
universes, every cell trained with a final decay of its rate and checked for convergence.

    python -m weince_lab.experiments.which_loss_truth --out experiments/results/which_loss_tuned --workers 2
    python -m weince_lab.experiments.which_loss_truth --out experiments/results/which_loss_tuned_k16 --k 16 --workers 2
    python -m weince_lab.experiments.which_loss_truth --out experiments/results/which_loss_tuned_16000_endpoint \
        --steps 16000 --anneal 15000 --kernels endpoint --workers 2  # the long decay, one kernel
    python -m weince_lab.experiments.which_loss_truth --out /tmp/which_loss --quick  # seconds: the pipeline

**The budget** (:data:`CONFIGS`): six configurations per arm. InfoNCE: six temperatures. Every other arm: three
temperatures × two values of its own knob — WEINCE's β mode (ours ``ols``, the authors' ``unit``), the hardness
strength of sentence-transformers' hardness-weighted InfoNCE (EmbeddingGemma's 5, LLaVE's 9), HCL's β, DCL without
and with its von Mises weighting (σ = 0.5), Focal-InfoNCE's margin, the sigmoid loss's initial bias (t starts at
1/τ). An arm's configuration is chosen per kernel by the lowest mean universe KL on the validation universes (seeds
100, 101), among the configurations whose validation cells all passed the convergence check (all of them when none
did); it is then trained and reported on the test universes (seeds 0, 1, 2), paired by seed with InfoNCE at its own
chosen τ: at one seed every arm sees the same universe, pairs, negatives and initial table. Where the convergence
filter skipped an arm's configuration of lowest validation KL, that configuration is trained on the test seeds too
and reported beside the chosen one, as the rule's sensitivity (:func:`filter_section`).

**The cells** are Ground truth II training cells (``weince_lab.simulation.sweep_cells.run_cell``; the temperature
sweep's full size: 512 items, d = 8, k = 64 or ``--k``, 256 anchors a step, 100,000 pairs) trained :data:`STEPS`
Adam steps whose last :data:`ANNEAL` decay the rate linearly to 0, each checked against the run of 1.5× the steps
with the same final decay (converged: the universe KL moved by at most 0.005 nats). Cells are stored as they finish
(``cells.jsonl``, their settings in ``settings.json``: a store made with other settings is refused in one line); a
rerun skips them and rewrites the report from the store.
"""

from __future__ import annotations

import sys

import numpy as np

from weince_lab.experiments.link_truth import (
    cell,
    claim_store,
    driver_args,
    fmt,
    in_order,
    key,
    run_cells,
    stored_folder,
)
from weince_lab.report import table, write
from weince_lab.simulation.search import mean_interval as interval
from weince_lab.simulation.sweep_reports import convergence_section
from weince_lab.simulation.sweep_settings import resolve

KERNELS = ("vmf", "endpoint", "blend")
K = 64
STEPS, ANNEAL = 6000, 2000
VALIDATION_SEEDS = (100, 101)
TEST_SEEDS = (0, 1, 2)
TAUS = (0.05, 0.1, 0.2)
# arm → its six (loss arm, τ) configurations
CONFIGS: dict[str, list[tuple[str, float]]] = {
    "infonce": [("infonce", t) for t in (0.05, 0.07, 0.1, 0.14, 0.2, 0.3)],
    **{
        arm: [(f"{arm}:{knob}={value}", t) for value in values for t in TAUS]
        for arm, knob, values in (
            ("weince", "beta_mode", ("ols", "unit")),
            ("hardness_infonce", "hardness_strength", (5, 9)),
            ("hcl", "hcl_beta", (0.5, 1)),
            ("dcl", "dcl_sigma", ("none", 0.5)),
            ("focal_infonce", "focal_margin", (0.1, 0.3)),
            ("sigmoid", "sigmoid_bias", (-10, -5)),
        )
    },
}
METRICS = {"universe_gap": "KL", "best_link_gap": "best-link KL", "top1": "top-1", "recall10": "recall@10"}


def settings_for(
    quick: bool,
    k: int | None = None,
    steps: int | None = None,
    anneal: int | None = None,
    kernels: list[str] | None = None,
):
    """The temperature sweep's settings (full size, or --quick) with this driver's budget and every arm, at ``k``
    negatives (default :data:`K`; --quick: the quick sweep's); ``steps``, ``anneal`` and ``kernels`` replace the
    budget's :data:`STEPS`, :data:`ANNEAL` and :data:`KERNELS` where given (the kernels in the order of
    ``KERNELS``). A cell carries its own τ (the settings' single τ is not read by a training cell).

    Raises:
        ValueError: a value outside its range, in one line naming its option (``resolve``'s checks).
    """
    losses = sorted({arm for configs in CONFIGS.values() for arm, _ in configs})
    options = {"kernels": in_order(kernels) if kernels else list(KERNELS), "taus": [0.1], "losses": losses}
    options |= {"anneal": 50} if quick else {"ks": [K], "steps": STEPS, "anneal": ANNEAL, "pairs": [100_000]}
    given = {"ks": None if k is None else [k], "steps": steps, "anneal": anneal}
    options |= {name: value for name, value in given.items() if value is not None}
    return resolve("temperature", options, quick=quick)


def folder(k: int, steps: int = STEPS, anneal: int = ANNEAL, kernels: list[str] | None = None) -> str:
    """The stored comparison's folder: ``which_loss_tuned`` at the budget's k, steps and kernels, followed by what
    differs from it (``link_truth.stored_folder``), e.g. ``which_loss_tuned_k16_16000_endpoint``."""
    prefix = "experiments/results/which_loss_tuned"
    return stored_folder(prefix, ([K], STEPS, list(KERNELS)), [k], steps, anneal, kernels or list(KERNELS))


def command(args) -> str:
    """The report's command line: the stored folder and the options given that differ from the budget's (the
    kernels in the order of ``KERNELS``)."""
    k = K if args.k is None else args.k
    steps = STEPS if args.steps is None else args.steps
    anneal = ANNEAL if args.anneal is None else args.anneal  # --anneal 0 is given, not unset
    kernels = in_order(args.kernels) if args.kernels else list(KERNELS)
    options = [f"--out {folder(k, steps, anneal, kernels)}"]
    options += [] if k == K else [f"--k {k}"]
    options += [] if steps == STEPS else [f"--steps {steps}"]
    options += [] if anneal == ANNEAL else [f"--anneal {anneal}"]
    options += [] if kernels == list(KERNELS) else [f"--kernels {' '.join(kernels)}"]
    return " ".join([*options, "--workers 2"])


def choose(scored: list[tuple[float, bool, str, float]]) -> tuple[str, float]:
    """The selection rule: of (mean validation KL, all validation cells converged, loss arm, τ) per configuration,
    the (arm, τ) of the lowest KL among the converged configurations (among all when none converged)."""
    pool = [s for s in scored if s[1]] or scored
    best = min(pool, key=lambda s: s[0])
    return best[2], best[3]


def filter_section(skipped: dict, chosen: dict, records: dict, k: int, pairs: int, seeds, summary: dict) -> list[str]:
    """The report's section on the selection rule's convergence filter: each (kernel, arm) whose lowest validation
    KL belongs to a configuration the filter skipped, that configuration's test cells beside the chosen one's, both
    paired by seed against InfoNCE at its chosen τ (``summary["filter"]`` gets the same)."""

    def figures(kern: str, arm: str, tau: float, metric: str) -> list[float]:
        return [records[key(cell(kern, k, arm, tau, s, pairs))][metric] for s in seeds]

    lines = [
        "## The rule's convergence filter: the lowest validation KL it skipped",
        "",
        "The rule skips a configuration when one of its validation cells moved by more than the tolerance at its "
        "check. Where that skipped the configuration of lowest validation KL, the skipped one was trained on the test "
        "seeds too and is shown beside the chosen one: Δ paired by seed against InfoNCE at its chosen τ. A sensitivity "
        "of the rule, not its result: the tables above are the rule's.",
        "",
    ]
    summary["filter"] = []
    if not skipped:
        return [*lines, "None: every arm's lowest validation KL was among its converged configurations."]
    rows = []
    for (kern, name), (arm, tau) in skipped.items():
        base = chosen[kern, "infonce"]
        row = {"kernel": kern, "arm": name, "skipped": [arm, tau], "chosen": list(chosen[kern, name])}
        cols = []
        for which, (a, t) in (("skipped", (arm, tau)), ("chosen", chosen[kern, name])):
            diff = {
                m: list(np.subtract(figures(kern, a, t, m), figures(kern, *base, m))) for m in ("universe_gap", "top1")
            }
            row[which] = {f"minus_infonce_{m}": interval(v) for m, v in diff.items()}
            cols += [fmt(diff["universe_gap"], 4), fmt(diff["top1"])]
        converged = sum(records[key(cell(kern, k, arm, tau, s, pairs))]["convergence"]["converged"] for s in seeds)
        row["skipped_converged"] = converged
        summary["filter"].append(row)
        mine = chosen[kern, name]
        rows.append([kern, name, f"{arm.partition(':')[2] or '—'}, τ {tau:g}", f"{converged}/{len(seeds)}", *cols[:2],
                     f"{mine[0].partition(':')[2] or '—'}, τ {mine[1]:g}", *cols[2:]])  # fmt: skip
    header = ["kernel", "arm", "skipped (knob, τ)", "its test cells converged", "Δ KL", "Δ top-1", "chosen", "Δ KL",
              "Δ top-1"]  # fmt: skip
    return [*lines, *table(header, rows)]


def main(argv: list[str] | None = None) -> int:
    args = driver_args(
        argv, __doc__.split("\n\n")[0], "a tiny universe and short runs: the pipeline in seconds", one_k=K,
        schedule=(STEPS, ANNEAL),
    )  # fmt: skip
    if args is None:
        return 2
    if args.k is not None and args.k < 3:  # WEINCE's tail fits need 3 candidates (the sweeps' own check says --ks)
        print(f"error: --k must be an integer >= 3, got {args.k}", file=sys.stderr)
        return 2
    try:
        settings = settings_for(args.quick, args.k, args.steps, args.anneal, args.kernels)
        claim_store(args.out, settings)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    k, pairs, kernels = settings.ks[0], settings.pairs[0], settings.kernels
    val_seeds, test_seeds = (VALIDATION_SEEDS[:1], TEST_SEEDS[:2]) if args.quick else (VALIDATION_SEEDS, TEST_SEEDS)
    store = args.out / "cells.jsonl"

    def runs(records: dict, kern: str, arm: str, tau: float, seeds) -> list[dict]:
        return [records[key(cell(kern, k, arm, tau, s, pairs))] for s in seeds]

    # 1. validation: every configuration of every arm
    val = [cell(kern, k, arm, tau, s, pairs) for s in val_seeds for kern in kernels
           for configs in CONFIGS.values() for arm, tau in configs]  # fmt: skip
    val_records = run_cells(settings, val, store, args.workers)
    chosen: dict[tuple[str, str], tuple[str, float]] = {}
    lowest: dict[tuple[str, str], tuple[str, float]] = {}  # the lowest validation KL, converged or not
    validation_rows = []
    for kern in kernels:
        for name, configs in CONFIGS.items():
            scored = []
            for arm, tau in configs:
                got = runs(val_records, kern, arm, tau, val_seeds)
                ok = all(r["convergence"]["converged"] for r in got)
                scored.append((float(np.mean([r["universe_gap"] for r in got])), ok, arm, tau))
            chosen[kern, name] = choose(scored)
            lowest[kern, name] = choose([(kl, True, arm, tau) for kl, _, arm, tau in scored])
            for kl, ok, arm, tau in scored:
                mark = "**chosen**" if (arm, tau) == chosen[kern, name] else ""
                validation_rows.append([kern, arm, f"{tau:g}", f"{kl:.4f}", "yes" if ok else "no", mark])

    # 2. test: every arm at its chosen configuration
    test = [cell(kern, k, *chosen[kern, name], s, pairs) for s in test_seeds for kern in kernels for name in CONFIGS]
    test_records = run_cells(settings, test, store, args.workers)
    # 2b. the filter's sensitivity: a lowest-KL configuration the convergence filter skipped, on the test seeds too
    skipped = {arm: lowest[arm] for arm in chosen if lowest[arm] != chosen[arm]}
    extra = [cell(kern, k, *skipped[kern, name], s, pairs) for s in test_seeds for kern, name in skipped]
    filter_records = run_cells(settings, extra, store, args.workers)

    # 3. report
    summary: dict = {
        "settings": settings.to_dict(), "validation_seeds": list(val_seeds), "test_seeds": list(test_seeds),
        "configurations": {name: [[arm, tau] for arm, tau in configs] for name, configs in CONFIGS.items()},
        "chosen": {f"{kern}/{name}": list(c) for (kern, name), c in chosen.items()}, "kernels": {},
    }  # fmt: skip
    lines = [
        "# Which loss, when: known truth at one tuning budget (trained tables, k = "
        f"{k}, every cell converged or marked)",
        "",
        f"Written by `python -m weince_lab.experiments.which_loss_truth {command(args)}`"
        + (" --quick (pipeline check, not a result)" if args.quick else "")
        + ". "
        f"N = {settings.items} items, d = {settings.dim}, {settings.steps:,} Adam steps of {settings.batch} anchors "
        f"(rate {settings.lr:g}, decaying linearly to 0 over the last {settings.anneal:,}), {pairs:,} training pairs. "
        f"Each arm chose one of its six configurations per kernel by the lowest mean universe KL on validation "
        f"seeds {list(val_seeds)} (among those whose validation cells converged); the tables are the test seeds "
        f"{list(test_seeds)}: mean [95 % t interval over seeds]; Δ: paired by seed against InfoNCE at its own "
        "chosen τ. KL (the likelihood view): to the ideal search under the arm's own search law, lower is better; "
        "best-link KL: under the link (a, b) refitted on the table's cosines; top-1 and recall@10 (the ranking "
        "view): agreement with the Bayes retriever among 256 candidates, higher is better. Ranks are by mean; an "
        f"arm is ranked only when all its test cells converged. {len(kernels) * (len(CONFIGS) - 1) * 4} paired "
        "intervals are shown: about one in twenty of those that exclude 0 may do so by chance.",
        "",
    ]
    for kern in kernels:
        figures = {
            name: {m: [r[m] for r in runs(test_records, kern, *chosen[kern, name], test_seeds)] for m in METRICS}
            for name in CONFIGS
        }
        converged = {
            name: sum(r["convergence"]["converged"] for r in runs(test_records, kern, *chosen[kern, name], test_seeds))
            for name in CONFIGS
        }
        ranked = [n for n in CONFIGS if converged[n] == len(test_seeds)]
        by_kl = sorted(ranked, key=lambda n: np.mean(figures[n]["universe_gap"]))
        by_top1 = sorted(ranked, key=lambda n: -np.mean(figures[n]["top1"]))
        rows, out = [], {}
        for name in CONFIGS:
            f = figures[name]
            diff = {m: list(np.subtract(f[m], figures["infonce"][m])) for m in METRICS}
            arm, tau = chosen[kern, name]
            rank = (f"{by_kl.index(name) + 1} / {by_top1.index(name) + 1}") if name in ranked else "— (unconverged)"
            base = name == "infonce"
            rows.append([
                name, f"{arm.partition(':')[2] or '—'}, τ {tau:g}", f"{converged[name]}/{len(test_seeds)}", rank,
                fmt(f["universe_gap"], 4), "—" if base else fmt(diff["universe_gap"], 4),
                "—" if base else fmt(diff["best_link_gap"], 4), fmt(f["top1"]), "—" if base else fmt(diff["top1"]),
                "—" if base else fmt(diff["recall10"]),
            ])  # fmt: skip
            out[name] = {
                "arm": arm, "tau": tau, "converged": converged[name],
                "rank_kl": by_kl.index(name) + 1 if name in ranked else None,
                "rank_top1": by_top1.index(name) + 1 if name in ranked else None,
                **{m: interval(v) for m, v in f.items()},
                **({} if base else {f"minus_infonce_{m}": interval(v) for m, v in diff.items()}),
            }  # fmt: skip
        summary["kernels"][kern] = out
        header = ["arm", "chosen (knob, τ)", "converged", "rank KL / top-1", "KL", "Δ KL", "Δ best-link KL",
                  "top-1", "Δ top-1", "Δ recall@10"]  # fmt: skip
        lines += [f"## Kernel {kern}", "", *table(header, rows), ""]
    lines += ["## Validation: every configuration's mean universe KL", ""]
    lines += table(["kernel", "arm", "τ", "KL", "converged", ""], validation_rows)
    lines += ["", *filter_section(skipped, chosen, {**test_records, **filter_records}, k, pairs, test_seeds, summary)]
    summary["convergence"], checked = convergence_section(
        list({**val_records, **test_records, **filter_records}.values()), ("kernel", "loss", "tau", "seed")
    )
    lines += checked
    write(args.out / "output", "\n".join(lines) + "\n", summary, indent=1)
    print(f"wrote {args.out / 'output.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
