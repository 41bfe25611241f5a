"""``simcse-simulate`` / ``python -m weince_lab.simulate``: the ground-truth experiments.

Ground truth I: ``e1`` the authors' noise-floor setting (closed forms and Monte Carlo), ``e2`` the diagnostics (POT
ξ̂, link selection) against simulated truth, ``e3`` WEINCE's online λ across tail shape, hardness and winner law.
Each writes ``<experiment>.json``, ``<experiment>.md`` and its plots into ``--out``.

Ground truth II, learning a known similarity (:mod:`~weince_lab.simulation.sweep_settings`): ``proposition``
(Whiteley's Proposition 1 at the true vectors), ``negatives`` (the gap to the Bayes search against k, per loss),
``temperature`` (against τ and the training-set size) and ``encoder`` (held-out items). Each writes
``<sweep>.md``, ``<sweep>.json`` and ``<sweep>.png`` into ``--out``; its finished cells go to
``<sweep>.cells.jsonl`` as they finish, so a killed sweep resumes where it stopped with the same command.
``--quick`` is a small size for tests; ``--workers`` runs cells in parallel processes.

``decision-rule`` (:mod:`~weince_lab.simulation.decision_rule`): how often the README's rule (b̂ > 0 with a
held-out gain) fires on the temperature sweep's InfoNCE tables at the sizes ``simcse-diagnose`` runs, and whether it
is right against the sweep's paired KL; writes ``decision_rule.json`` and ``decision_rule.md`` into ``--out``.

Every option is checked before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import get_args, get_origin, get_type_hints

import torch

from simcse_weince.cli.errors import command_main
from simcse_weince.core import checks
from simcse_weince.core.memory import check_memory
from simcse_weince.core.stopping import kept_on_stop
from simcse_weince.diagnostics.pot import MIN_EXCEEDANCES
from weince_lab import report
from weince_lab.simulation.decision_rule import DecisionRuleConfig, Size, load_sweep, markdown, measure
from weince_lab.simulation.experiments import E2Config, run_e1, run_e2, run_e3
from weince_lab.simulation.noise_floor import ClosedForms, NoiseFloorRow
from weince_lab.simulation.plots import (
    plot_lambda_cells,
    plot_link_calibration,
    plot_noise_floor,
    plot_pot_calibration,
)
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.sweep_cells import cells
from weince_lab.simulation.sweep_memory import memory_needs as sweep_memory_needs
from weince_lab.simulation.sweep_runner import run_sweep, write_report
from weince_lab.simulation.sweep_settings import OPTIONS, SWEEPS, SweepSettings, resolve
from weince_lab.simulation.winners import BlendedLaw

logger = logging.getLogger(__name__)
# Replication r uses seed + r: keep every such seed a valid numpy and torch seed.
MAX_SEED = 2**62


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    sub = p.add_subparsers(dest="experiment", required=True)
    e1 = sub.add_parser("e1", help="the authors' synthetic noise-floor experiment", allow_abbrev=False)
    e1.add_argument("--replications", type=int, default=12_000)
    e1.add_argument("--sample_sizes", type=int, nargs="+", default=[100, 200, 500, 1000, 2000, 5000, 10000])
    e1.add_argument("--beta", type=float, default=0.8, help="the Weibit law's beta*")
    e1.add_argument("--seed", type=int, default=20260113, help="the authors' default seed")
    e2 = sub.add_parser("e2", help="POT xi-hat and link selection against the truth", allow_abbrev=False)
    e2.add_argument("--pot_replications", type=int, default=100)
    e2.add_argument("--bootstrap", type=int, default=200, help="bootstrap samples of each POT fit")
    e2.add_argument("--pot_sizes", type=int, nargs="+", default=[20_000, 200_000])
    e2.add_argument("--pot_qs", type=float, nargs="+", default=[0.99, 0.995])
    e2.add_argument("--lams", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    e2.add_argument("--beta", type=float, default=3.0)
    e2.add_argument("--tau", type=float, default=0.1)
    e2.add_argument("--alpha", type=float, default=2.5, help="power-law index of the link batches' shortfalls")
    e2.add_argument("--hardness", type=float, default=1.0, help="scale of the link batches' shortfalls, (0, 2]")
    e2.add_argument("--scales", nargs="+", default=["32x256", "4x128"], help="BATCHESxANCHORS of the link fits")
    e2.add_argument("--link_replications", type=int, nargs="+", default=[40, 200], help="one per scale")
    e2.add_argument("--seed", type=int, default=0)
    e3 = sub.add_parser("e3", help="WEINCE's online lambda against the truth", allow_abbrev=False)
    e3.add_argument("--batches", type=int, default=8, help="batches per cell")
    e3.add_argument("--seed", type=int, default=0)
    for sp in (e1, e2, e3):
        sp.add_argument("--out", required=True, help="output folder")
    for sweep, help_text in SWEEP_HELP.items():
        add_sweep_parser(sub.add_parser(sweep, help=help_text, description=help_text, allow_abbrev=False))
    add_decision_rule_parser(sub.add_parser("decision-rule", help=DECISION_RULE_HELP, allow_abbrev=False))
    return p


DECISION_RULE_HELP = (
    "the README's rule (b-hat > 0 with a held-out gain) on the temperature sweep's InfoNCE tables: how often it "
    "fires and whether it is right"
)


def add_decision_rule_parser(p: argparse.ArgumentParser) -> None:
    """The options of ``decision-rule`` (:mod:`weince_lab.simulation.decision_rule`)."""
    p.add_argument("--out", required=True, help="output folder for decision_rule.json and decision_rule.md")
    p.add_argument("--sweep", default="experiments/results/ground_truth", help="the stored temperature sweep's folder")
    p.add_argument("--sizes", nargs="+", default=["4x128", "8x256", "32x256"], help="BATCHESxBATCH_SIZE")
    p.add_argument("--draws", type=int, default=34, help="problem draws per table and size")
    p.add_argument("--off_taus", type=float, nargs="+", default=[0.5], help="InfoNCE taus besides each kernel's best")
    p.add_argument("--kernels", nargs="+", default=None, help="default: the sweep's")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the sweep's")
    p.add_argument("--pairs", type=int, default=None, help="training-set size (default: the sweep's largest)")
    p.add_argument("--true_cosines", action="store_true", help="also the true latent cosines as the table")
    p.add_argument("--problem_seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="kernel x tau cells run in this many processes")


SWEEP_HELP = {
    "proposition": "Ground truth II: Whiteley's Proposition 1, CE - R_k against k at the true vectors",
    "negatives": "Ground truth II: trained tables, the gap to the Bayes search against k, per loss",
    "temperature": "Ground truth II: trained tables, the gap against the temperature and the training-set size",
    "encoder": "Ground truth II: an MLP encoder of noisy observations, scored on held-out items",
}


def add_sweep_parser(p: argparse.ArgumentParser) -> None:
    """A sweep's options: one flag per :class:`SweepSettings` field (its help text; ``None`` when not given, the
    sweep's size then decides), and the run's ``--out``, ``--quick`` and ``--workers``."""
    p.add_argument("--out", required=True, help="output folder (a sweep resumes from the cells it finds there)")
    p.add_argument("--quick", action="store_true", help="a small size, for tests")
    p.add_argument("--workers", type=int, default=1, help="cells run in this many processes (one thread each)")
    hints = get_type_hints(SweepSettings)
    for f in dataclasses.fields(SweepSettings):
        if f.name in OPTIONS:
            hint = hints[f.name]
            kind = {"type": get_args(hint)[0], "nargs": "+"} if get_origin(hint) is tuple else {"type": hint}
            p.add_argument(f"--{f.name}", default=None, help=f.metadata["help"].replace("%", "%%"), **kind)


def _at_least(name: str, values: Sequence[float], low: float) -> None:
    for v in values:
        if not (checks.is_real(v) and math.isfinite(v) and v >= low):
            checks.fail(f"--{name}", f"finite and >= {low:g}", v)


def _scale(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or int(parts[0]) < 2 or int(parts[1]) < 2:
        raise ValueError(f"--scales: expected BATCHESxANCHORS with both >= 2 (e.g. 32x256), got {text!r}")
    return int(parts[0]), int(parts[1])


def e2_config(args: argparse.Namespace) -> E2Config:
    """The E2 settings, every value checked (ValueError naming the option)."""
    _at_least("pot_replications", [args.pot_replications], 2)
    _at_least("bootstrap", [args.bootstrap], 10)
    _at_least("pot_sizes", args.pot_sizes, 100)
    if not all(0 < q < 1 for q in args.pot_qs):
        raise ValueError(f"--pot_qs must all be in (0, 1), got {args.pot_qs}")
    for n in args.pot_sizes:
        for q in args.pot_qs:
            if n * (1 - q) < 2 * MIN_EXCEEDANCES:  # fit_pot needs 10 exceedances; keep a margin over n(1 − q)
                raise ValueError(
                    f"--pot_sizes {n} with --pot_qs {q} leaves about {n * (1 - q):.0f} exceedances; the POT fit "
                    f"needs n(1 - q) >= {2 * MIN_EXCEEDANCES}: more scores or a lower q"
                )
    _at_least("link_replications", args.link_replications, 2)
    scales = tuple(_scale(s) for s in args.scales)
    if len(args.link_replications) != len(scales):
        raise ValueError(f"--link_replications needs one count per scale ({len(scales)}), got {args.link_replications}")
    for lam in args.lams:
        BlendedLaw(lam, args.beta, args.tau)
    link_law = ShortfallLaw("power", alpha=args.alpha)
    checks.within(0, 2, open_low=True)("--hardness", args.hardness)
    pot_laws = (ShortfallLaw("power", alpha=2.5), ShortfallLaw("beta", alpha=2.5), ShortfallLaw("gumbel", theta=1.0))
    return E2Config(
        pot_laws, tuple(args.pot_sizes), tuple(args.pot_qs), args.pot_replications, args.bootstrap, tuple(args.lams),
        args.beta, args.tau, link_law, args.hardness, scales, tuple(args.link_replications), args.seed,
    )  # fmt: skip


# Bytes that scale with each size flag (the arrays alive at once, float64/int64 = 8 bytes): E1's per-replication
# counts, frequencies and the root finder's vectors; E2's scores, bootstrap resamples and link batches (scores and
# masks of every batch of a replication, with select_link's copies); E3's per-batch statistics; the Python floats
# (32 bytes each) kept per replication.
E1_REPLICATION_BYTES = 512
POT_SCORE_BYTES = 3 * 8
BOOTSTRAP_BYTES = 2 * 8
LINK_SCORE_BYTES = 4 * (8 + 1)
E3_BATCH_BYTES = 256 * 5 * 8 * 2 * 60  # 256 anchors x 5 statistics per batch, in each of the 60 cells


def memory_needs(args: argparse.Namespace, config: E2Config | None) -> dict[str, tuple[object, float]]:
    """``flag -> (value, bytes)``: an upper estimate of the memory the experiment's size flags need."""
    if args.experiment == "e1":
        return {"--replications": (args.replications, float(args.replications) * E1_REPLICATION_BYTES)}
    if config is None:
        return {"--batches": (args.batches, float(args.batches) * E3_BATCH_BYTES)}
    n = max(config.pot_sizes)
    exceedances = max(s * (1 - q) for s in config.pot_sizes for q in config.pot_qs)
    return {
        "--pot_sizes": (args.pot_sizes, float(n) * POT_SCORE_BYTES),
        "--bootstrap": (args.bootstrap, float(config.bootstrap) * (exceedances + 1) * BOOTSTRAP_BYTES),
        "--scales": (args.scales, max(float(b) * a * a for b, a in config.scales) * LINK_SCORE_BYTES),
        "--pot_replications": (args.pot_replications, float(config.pot_replications) * 4 * 32),
        "--link_replications": (args.link_replications, float(max(config.link_replications)) * 12 * 32),
    }


