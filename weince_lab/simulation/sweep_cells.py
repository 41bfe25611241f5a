"""The cells of the Ground truth II sweeps: the grid of one sweep and the figures of one cell.

One seed draws the universe, the training pairs, the negatives, the initial table and the evaluation problems. All
of them are shared by every loss at that seed, which makes the losses paired.

Every trained table (and the encoder's held-out items) is scored by its KL to the Bayes search under the loss's own
link (``universe_gap``), by ranking (``top1``, ``recall10``: :func:`~weince_lab.simulation.search.recall_at` at
k = 10) and by the **best-link KL** (``best_link_gap``): the universe KL under the link (a, b) refitted on the
table's own cosines over fresh search problems (``link``, as ``simcse-diagnose`` reads a real encoder). A record
without these fields (made before they existed) is not done: :func:`is_complete`.

A proposition cell holds the figures of each of its variants (:data:`~weince_lab.simulation.sweep_settings.VARIANTS`,
listed in the cell): the anchor-excluded ones at the record's top level, under the keys they had before the variants
existed, and Whiteley's literal ones under ``"literal"``.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable

import numpy as np
import torch

from weince_lab.simulation.learning import (
    TrainConfig,
    Watch,
    build_loss,
    checked_state,
    held_at,
    observations,
    train_encoder,
    train_table,
)
from weince_lab.simulation.search import (
    first_order_parts,
    geometry,
    learned_link,
    link_universe_gap,
    loglog_slope,
    proposition_one,
    recall_at,
    search_gap,
    top1_agreement,
    universe_gap,
    whole_universe_cross_entropy,
)
from weince_lab.simulation.sweep_settings import VARIANTS, SweepSettings
from weince_lab.simulation.universe import Universe, kernel_law, make_universe

RECALL_K = 10
RANKING_FIELDS: tuple[str, ...] = ("top1", "recall10", "best_link_gap", "link")
# The convergence check of a training cell: the same run continued to CHECK_FACTOR × its steps; the cell counts as
# converged when its universe KL moved by at most KL_TOLERANCE nats between the two.
CHECK_FACTOR = 1.5
KL_TOLERANCE = 0.005
LINK_FIELDS: tuple[str, ...] = ("a", "a_ci", "b", "b_ci", "heldout_gain", "heldout_gain_ci")
PROPOSITION_FIELDS: tuple[str, ...] = (
    "cross_entropy", "first_order_constant", "first_order_parts", "rows", "slope", "tail_slope", "sign_changes",
)  # fmt: skip


def cells(settings: SweepSettings) -> list[dict]:
    """Every cell of the sweep, in a fixed order."""
    s = settings
    if s.sweep == "proposition":  # the variants are part of the cell: a cell stored without one runs again
        variants = [v for v in VARIANTS if v in s.variants]
        return [
            {"kernel": k, "tau": t, "seed": seed, "variants": variants}
            for k in s.kernels
            for t in s.taus
            for seed in s.seeds
        ]
    return [
        {"kernel": kernel, "loss": loss, "k": k, "tau": tau, "pairs": n, "seed": seed}
        for kernel in s.kernels
        for seed in s.seeds
        for n in s.pairs
        for tau in s.taus
        for k in s.ks
        for loss in s.losses
    ]


def cell_key(cell: dict) -> str:
    """A cell's identity in the store: its settings as sorted JSON."""
    return json.dumps(cell, sort_keys=True)


def is_complete(sweep: str, record: dict) -> bool:
    """Whether a stored record holds every figure its sweep now computes (the ranking and best-link fields of a
    training cell, of an encoder cell's held-out items, and the convergence check of either; of each variant a
    proposition cell lists); a record made before them runs again."""
    if sweep == "proposition":  # made before the variants: not done
        variants = record["cell"].get("variants", [])
        parts = [record if v == "excluded" else record.get(v, {}) for v in variants]
        return bool(variants) and all(name in part for part in parts for name in PROPOSITION_FIELDS)
    part = record.get("heldout", {}) if sweep == "encoder" else record
    return "convergence" in record and all(name in part for name in RANKING_FIELDS)


def universe_of(settings: SweepSettings, kernel: str, seed: int) -> Universe:
    """The seed's universe of the kernel (one per seed, shared by every loss and setting of that seed)."""
    law = kernel_law(kernel, settings.kappa, settings.beta, settings.blend_lambda)
    return make_universe(settings.items, settings.dim, law, seed=10_007 + seed, name=kernel)


def one_thread(work: Callable[..., object], *args: object) -> object:
    """``work(*args)`` on one torch thread, the thread count restored after (a cell in a worker process, or in this
    one with ``--workers 1``: a caller in the same process, a test run included, keeps its own count; on a shared
    CPU more threads per cell only wait for each other)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return work(*args)
    finally:
        torch.set_num_threads(before)


def run_cell(settings: SweepSettings, cell: dict) -> dict:
    """One cell's figures, on one torch thread (:func:`one_thread`)."""
    return one_thread(_cell_figures, settings, cell)


