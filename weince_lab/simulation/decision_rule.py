r"""The README's decision rule, measured: how often ``simcse-diagnose`` says "WEINCE can help", and whether it is right.

**The rule.** From the identified link fit of :func:`~simcse_weince.diagnostics.link.select_link` (the code
``simcse-diagnose`` runs), with candidates' features x_ij = (s_ij, u_ij), u = −log(1 − s),

.. math::
    P(j) = \operatorname{softmax}_j(a\,s_{ij} + b\,u_{ij}),

the rule *fires* when

.. math::
    \hat b > 0 \quad\text{and}\quad \hat g - z_{0.975}\,\widehat{\mathrm{se}}(\hat g) > 0,

ĝ the held-out gain of the family over the softmax link (fitted on the even batches, scored on the odd ones, nats per
anchor), i.e. b̂ > 0 and the gain's 95 % interval above 0 (:func:`rule_fires`).

**The problems (as simcse-diagnose forms them).** ``simcse-diagnose`` scores batches in the SimCSE B × B layout: B
anchors against the B positives of the same batch, anchor i's winner in column i, the other anchors' positives as
its negatives. Here a batch is B positive pairs (x_i, y_i) drawn from the universe's M (anchors uniform,
y_i ~ M(x_i, ·)), scored with a table's cosines ŝ_ij = ê_{x_i}·ê_{y_j}; "4 × 128" is 4 such batches of 128
(:func:`diagnostic_batches`). One difference from the text layout: a candidate that is the anchor's own item
(y_j = x_i, j ≠ i) is excluded, because the universe never makes an item its own positive (M(x, x) = 0) and the
item's cosine with itself is 1, a candidate that cannot win at the end of the score range.

**The truth.** Whether WEINCE helps at a kernel and τ is read from the stored temperature sweep
(``experiments/results/ground_truth/temperature.cells.jsonl``): the universe KL (1/N)Σ_x KL(M(x,·) ‖ Q̂(x,·)) of
the WEINCE table minus that of the InfoNCE table, paired by seed, with its 95 % Student-t interval over the seeds.
WEINCE *helps* when that interval lies below 0 (:func:`sweep_truth`). The rule is *right* on a run when it fires
exactly where WEINCE helps: right = fires if helps, else not fires.

**The scores the rule reads.** Design (B) of issue 41: the InfoNCE table of that sweep cell, retrained here from the
same seeds and settings (:func:`infonce_table`; its universe KL is checked against the stored one), so the rule
reads what a user who trained with InfoNCE at τ would diagnose. Design (A), the true latent cosines as the table
(the kernel's own winner law, no τ), is the reference: there the rule can only be asked whether it sees b* > 0.

**Rates.** Over R runs (tables of the sweep's seeds × fresh problem draws), the share that fires and the share that
is right, each with its exact (Clopper–Pearson) 95 % binomial interval (:func:`clopper_pearson`). The runs share
S tables, so the binomial interval ignores the spread between tables; the per-seed rates are kept beside it.

References: N. Whiteley, "Similarity search generalisation in contrastive learning with InfoNCE loss", arXiv
2607.09405; the WEINCE paper, arXiv 2606.00262 (ICML 2026).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from scipy.stats import beta as beta_dist

from simcse_weince.diagnostics.link import LinkFit, ScoreBatch, select_link
from weince_lab import report as md
from weince_lab.simulation.learning import TrainConfig, build_loss, train_table
from weince_lab.simulation.search import mean_interval, universe_gap
from weince_lab.simulation.sweep_cells import one_thread, universe_of
from weince_lab.simulation.sweep_settings import SweepSettings
from weince_lab.simulation.universe import Universe
from weince_lab.simulation.worker_pool import stop_pool, worker_pool

RULE = "b-hat > 0 and the held-out gain's 95% interval above 0"
TRUE_COSINES = "true cosines"  # the τ label of design (A)


@dataclass(frozen=True)
class Size:
    """``batches`` batches of ``batch_size`` anchors, each against the batch's ``batch_size`` positives.

    Raises:
        ValueError: fewer than 2 batches (the held-out gain needs a fitting and a scoring half) or than 2 anchors.
    """

    batches: int
    batch_size: int

    def __post_init__(self) -> None:
        if self.batches < 2 or self.batch_size < 2:
            raise ValueError(f"a size needs >= 2 batches of >= 2 anchors, got {self.batches} x {self.batch_size}")

    @classmethod
    def parse(cls, text: str) -> Size:
        """``"4x128"`` → Size(4, 128)."""
        parts = text.lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"expected BATCHESxBATCH_SIZE (e.g. 32x256), got {text!r}")
        return cls(int(parts[0]), int(parts[1]))

    def __str__(self) -> str:
        return f"{self.batches}x{self.batch_size}"


def rule_fires(fit: LinkFit) -> bool:
    """The README's rule on one link fit: b̂ > 0 and the held-out gain's interval above 0."""
    return fit.b > 0 and fit.heldout_gain_ci[0] > 0


def diagnostic_batches(
    universe: Universe, table: torch.Tensor, size: Size, generator: torch.Generator
) -> list[ScoreBatch]:
    """``size.batches`` SimCSE-layout batches: B pairs (x_i, y_i) from the universe, scores (B, B) =
    ê_{x_i}·ê_{y_j} of the table's unit rows, winner i, the anchor's own item excluded as a candidate."""
    unit = torch.nn.functional.normalize(table.double(), dim=1)
    found = []
    for _ in range(size.batches):
        anchors, positives = universe.sample_pairs(size.batch_size, generator)  # (B,), (B,)
        scores = (unit[anchors] @ unit[positives].T).clamp(-1.0, 1.0)  # (B, B)
        excluded = anchors[:, None] == positives[None, :]  # never on the diagonal: M(x, x) = 0
        found.append(ScoreBatch(scores, torch.arange(size.batch_size), excluded))
    return found


def rule_run(universe: Universe, table: torch.Tensor, size: Size, generator: torch.Generator) -> dict:
    """One diagnostic run: the link fit on fresh problems and whether the rule fires."""
    fit = select_link(diagnostic_batches(universe, table, size, generator))
    return {
        "b": fit.b,
        "a": fit.a,
        "gain": fit.heldout_gain,
        "gain_low": fit.heldout_gain_ci[0],
        "converged": fit.converged,
        "fires": rule_fires(fit),
    }


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval: Beta(α/2; k, n − k + 1) and Beta(1 − α/2; k + 1, n − k) quantiles (0 and 1 at
    the edges).

    Raises:
        ValueError: ``trials`` < 1 or ``successes`` outside [0, trials].
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    alpha = 1.0 - level
    low = 0.0 if successes == 0 else float(beta_dist.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta_dist.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


@dataclass(frozen=True)
class Truth:
    """WEINCE − InfoNCE universe KL at one kernel, τ and training-set size, paired by seed, from the sweep's cells."""

    kernel: str
    tau: float
    pairs: int
    seeds: tuple[int, ...]
    diffs: tuple[float, ...]
    mean: float
    low: float
    high: float

    @property
    def helps(self) -> bool:
        """WEINCE lowers the KL: the paired interval lies below 0."""
        return self.high < 0

    def to_dict(self) -> dict:
        return asdict(self) | {"helps": self.helps}


