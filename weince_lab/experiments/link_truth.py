"""The link losses on known truth at an equal tuning budget (issue 43): every arm chooses its configuration on
validation universes and is reported on separate test universes.

    python -m weince_lab.experiments.link_truth --out experiments/results/link_truth --workers 2  # 50 min, 2 cores
    python -m weince_lab.experiments.link_truth --out /tmp/link_truth --quick  # seconds: the pipeline
    python -m weince_lab.experiments.link_truth --out experiments/results/link_truth_annealed --ks 64 \
        --steps 6000 --anneal 2000 --workers 2  # k = 64, a final decay of the rate: about 1 h, 2 cores
    python -m weince_lab.experiments.link_truth --out experiments/results/link_truth_annealed_k16 --ks 16 \
        --steps 6000 --anneal 2000 --workers 2  # k = 16, the same: about 30 min, 2 cores
    python -m weince_lab.experiments.link_truth --out experiments/results/link_truth_annealed_16000_endpoint \
        --ks 64 --steps 16000 --anneal 15000 --kernels endpoint --workers 2  # the long decay, one kernel: 54 min

Arms (``weince_lab.simulation.learning.build_loss``): InfoNCE, InfoNCE with a learned τ, temperature-free
(``arctanh``), WEINCE (``ols``, the shipped defaults), the learned link (a and b learned; b alone with a = 1/τ),
the profiled link, and the oracle (the kernel's own link). Kernels vMF, endpoint and blend (``--kernels``: some of
them); k ∈ {16, 64, 256} (``--ks``: some of them).

**The budget.** Every arm that has a τ gets the same three configurations, τ ∈ {0.1, 0.2, 0.5} (for the learned
and profiled links the start a = 1/τ), its other knobs at their defaults; ``arctanh`` and the oracle have none to
choose (one configuration). Each arm's τ is chosen per kernel and k by the lowest universe KL (the KL to the ideal
search under the arm's own link) on the validation universes (seeds 100, 101: other universes of the same kernel,
other pairs, negatives and starts), and the arm is then trained and reported on the test universes (seeds 0–4),
paired by seed: at one seed every arm sees the same universe, pairs, negatives and initial table.

Each cell is a Ground truth II training cell (``weince_lab.simulation.sweep_cells.training_cell``, the
``negatives`` sweep's full size: 512 items, d = 8, 2000 Adam steps of 256 anchors, 100,000 pairs, or ``--steps``
whose last ``--anneal`` decay the rate linearly to 0): the universe KL, the best-link KL (the link refitted on the
table's cosines), top-1 agreement and recall@10 with the Bayes retriever, the link losses' final (a, b), and the
convergence check (the run of 1.5× the steps). Cells are stored as they finish (``cells.jsonl``, their settings in
``settings.json`` beside it: a rerun with other settings is refused in one line); a rerun skips them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import fields
from pathlib import Path

import numpy as np

from simcse_weince.core.setting_changes import setting_changes
from simcse_weince.diagnostics.link import coefficients
from weince_lab.report import table, write
from weince_lab.simulation.search import mean_interval as interval
from weince_lab.simulation.sweep_cells import KL_TOLERANCE, run_cell
from weince_lab.simulation.sweep_reports import convergence_section
from weince_lab.simulation.sweep_settings import IGNORED, SweepSettings, resolve
from weince_lab.simulation.universe import kernel_law
from weince_lab.simulation.worker_pool import worker_pool

TAU_ARMS = ("infonce", "learned_temperature", "weince", "learned_link", "learned_link_b", "profiled_link")
FIXED_ARMS = ("arctanh", "oracle")
ARMS = (*TAU_ARMS, *FIXED_ARMS)
TAUS = (0.1, 0.2, 0.5)
KERNELS = ("vmf", "endpoint", "blend")
KS = (16, 64, 256)
VALIDATION_SEEDS = (100, 101)
TEST_SEEDS = (0, 1, 2, 3, 4)
FIXED_TAU = 0.2  # recorded for the arms that read no τ
DEFAULT_STEPS = next(f.default for f in fields(SweepSettings) if f.name == "steps")  # a full-size cell's steps
STORED_DECAYS = ((6000, 2000), (16000, 15000))  # (steps, anneal) of the stored folders with a final decay
LABELS = {
    "infonce": "InfoNCE",
    "learned_temperature": "InfoNCE, learned τ",
    "weince": "WEINCE (ols)",
    "learned_link": "learned link (a, b)",
    "learned_link_b": "learned link (b; a = 1/τ)",
    "profiled_link": "profiled link",
    "arctanh": "temperature-free (artanh)",
    "oracle": "oracle (true link)",
}


def settings_for(
    quick: bool,
    ks: list[int] | None = None,
    steps: int | None = None,
    anneal: int | None = None,
    kernels: list[str] | None = None,
) -> SweepSettings:
    """The negatives sweep's settings at full size (or --quick), with this driver's grid; ``ks``, ``steps``,
    ``anneal`` and ``kernels`` replace the defaults where given (the kernels in the order of ``KERNELS``, as the
    settings keep ``ks`` sorted: the same cells give the same settings).

    Raises:
        ValueError: a value outside its range, naming the option (``resolve``'s checks).
    """
    # the cells carry their own τ: the settings' single τ is not read by a training cell
    options = {"ks": ks or list(KS[:2] if quick else KS), "taus": [FIXED_TAU], "losses": list(ARMS)}
    options |= {"kernels": in_order(kernels) if kernels else list(KERNELS), "steps": steps, "anneal": anneal}
    if len(options["ks"]) > 1:
        return resolve("negatives", options, quick=quick)
    # one k: the temperature sweep's settings (the same cells; the negatives sweep wants two k for its slope)
    pairs = resolve("negatives", {}, quick=quick).pairs
    return resolve("temperature", options | {"pairs": list(pairs)}, quick=quick)


def claim_store(out: Path, settings: SweepSettings) -> None:
    """Write ``out/settings.json`` (the settings of the cells in ``out/cells.jsonl``), or check it against
    ``settings``.

    Raises:
        ValueError: ``out`` holds cells made with other settings, or cells without a settings file.
    """
    path, mine = out / "settings.json", settings.to_dict()
    if path.exists():
        changed = setting_changes(json.loads(path.read_text(encoding="utf-8")), mine, ignore=IGNORED[settings.sweep])
        if changed:
            raise ValueError(
                f"{out} holds cells made with other settings ({', '.join(changed)}): give the same options, or a "
                "new --out"
            )
    elif (out / "cells.jsonl").exists():
        raise ValueError(f"{out / 'cells.jsonl'} has no settings.json beside it: use a new --out")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(mine, indent=2) + "\n", encoding="utf-8")


def key(cell: dict) -> str:
    return json.dumps(cell, sort_keys=True)


def read_store(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {key(r["cell"]): r for r in records}


def run_cells(settings, cells: list[dict], store: Path, workers: int) -> dict[str, dict]:
    """Every cell not yet in ``store``, appended as it finishes; all records of ``cells``."""
    done = read_store(store)
    todo = [c for c in cells if key(c) not in done]
    print(f"{len(cells) - len(todo)} of {len(cells)} cells stored; running {len(todo)}", flush=True)
    with store.open("a", encoding="utf-8") as out, worker_pool(workers) as pool:
        futures = [pool.submit(run_cell, settings, c) for c in todo]
        for i, future in enumerate(as_completed(futures), 1):
            record = future.result()
            out.write(json.dumps(record) + "\n")
            out.flush()
            done[key(record["cell"])] = record
            print(f"cell {i}/{len(todo)} done: {record['cell']} ({record['seconds']:.0f} s)", flush=True)
    return {key(c): done[key(c)] for c in cells}


def cell(kernel: str, k: int, arm: str, tau: float, seed: int, pairs: int) -> dict:
    return {"kernel": kernel, "k": k, "loss": arm, "tau": tau, "seed": seed, "pairs": pairs}


def fmt(values: list[float], digits: int = 3) -> str:
    m, lo, hi = interval(values)
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def truth(settings, kernel: str) -> tuple[float, float]:
    """The kernel's true coefficients (a*, b*) = ((1 − λ*)/τ*, λ*β*): vMF (κ, 0), endpoint (0, β*), blend."""
    law = kernel_law(kernel, settings.kappa, settings.beta, settings.blend_lambda)
    return coefficients(law.lam, law.beta, law.tau)


def driver_args(
    argv: list[str] | None,
    description: str,
    quick: str,
    budget: bool = False,
    one_k: int | None = None,
    schedule: tuple[int, int] | None = None,
) -> argparse.Namespace | None:
    """A known-truth driver's command line: ``--out``, ``--workers`` (>= 1; otherwise a one-line error and
    ``None``), ``--quick`` (``quick``: what it runs); with ``budget``, also ``--ks``, ``--steps``, ``--anneal`` and
    ``--kernels``; with ``one_k``, ``--k`` (one number of negatives, default ``one_k``); with ``schedule`` (the
    driver's default (steps, anneal)), ``--steps``, ``--anneal`` and ``--kernels`` beside ``--k``. The budget options
    and ``--k`` are checked where the settings are resolved."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help=quick)
    if budget:
        ap.add_argument("--ks", type=int, nargs="+", help=f"numbers of negatives (default {list(KS)})")
    if budget or schedule:
        steps, anneal = schedule or (DEFAULT_STEPS, 0)
        ap.add_argument("--steps", type=int, help=f"Adam steps a cell trains (default {steps})")
        decay = f"the last steps decay the rate linearly to 0 (default {anneal or '0: constant'})"
        ap.add_argument("--anneal", type=int, help=decay)
        ap.add_argument("--kernels", nargs="+", choices=KERNELS, help=f"known kernels (default {list(KERNELS)})")
    if one_k is not None:
        ap.add_argument("--k", type=int, help=f"negatives per anchor (default {one_k})")
    args = ap.parse_args(argv)
    if args.workers < 1:
        print(f"error: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return None
    return args


def command(args: argparse.Namespace) -> str:
    """The report's command line: the stored folder's name and the budget options given (``ks`` sorted, the kernels
    in the order of ``KERNELS``). The name is ``link_truth`` (every k, 2,000 steps at a constant rate) or
    ``link_truth_annealed`` (k = 64, 6,000 steps whose last 2,000 decay), followed by what differs from it
    (:func:`stored_folder`), e.g. ``link_truth_annealed_k16_16000_endpoint``."""
    ks = sorted(args.ks) if args.ks else None
    kernels = in_order(args.kernels) if args.kernels else None
    given = {"ks": ks, "steps": args.steps, "anneal": args.anneal, "kernels": kernels}
    options = [f"--{name} {' '.join(map(str, v)) if isinstance(v, list) else v}"
               for name, v in given.items() if v is not None]  # fmt: skip
    every_k, prefix = list(KS), "experiments/results/link_truth" + ("_annealed" if args.anneal else "")
    budget = ([64], 6000, list(KERNELS)) if args.anneal else (every_k, DEFAULT_STEPS, list(KERNELS))
    steps, kernels = args.steps or DEFAULT_STEPS, kernels or list(KERNELS)
    folder = stored_folder(prefix, budget, ks or every_k, steps, args.anneal or None, kernels)
    return " ".join([f"--out {folder}", *options])


def stored_folder(
    prefix: str,
    budget: tuple[list[int], int, list[str]],
    ks: list[int],
    steps: int,
    anneal: int | None,
    kernels: list[str],
) -> str:
    """A known-truth driver's stored folder: ``prefix`` (the folder of its budget, whose numbers of negatives, steps
    and kernels are ``budget``) followed by what differs from that budget: ``_k16`` (other k), ``_16000`` (other
    steps), ``_a1000`` (a final decay, when not ``None``, other than the stored budgets' 2,000 of 6,000 and 15,000 of
    16,000) and ``_endpoint`` (other kernels, in the order of ``KERNELS``)."""
    name = prefix + ("" if ks == budget[0] else "_k" + "_".join(map(str, ks)))
    name += "" if steps == budget[1] else f"_{steps}"
    name += "" if anneal is None or (steps, anneal) in STORED_DECAYS else f"_a{anneal}"
    kernels = in_order(kernels)
    return name + ("" if kernels == in_order(budget[2]) else "_" + "_".join(kernels))


def in_order(kernels: list[str]) -> list[str]:
    """``kernels`` in the order of ``KERNELS`` (a name not among them last, for the settings' check to name)."""
    return sorted(kernels, key=lambda k: KERNELS.index(k) if k in KERNELS else len(KERNELS))


def budget_text(settings: SweepSettings) -> str:
    """The header's sentence on the training budget (none for the stored constant-rate sweep)."""
    if not settings.anneal:
        return ""
    return (
        f" Every cell trains {settings.steps:,} Adam steps (rate {settings.lr:g}, decaying linearly to 0 over the "
        f"last {settings.anneal:,}) and is checked against the run of 1.5× the steps with the same final decay "
        f"(converged: its universe KL moved by at most {KL_TOLERANCE:g} nats; the cells that did not are listed at "
        "the end)."
    )


def targets(figures: Callable[[str, int, str, str], list[float]], kernels: tuple[str, ...], k: int) -> list[str]:
    """The targets stated before the run, for the kernels run: under the endpoint kernel the learned link closes
    ≥ 80 % of the oracle's KL gain over InfoNCE, ``(KL_InfoNCE − KL_learned) / (KL_InfoNCE − KL_oracle)``, and its
    top-1 is not worse (the paired interval's upper end ≥ 0), and its KL and top-1 − the oracle's are stated
    (paired by seed); under vMF its KL exceeds InfoNCE's by ≤ 0.005 nats (mean over test seeds).
    ``figures(kernel, k, arm, field)`` gives a field's values over the test seeds."""
    out = []
    if "endpoint" in kernels:
        inf = figures("endpoint", k, "infonce", "universe_gap")
        ll = figures("endpoint", k, "learned_link", "universe_gap")
        orc = figures("endpoint", k, "oracle", "universe_gap")
        share = (np.mean(inf) - np.mean(ll)) / (np.mean(inf) - np.mean(orc))
        top1 = {arm: figures("endpoint", k, arm, "top1") for arm in ("infonce", "learned_link", "oracle")}
        top = list(np.subtract(top1["learned_link"], top1["infonce"]))
        tie = (list(np.subtract(ll, orc)), list(np.subtract(top1["learned_link"], top1["oracle"])))
        out.append(
            f"endpoint, the learned link closes {100 * share:.0f} % of the oracle's KL gain over InfoNCE "
            f"(target ≥ 80 %: {'met' if share >= 0.8 else 'missed'}); its top-1 − InfoNCE's {fmt(top)} (target: not "
            f"worse: {'met' if interval(top)[2] >= 0 else 'missed'}); learned link − oracle, paired by seed: KL "
            f"{fmt(tie[0], 4)}, top-1 {fmt(tie[1])}"
        )
    if "vmf" in kernels:
        vmf = list(
            np.subtract(figures("vmf", k, "learned_link", "universe_gap"), figures("vmf", k, "infonce", "universe_gap"))
        )
        met = "met" if np.mean(vmf) <= 0.005 else "missed"
        out.append(f"vMF, its KL − InfoNCE's {fmt(vmf)} (target ≤ +0.005: {met})")
    return out or ["no target is stated for the blend alone"]


def main(argv: list[str] | None = None) -> int:
    args = driver_args(argv, __doc__.split("\n\n")[0], "a tiny universe and 2 k: the pipeline in seconds", budget=True)
    if args is None:
        return 2
    try:
        settings = settings_for(args.quick, args.ks, args.steps, args.anneal, args.kernels)
        claim_store(args.out, settings)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kernels, ks, pairs = settings.kernels, settings.ks, settings.pairs[0]
    val_seeds, test_seeds = (VALIDATION_SEEDS[:1], TEST_SEEDS[:2]) if args.quick else (VALIDATION_SEEDS, TEST_SEEDS)
    store = args.out / "cells.jsonl"

    # 1. validation: every τ of every τ-arm
    val = [
        cell(kern, k, arm, tau, seed, pairs)
        for seed in val_seeds for kern in kernels for k in ks for arm in TAU_ARMS for tau in TAUS
    ]  # fmt: skip
    val_records = run_cells(settings, val, store, args.workers)
    chosen: dict[tuple[str, int, str], float] = {}
    for kern in kernels:
        for k in ks:
            for arm in TAU_ARMS:
                kl = {}
                for tau in TAUS:
                    runs = [val_records[key(cell(kern, k, arm, tau, s, pairs))] for s in val_seeds]
                    kl[tau] = float(np.mean([r["universe_gap"] for r in runs]))
                chosen[(kern, k, arm)] = min(kl, key=kl.get)
            for arm in FIXED_ARMS:
                chosen[(kern, k, arm)] = FIXED_TAU

    # 2. test: every arm at its chosen τ
    test = [
        cell(kern, k, arm, chosen[(kern, k, arm)], seed, pairs)
        for seed in test_seeds for kern in kernels for k in ks for arm in ARMS
    ]  # fmt: skip
    test_records = run_cells(settings, test, store, args.workers)

    # 3. report
    def figures(kern: str, k: int, arm: str, field: str) -> list[float]:
        out = []
        for s in test_seeds:
            r = test_records[key(cell(kern, k, arm, chosen[(kern, k, arm)], s, pairs))]
            out.append(r["learned"].get(field, math.nan) if field.startswith("link_") else r[field])
        return out

    summary: dict = {"settings": settings.to_dict(), "validation_seeds": list(val_seeds)}
    summary["test_seeds"] = list(test_seeds)
    lines = [
        "# The link losses on known truth at an equal tuning budget",
        "",
        f"Written by `python -m weince_lab.experiments.link_truth {command(args)} --workers 2`"
        + (" --quick (pipeline check, not a result)" if args.quick else "")
        + ". Each arm with a τ chose it among "
        f"{', '.join(map(str, TAUS))} by the lowest universe KL on validation seeds {list(val_seeds)}; the table is "
        f"the test seeds {list(test_seeds)}: mean [95 % t interval over seeds]; differences are paired by seed "
        "against InfoNCE at its own chosen τ. KL: to the ideal search under the arm's own link (nats); best-link KL: "
        "under the link (a, b) refitted on the table's cosines; top-1 / recall@10: agreement with the Bayes "
        "retriever. Learned (a, b): the learned, learned-τ and profiled links' final coefficients; truth: vMF "
        "(κ, 0), endpoint (0, β*), blend ((1 − λ*)κ, λ*β*)." + budget_text(settings),
        "",
    ]
    for kern in kernels:
        a_true, b_true = truth(settings, kern)
        lines += [f"## Kernel {kern} (true a = {a_true:g}, b = {b_true:g})", ""]
        for k in ks:
            rows = []
            base = {f: figures(kern, k, "infonce", f) for f in ("universe_gap", "best_link_gap", "top1")}
            for arm in ARMS:
                names = ("universe_gap", "best_link_gap", "top1", "recall10")
                f = {name: figures(kern, k, arm, name) for name in names}
                diff = {name: list(np.subtract(f[name], base[name])) for name in base}
                has_link = arm in ("learned_temperature", "learned_link", "learned_link_b", "profiled_link")
                la = figures(kern, k, arm, "link_a") if has_link else None
                lb = figures(kern, k, arm, "link_b") if has_link and arm != "learned_temperature" else None
                tau = "—" if arm in FIXED_ARMS else f"{chosen[(kern, k, arm)]:g}"
                same = arm == "infonce"
                rows.append([
                    LABELS[arm], tau, fmt(f["universe_gap"]), "—" if same else fmt(diff["universe_gap"]),
                    fmt(f["best_link_gap"]), "—" if same else fmt(diff["best_link_gap"]), fmt(f["top1"]),
                    "—" if same else fmt(diff["top1"]), fmt(f["recall10"]), fmt(la, 2) if la else "—",
                    fmt(lb, 2) if lb else "—",
                ])  # fmt: skip
                summary.setdefault("cells", []).append(
                    {
                        "kernel": kern, "k": k, "arm": arm, "tau": None if arm in FIXED_ARMS else chosen[kern, k, arm],
                        **{name: interval(v) for name, v in f.items()},
                        **{f"diff_{name}": interval(v) for name, v in diff.items()},
                        "link_a": interval(la) if la else None, "link_b": interval(lb) if lb else None,
                        "truth": [a_true, b_true],
                    }
                )  # fmt: skip
            header = ["arm", "τ chosen", "KL", "Δ KL vs InfoNCE", "best-link KL", "Δ best-link", "top-1", "Δ top-1",
                      "recall@10", "learned a", "learned b"]  # fmt: skip
            lines += [f"### k = {k}", "", *table(header, rows), ""]

    # the targets stated in the issue before the run
    lines += ["## The targets (stated before the run)", ""]
    for k in ks:
        lines.append(f"- k = {k}: " + "; ".join(targets(figures, kernels, k)) + ".")
        for kern in kernels:
            a_true, b_true = truth(settings, kern)
            _, alo, ahi = interval(figures(kern, k, "learned_link", "link_a"))
            _, blo, bhi = interval(figures(kern, k, "learned_link", "link_b"))
            inside = (alo <= a_true <= ahi, blo <= b_true <= bhi)
            lines.append(
                f"  - {kern}: learned (a, b) intervals [{alo:.2f}, {ahi:.2f}], [{blo:.2f}, {bhi:.2f}] against the "
                f"truth ({a_true:g}, {b_true:g}): a {'inside' if inside[0] else 'outside'}, b "
                f"{'inside' if inside[1] else 'outside'}."
            )
    summary["convergence"], checked = convergence_section(
        [*val_records.values(), *test_records.values()], ("kernel", "k", "loss", "tau", "seed")
    )
    lines += checked
    summary["chosen"] = {f"{kern}/{k}/{arm}": t for (kern, k, arm), t in chosen.items()}
    write(args.out / "output", "\n".join(lines) + "\n", summary, indent=1)
    print(f"wrote {args.out / 'output.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