def _cell_figures(settings: SweepSettings, cell: dict) -> dict:
    t0 = time.perf_counter()
    universe = universe_of(settings, cell["kernel"], cell["seed"])
    if settings.sweep == "proposition":
        out = proposition_cell(settings, cell, universe)
    elif settings.sweep == "encoder":
        out = encoder_cell(settings, cell, universe)
    else:
        out = training_cell(settings, cell, universe)
    return {"cell": cell, **out, "seconds": time.perf_counter() - t0}


def proposition_cell(settings: SweepSettings, cell: dict, universe: Universe) -> dict:
    """CE − R_k at every k for the true vectors, with the exact constant and the log-log slopes, in each of the
    cell's variants: the anchor-excluded figures at the top level, the literal ones under ``"literal"``."""
    out: dict = {}
    for variant in cell["variants"]:
        figures = proposition_figures(settings, cell, universe, include_anchor=variant == "literal")
        out |= figures if variant == "excluded" else {variant: figures}
    return out


def proposition_figures(settings: SweepSettings, cell: dict, universe: Universe, include_anchor: bool) -> dict:
    """One variant's figures. Both variants draw from one generator seed per k, so they share the anchors and
    positives (the negatives' law differs)."""
    table, tau = universe.vectors, cell["tau"]
    rows = []
    for k in settings.ks:
        generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + k)
        rows.append(
            proposition_one(
                universe, table, tau, k, settings.samples, generator, include_anchor=include_anchor
            ).to_dict()
        )
    ce = whole_universe_cross_entropy(universe, table, tau, include_anchor)
    jensen, positive = first_order_parts(universe, table, tau, include_anchor)
    ks, gaps = [r["k"] for r in rows], [r["gap"] for r in rows]
    return {
        "cross_entropy": ce,
        "first_order_constant": jensen - positive,  # first_order_constant(...), the same arithmetic
        "first_order_parts": {"jensen": jensen, "positive": positive},
        "rows": rows,
        "slope": loglog_slope(ks, gaps),
        "tail_slope": loglog_slope(ks[-3:], gaps[-3:]),
        "sign_changes": int(np.sum(np.diff(np.sign(gaps)) != 0)),
    }


def train_config(settings: SweepSettings, cell: dict) -> TrainConfig:
    """The training of a table cell: its k, training-set size and seed; the sweep's dimension, steps, batch, rate and
    final decay."""
    s = settings
    return TrainConfig(
        negatives=cell["k"],
        dim=s.dim,
        steps=s.steps,
        batch=s.batch,
        pairs=cell["pairs"],
        lr=s.lr,
        seed=cell["seed"],
        anneal=s.anneal,
    )


def check_steps(steps: int) -> int:
    """The step count of a cell's convergence check: ⌈CHECK_FACTOR × steps⌉."""
    return math.ceil(CHECK_FACTOR * steps)


def convergence(steps: int, gap: float, check: int, check_gap: float, anneal: int = 0) -> dict:
    """A cell's convergence check: its universe KL at its ``steps`` and at ``check`` steps of the same run (with a
    final decay of the rate over ``anneal`` steps, recorded when > 0: the two runs share all but their own last
    ``anneal`` steps), how far it moved, and whether by at most :data:`KL_TOLERANCE` nats (``converged``)."""
    moved = check_gap - gap
    return {
        "steps": steps, "universe_gap": gap, "check_steps": check, "check_universe_gap": check_gap, "moved": moved,
        "tolerance": KL_TOLERANCE, "converged": bool(abs(moved) <= KL_TOLERANCE),
        **({"anneal": anneal} if anneal else {}),
    }  # fmt: skip


def training_cell(settings: SweepSettings, cell: dict, universe: Universe) -> dict:
    """A table trained with the cell's loss, k, τ and training-set size, and its metrics against the truth, with
    its convergence check (the universe KL of the same run at :func:`check_steps`)."""
    loss = build_loss(cell["loss"], cell["tau"], universe.kernel)
    later = check_steps(settings.steps)
    result = train_table(universe, loss, train_config(settings, cell), check_steps=later)
    table = result.table
    with checked_state(result, [], loss):  # the loss's own parameters (a learned link) at the check
        check_gap = universe_gap(universe, result.check.table, loss)
    gaps = {}
    for size in settings.eval_sizes:
        generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + size)  # same problems for every loss
        gaps[str(size)] = search_gap(universe, table, loss, size, settings.eval_sets, generator).to_dict()
    gap = universe_gap(universe, table, loss)
    return {
        "universe_gap": gap,
        "convergence": convergence(settings.steps, gap, later, check_gap, settings.anneal),
        "search_gap": gaps,
        **ranking_and_link(settings, cell, universe, table),
        **geometry(universe, table),
        "lambda_mean": result.lambda_mean,
        "beta_mean": result.beta_mean,
        "final_loss": result.final_loss,
        **({"learned": result.learned} if result.learned else {}),
    }