def check_out(out: Path) -> None:
    """``--out`` must be a folder or a path where one can be made: no file on the way.

    Raises:
        ValueError: names the file in the way and what is expected.
    """
    for place in (out, *out.parents):
        if place.exists():
            if not place.is_dir():
                what = "is a file" if place == out else f"is a file, so {out} cannot be made in it"
                raise ValueError(
                    f"--out {out}: {place} {what}; expected a folder (new or existing) for the results, give another "
                    "path"
                )
            return


def sweep_settings(args: argparse.Namespace) -> SweepSettings:
    """A sweep's settings from its options (ValueError naming the option)."""
    return resolve(args.experiment, {name: getattr(args, name) for name in OPTIONS}, quick=args.quick)


def check_sweep(args: argparse.Namespace) -> SweepSettings:
    """A sweep's settings, ``--workers`` and the memory they need checked (ValueError naming the option)."""
    try:
        settings = sweep_settings(args)
    except ValueError as err:
        raise flag_named(err) from None
    if args.workers < 1:
        checks.fail("--workers", ">= 1", args.workers)
    workers = min(args.workers, len(cells(settings)))
    check_memory(sweep_memory_needs(settings, args.workers), f"{workers} cell{'s' * (workers > 1)} at once")
    check_out(Path(args.out))
    return settings