def read_cells(path: Path) -> list[dict]:
    """The records of a sweep's ``<sweep>.cells.jsonl``."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _gaps(records: Iterable[dict], **match: object) -> dict[int, float]:
    """seed → universe KL of the records whose cell has every value of ``match``."""
    return {r["cell"]["seed"]: r["universe_gap"] for r in records if all(r["cell"][k] == v for k, v in match.items())}


def sweep_truth(records: Sequence[dict], kernel: str, tau: float, pairs: int) -> Truth:
    """WEINCE − InfoNCE universe KL paired by seed, mean and 95 % t interval.

    Raises:
        ValueError: no seed has both arms at this kernel, τ and size.
    """
    weince = _gaps(records, kernel=kernel, tau=tau, pairs=pairs, loss="weince")
    infonce = _gaps(records, kernel=kernel, tau=tau, pairs=pairs, loss="infonce")
    seeds = tuple(sorted(weince.keys() & infonce.keys()))
    if not seeds:
        raise ValueError(f"the sweep has no seed with both weince and infonce at {kernel}, tau {tau}, {pairs} pairs")
    diffs = tuple(weince[s] - infonce[s] for s in seeds)
    mean, low, high = mean_interval(list(diffs))
    return Truth(kernel, tau, pairs, seeds, diffs, mean, low, high)


def best_infonce_tau(records: Sequence[dict], kernel: str, pairs: int) -> float:
    """The InfoNCE τ with the lowest mean universe KL over seeds at this kernel and training-set size.

    Raises:
        ValueError: no InfoNCE record at this kernel and size.
    """
    taus = sorted({r["cell"]["tau"] for r in records if r["cell"]["kernel"] == kernel and r["cell"]["pairs"] == pairs})
    means = {}
    for tau in taus:
        gaps = _gaps(records, kernel=kernel, tau=tau, pairs=pairs, loss="infonce")
        if gaps:
            means[tau] = sum(gaps.values()) / len(gaps)
    if not means:
        raise ValueError(f"the sweep has no infonce record at {kernel}, {pairs} pairs")
    return min(means, key=means.get)


def infonce_table(
    settings: SweepSettings, kernel: str, tau: float, pairs: int, seed: int
) -> tuple[Universe, torch.Tensor]:
    """The universe and the InfoNCE table of the sweep cell (kernel, τ, pairs, seed), retrained as the sweep did (its
    final decay of the rate included)."""
    universe = universe_of(settings, kernel, seed)
    cfg = TrainConfig(
        negatives=settings.ks[0], dim=settings.dim, steps=settings.steps, batch=settings.batch, pairs=pairs,
        lr=settings.lr, seed=seed, anneal=settings.anneal,
    )  # fmt: skip
    return universe, train_table(universe, build_loss("infonce", tau, universe.kernel), cfg).table


def retrained_gap(universe: Universe, table: torch.Tensor, tau: float) -> float:
    """The retrained InfoNCE table's universe KL, to compare with the stored cell's."""
    return universe_gap(universe, table, build_loss("infonce", tau, universe.kernel))


def problem_generator(problem_seed: int, seed: int, size: Size) -> torch.Generator:
    """The generator of one table's problem draws at one size: the same draws at every τ of a kernel (paired)."""
    mixed = problem_seed * 1_000_003 + seed * 10_007 + size.batches * 1009 + size.batch_size
    return torch.Generator().manual_seed(mixed)