def ranking_and_link(settings: SweepSettings, cell: dict, universe: Universe, table: torch.Tensor) -> dict:
    """A table's ranking against the Bayes retriever (``top1``, ``recall10``), the link (a, b) refitted on its
    cosines over fresh search problems (the same problems for every loss at one seed) and the universe KL under
    that link (``best_link_gap``)."""
    link = learned_link(
        universe, table, settings.link_size, settings.link_batches, settings.link_anchors,
        torch.Generator().manual_seed(cell["seed"] * 1_000_003 + 1),
    )  # fmt: skip
    return {
        "top1": top1_agreement(universe, table),
        "recall10": recall_at(universe, table, RECALL_K),
        "best_link_gap": link_universe_gap(universe, table, link.a, link.b),
        "link": {k: link.to_dict()[k] for k in LINK_FIELDS} | {"converged": link.converged},
    }


def encoder_split(items: int, early_stop: int) -> tuple[int, int, int]:
    """An encoder cell's (trained, validation, held-out) item counts: half of the items trained on; the others all
    held out, or (early stopping, ``early_stop`` > 0) their first half for validation and the rest held out."""
    seen = items // 2
    validation = (items - seen) // 2 if early_stop else 0
    return seen, validation, items - seen - validation


def encoder_cell(settings: SweepSettings, cell: dict, universe: Universe) -> dict:
    """An MLP encoder of noisy observations trained on half of the items, scored on both halves (the held-out half
    is a universe of its own: its Bayes search is over the held-out items, and its link is refitted on search
    problems among them).

    With early stopping (``settings.early_stop`` = E > 0) the unseen items are split (:func:`encoder_split`): the
    validation items' universe KL is read every E steps, and the encoder is scored at the step t̂ = arg min of it,
    on the trained and the held-out items (which never choose anything). Its convergence check is the same
    procedure over the 1.5× run: the figures at that run's own arg min (``stopped``: both steps and validation KLs).
    """
    seen_count, validation_count, _ = encoder_split(universe.size, settings.early_stop)
    order = torch.randperm(universe.size, generator=torch.Generator().manual_seed(cell["seed"] + 17))
    seen, validation = order[:seen_count], order[seen_count : seen_count + validation_count]
    held = order[seen_count + validation_count :]
    obs = observations(universe, settings.obs_width, settings.noise, cell["seed"])
    loss = build_loss(cell["loss"], cell["tau"], universe.kernel)
    train_part, heldout_part = universe.subset(seen), universe.subset(held)
    later = check_steps(settings.steps)
    cfg = train_config(settings, cell)

    def unit(model: torch.nn.Module, items: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.nn.functional.normalize(model(obs[items]).double(), dim=1)

    make_watch = None
    if settings.early_stop:
        validation_part = universe.subset(validation)

        def make_watch(model: torch.nn.Module) -> Watch:
            return Watch(settings.early_stop, lambda: universe_gap(validation_part, unit(model, validation), loss))

    encoder, result = train_encoder(train_part, obs[seen], loss, cfg, settings.hidden, later, make_watch)
    parameters = list(encoder.parameters())

    def at(track: str) -> contextlib.AbstractContextManager:
        """The encoder and the loss at the budget ("budget") or at its check ("check"): early stopping's state there
        when it ran, else the run's own."""
        stop = result.stops.get(track)
        if stop is not None:
            return held_at(parameters, loss, stop.parameters, stop.loss_state)
        return contextlib.nullcontext() if track == "budget" else checked_state(result, parameters, loss)

    with at("check"):
        check_gaps = [universe_gap(part, unit(encoder, items), loss)
                      for part, items in ((train_part, seen), (heldout_part, held))]  # fmt: skip
    size = max(settings.eval_sizes)
    generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + size)
    with at("budget"):
        trained, heldout = unit(encoder, seen), unit(encoder, held)
        gaps = (universe_gap(train_part, trained, loss), universe_gap(heldout_part, heldout, loss))
        figures = {
            "train": {
                "universe_gap": gaps[0],
                "top1": top1_agreement(train_part, trained),
                "recall10": recall_at(train_part, trained, RECALL_K),
            },
            "heldout": {
                "universe_gap": gaps[1],
                **ranking_and_link(settings, cell, heldout_part, heldout),
                "search_gap": search_gap(heldout_part, heldout, loss, size, settings.eval_sets, generator).to_dict(),
                **geometry(heldout_part, heldout),
            },
        }
    stopped = {}
    if result.stops:
        budget, check = result.stops["budget"], result.stops["check"]
        stopped = {"stopped": {"every": settings.early_stop, "validation_items": validation_count,
                               "steps": budget.steps, "validation_gap": budget.score,
                               "check_steps": check.steps, "check_validation_gap": check.score}}  # fmt: skip
    return {
        "convergence": {
            "train": convergence(settings.steps, gaps[0], later, check_gaps[0], settings.anneal),
            "heldout": convergence(settings.steps, gaps[1], later, check_gaps[1], settings.anneal),
        },
        **stopped,
        **figures,
        "lambda_mean": result.lambda_mean,
        "final_loss": result.final_loss,
    }