# The laws' own checks name their parameters (``tau must be ...``); on the command line they are flags.
LAW_FLAGS = {"beta ": "--beta", "alpha ": "--alpha", "tau ": "--tau", "lambda ": "--lams",
             "the blend's lambda ": "--blend_lambda"}  # fmt: skip


def flag_named(err: ValueError) -> ValueError:
    """``err`` with a law parameter it names written as its flag (``--tau must be ...``, ``--lams: lambda must
    be ...``); any other error as it is."""
    text = str(err)
    for start, flag in LAW_FLAGS.items():
        if text.startswith(start):
            return ValueError(f"--{text}" if flag == f"--{start.strip()}" else f"{flag}: {text}")
    return err


def check(args: argparse.Namespace) -> E2Config | SweepSettings | None:
    """Every option of the chosen experiment checked (ValueError naming it as a flag), sizes against the memory
    available included; E2's settings or a sweep's, else None."""
    try:
        return _check(args)
    except ValueError as err:
        raise flag_named(err) from None


def _check(args: argparse.Namespace) -> E2Config | SweepSettings | None:
    if args.experiment in SWEEPS:
        return check_sweep(args)
    if not 0 <= args.seed < MAX_SEED:
        checks.fail("--seed", "an integer in [0, 2**62)", args.seed)
    config = None
    if args.experiment == "e1":
        _at_least("replications", [args.replications], 2)
        _at_least("sample_sizes", args.sample_sizes, 1)
        BlendedLaw.weibit(args.beta)
    elif args.experiment == "e2":
        config = e2_config(args)
    else:
        _at_least("batches", [args.batches], 1)
    check_memory(memory_needs(args, config), f"experiment {args.experiment}")
    check_out(Path(args.out))
    return config