def rates(runs: Sequence[dict], helps: bool | None) -> dict:
    """Fires and right shares over the runs with their Clopper–Pearson intervals (right only when the truth is
    known), plus the per-seed fire shares and the median b̂ and held-out gain."""
    n = len(runs)
    fired = sum(r["fires"] for r in runs)
    out = {"runs": n, "fires": fired, "fires_share": fired / n, "fires_ci": clopper_pearson(fired, n)}
    if helps is not None:
        right = fired if helps else n - fired
        out |= {"right": right, "right_share": right / n, "right_ci": clopper_pearson(right, n)}
    per_seed: dict[int, list[bool]] = {}
    for r in runs:
        per_seed.setdefault(r["seed"], []).append(r["fires"])
    out["fires_share_per_seed"] = {str(s): sum(v) / len(v) for s, v in sorted(per_seed.items())}
    out["median_b"] = float(torch.tensor([r["b"] for r in runs]).median())
    out["median_gain"] = float(torch.tensor([r["gain"] for r in runs]).median())
    out["converged_share"] = sum(r["converged"] for r in runs) / n
    return out


def _pct(share: float, ci: Sequence[float]) -> str:
    return f"{100 * share:.0f}% [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"


def markdown(rows: Sequence[dict], truths: Sequence[dict], header: str) -> str:
    """The report: the rule's rates per kernel × τ × size, then the truth each row was scored against."""
    rates_rows, truth_rows = [], []
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    for r in sorted(rows, key=lambda r: (kernels.index(r["kernel"]), isinstance(r["tau"], str), str(r["tau"]))):
        right = _pct(r["right_share"], r["right_ci"]) if "right_share" in r else "—"
        helps = "—" if r["helps"] is None else ("yes" if r["helps"] else "no")
        tau = r["tau"] if isinstance(r["tau"], str) else f"{r['tau']:g}" + (" (best)" if r.get("best") else "")
        seeds = ", ".join(f"{100 * v:.0f}%" for v in r["fires_share_per_seed"].values())
        rates_rows.append([
            r["kernel"], tau, r["size"], r["runs"], _pct(r["fires_share"], r["fires_ci"]), right, helps,
            f"{r['median_b']:+.3f}", f"{r['median_gain']:+.4f}", seeds,
        ])  # fmt: skip
    for t in sorted(truths, key=lambda t: (kernels.index(t["kernel"]) if t["kernel"] in kernels else 0, t["tau"])):
        per_seed = ", ".join(f"{d:+.4f}" for d in t["diffs"])
        truth_rows.append([
            t["kernel"], f"{t['tau']:g}", f"{t['pairs']:,}", ", ".join(map(str, t["seeds"])),
            f"{t['mean']:+.4f} [{t['low']:+.4f}, {t['high']:+.4f}]", per_seed, "yes" if t["helps"] else "no",
        ])  # fmt: skip
    lines = [
        header,
        "",
        *md.table(["kernel", "τ (InfoNCE table)", "size", "runs", "fires (95% CI)", "right (95% CI)", "WEINCE helps?",
                "median b-hat", "median held-out gain", "fires per seed"], rates_rows),
        "",
        "The truth (WEINCE − InfoNCE universe KL, paired by seed, 95% t interval; WEINCE helps when the interval is "
        "below 0):",
        "",
        *md.table(["kernel", "τ", "n pairs", "seeds", "WEINCE − InfoNCE KL", "per seed", "helps"], truth_rows),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def stored_gap(records: Sequence[dict], kernel: str, tau: float, pairs: int, seed: int) -> float:
    """The stored InfoNCE cell's universe KL (NaN when the sweep lacks it)."""
    return _gaps(records, kernel=kernel, tau=tau, pairs=pairs, loss="infonce").get(seed, math.nan)


@dataclass(frozen=True)
class DecisionRuleConfig:
    """One measurement of the rule.

    ``sweep`` is the stored temperature sweep's folder (``temperature.settings.json`` and
    ``temperature.cells.jsonl``); the InfoNCE τ of each kernel are its best-KL τ and ``off_taus``; ``draws`` problem
    draws per table and size; ``pairs`` and ``seeds`` default to the sweep's largest training set and its seeds;
    ``true_cosines`` adds design (A), the true latent cosines as the table.

    Raises:
        ValueError: no size, ``draws`` < 1, a negative ``problem_seed``.
    """

    sweep: Path
    sizes: tuple[Size, ...]
    draws: int
    off_taus: tuple[float, ...] = (0.5,)
    kernels: tuple[str, ...] | None = None
    pairs: int | None = None
    seeds: tuple[int, ...] | None = None
    true_cosines: bool = False
    problem_seed: int = 0

    def __post_init__(self) -> None:
        if not self.sizes:
            raise ValueError("at least one size is needed")
        if self.draws < 1:
            raise ValueError(f"draws must be >= 1, got {self.draws}")
        if self.problem_seed < 0:
            raise ValueError(f"the problem seed must be >= 0, got {self.problem_seed}")


def load_sweep(folder: Path) -> tuple[SweepSettings, list[dict]]:
    """The stored temperature sweep: its settings and its cells' records.

    Raises:
        ValueError: the folder holds another sweep.
    """
    settings = SweepSettings(**json.loads((Path(folder) / "temperature.settings.json").read_text(encoding="utf-8")))
    if settings.sweep != "temperature":
        raise ValueError(f"{folder}: expected the temperature sweep's settings, got the {settings.sweep} sweep")
    return settings, read_cells(Path(folder) / "temperature.cells.jsonl")


def _train(cfg: DecisionRuleConfig, kernel: str, tau: float, seed: int) -> dict:
    """The sweep cell's InfoNCE table at one seed and its universe KL beside the stored one."""
    settings, records = load_sweep(cfg.sweep)
    pairs = cfg.pairs or max(settings.pairs)
    universe, table = infonce_table(settings, kernel, tau, pairs, seed)
    gap, stored = retrained_gap(universe, table, tau), stored_gap(records, kernel, tau, pairs, seed)
    return {"kernel": kernel, "tau": tau, "seed": seed, "universe_gap": gap, "stored": stored, "table": table}


def _draw(
    cfg: DecisionRuleConfig, kernel: str, tau: float | None, size: Size, tables: dict[int, torch.Tensor | None]
) -> list[dict]:
    """``cfg.draws`` runs of the rule at one size on each seed's table of the cell (kernel, τ) (a table ``None``: the
    true latent vectors; τ names the cell, the tables carry it)."""
    settings, _ = load_sweep(cfg.sweep)
    runs = []
    for seed, table in tables.items():
        universe = universe_of(settings, kernel, seed)
        generator = problem_generator(cfg.problem_seed, seed, size)  # the same draws at every τ of a kernel
        learned = universe.vectors if table is None else table
        runs += [rule_run(universe, learned, size, generator) | {"seed": seed} for _ in range(cfg.draws)]
    return runs


Cell = tuple[str, float | None]  # (kernel, InfoNCE τ); τ None is design (A), the true latent cosines


def cell_groups(cfg: DecisionRuleConfig, kernels: Sequence[str], best: dict[str, float]) -> list[list[Cell]]:
    """The cells in the order they are run: every kernel at its best τ and at the first off τ, then each further off
    τ, then the true cosines, so that a run cut short keeps the main cells."""
    offs = [[(k, t) for k in kernels if t != best[k]] for t in cfg.off_taus]
    groups = [[(k, best[k]) for k in kernels] + (offs[0] if offs else []), *offs[1:]]
    return groups + ([[(k, None) for k in kernels]] if cfg.true_cosines else [])


class _Serial:
    """The pool interface run in this process (``workers`` = 1)."""

    def map(self, work: Callable[..., object], tasks: Sequence[tuple]) -> Iterator[tuple[tuple, object]]:
        return ((task, one_thread(work, *task)) for task in tasks)


class _Pool:
    """Tasks in worker processes, yielded as they finish."""

    def __init__(self, workers: int) -> None:
        self.pool = worker_pool(workers)

    def map(self, work: Callable[..., object], tasks: Sequence[tuple]) -> Iterator[tuple[tuple, object]]:
        futures = {self.pool.submit(one_thread, work, *task): task for task in tasks}
        return ((futures[f], f.result()) for f in as_completed(futures))


def measure(
    cfg: DecisionRuleConfig,
    log: Callable[[str], None] = print,
    progress: Callable[[dict], None] | None = None,
    workers: int = 1,
) -> dict:
    """The rule's rates per kernel × τ × size (:func:`cell_groups` order; per group the tables first, then the sizes
    in the order given, so the small sizes of every cell come before the large ones), the truths they are scored
    against and the check of each retrained table against its stored cell. ``progress`` receives the result so far
    after each kernel × τ × size (``complete`` False until the end); ``workers`` > 1 runs the tasks in processes."""
    settings, records = load_sweep(cfg.sweep)
    pairs = cfg.pairs or max(settings.pairs)
    kernels = cfg.kernels or settings.kernels
    seeds = list(cfg.seeds or settings.seeds)
    best = {kernel: best_infonce_tau(records, kernel, pairs) for kernel in kernels}
    out = {"rule": RULE, "pairs": pairs, "seeds": seeds, "best_tau": best, "rows": [], "truths": [], "tables": []}
    pool = _Serial() if workers <= 1 else _Pool(workers)
    try:
        for group in cell_groups(cfg, kernels, best):
            truths = {c: None if c[1] is None else sweep_truth(records, *c, pairs) for c in group}
            out["truths"] += [t.to_dict() for t in truths.values() if t is not None]
            tables: dict[Cell, dict[int, torch.Tensor | None]] = {c: dict.fromkeys(seeds) for c in group}
            trained = [(cfg, k, t, seed) for k, t in group if t is not None for seed in seeds]
            for (_, kernel, tau, seed), result in pool.map(_train, trained):
                tables[kernel, tau][seed] = result.pop("table")
                out["tables"].append(result)
            units = [(cfg, kernel, tau, size, tables[kernel, tau]) for size in cfg.sizes for kernel, tau in group]
            for (_, kernel, tau, size, _), runs in pool.map(_draw, units):
                truth = truths[kernel, tau]
                helps = None if truth is None else truth.helps
                label = {"tau": TRUE_COSINES} if tau is None else {"tau": tau, "best": tau == best[kernel]}
                out["rows"].append({"kernel": kernel, **label, "size": str(size), "helps": helps} | rates(runs, helps))
                log(f"{kernel} tau {tau} {size}: fires {out['rows'][-1]['fires_share']:.2f}")
                if progress is not None:
                    progress(out | {"complete": False})
    finally:
        if isinstance(pool, _Pool):
            stop_pool(pool.pool)
    return out | {"complete": True}