class Written:
    """The files a run has written so far, for the line a stop ends with."""

    def __init__(self, out: Path, experiment: str) -> None:
        self.out, self.experiment, self.files = out, experiment, []

    def add(self, path: Path) -> Path:
        self.files.append(Path(path))
        return Path(path)

    def kept(self) -> str:
        again = f"run the same command to run {self.experiment} again from the start"
        if not self.files:
            return f"nothing was written into {self.out} (the results are written at the end); {again}"
        names = ", ".join(p.name for p in self.files)
        return f"kept {names} in {self.out}, the rest not written; {again} (it replaces them)"


def sweep(args: argparse.Namespace) -> dict:
    """A Ground truth II sweep: checked, its missing cells run, its report written; the summary."""
    t0 = time.perf_counter()
    settings = check_sweep(args)  # before any work
    out = Path(args.out)
    records = run_sweep(settings, out, args.workers)
    summary, table = write_report(settings, records, out, t0)
    print(table + f"\nwrote {out / (settings.sweep + '.md')}")
    return summary


def decision_rule(args: argparse.Namespace, argv: Sequence[str]) -> dict:
    """The decision rule's rates, checked first, the report rewritten after each kernel × τ; the result."""
    t0 = time.perf_counter()
    config = DecisionRuleConfig(
        Path(args.sweep), tuple(Size.parse(s) for s in args.sizes), args.draws, tuple(args.off_taus),
        tuple(args.kernels) if args.kernels else None, args.pairs, tuple(args.seeds) if args.seeds else None,
        args.true_cosines, args.problem_seed,
    )  # fmt: skip
    if args.workers < 1:
        checks.fail("--workers", ">= 1", args.workers)
    load_sweep(config.sweep)  # a missing or wrong sweep fails before any work
    out = Path(args.out)
    check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    command = "simcse-simulate " + shlex.join(argv)

    def write(result: dict) -> None:
        result |= {"command": command, "seconds": time.perf_counter() - t0, "torch": torch.__version__}
        gaps = [abs(t["universe_gap"] - t["stored"]) for t in result["tables"]]
        header = (
            f"Decision rule ({result['rule']}) on the temperature sweep's InfoNCE tables (n = {result['pairs']:,} "
            f"pairs, seeds {result['seeds']}, {args.draws} problem draws per table and size; "
            f"{'complete' if result['complete'] else 'PARTIAL'}, {result['seconds']:.0f} s, torch {torch.__version__})."
            f"\n\nCommand: `{command}`\n\nTruth: {Path(args.sweep) / 'temperature.cells.jsonl'}; the InfoNCE tables "
            f"retrained here match its universe KL within {max(gaps, default=math.nan):.1e} (largest |difference|)."
        )
        report.write(out / "decision_rule", markdown(result["rows"], result["truths"], header), result)

    result = measure(config, logger.info, write, args.workers)
    write(result)
    print((out / "decision_rule.md").read_text())
    return result


def run(argv: Sequence[str]) -> dict:
    args = build_parser().parse_args(argv)
    if args.experiment == "decision-rule":
        return decision_rule(args, argv)
    if args.experiment in SWEEPS:
        return sweep(args)
    t0 = time.perf_counter()
    out = Path(args.out)
    config = check(args)  # before any work
    written = Written(out, args.experiment)
    with kept_on_stop(written.kept):
        if args.experiment == "e1":
            result, table = run_e1(args.sample_sizes, args.replications, args.seed, args.beta)
        elif args.experiment == "e2":
            result, table = run_e2(config)
        else:
            result, table = run_e3(args.batches, args.seed)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # made since the check, or not allowed
            raise OSError(f"--out {out}: could not make the folder ({err.strerror}); expected a folder") from err
        if args.experiment == "e1":
            rows = [NoiseFloorRow(**r) for r in result["rows"]]
            cf = ClosedForms(**result["closed_forms"])
            plots = [written.add(plot_noise_floor(rows, cf, out / "e1_noise_floor.png"))]
        elif args.experiment == "e2":
            plots = [written.add(plot_pot_calibration(result["pot"], out / "e2_pot.png"))]
            plots.append(written.add(plot_link_calibration(result["link"], out / "e2_link.png")))
        else:
            plots = [written.add(plot_lambda_cells(result["cells"], out / "e3_lambda.png"))]
        result |= {"seconds": time.perf_counter() - t0, "plots": [str(p) for p in plots], "argv": list(argv)}
        for path in report.write(out / args.experiment, table, result):
            written.add(path)
    print(table + f"\nwrote {out / (args.experiment + '.md')} ({result['seconds']:.0f} s)")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    return command_main(run, argv, log_info=True)


if __name__ == "__main__":
    raise SystemExit(main())
