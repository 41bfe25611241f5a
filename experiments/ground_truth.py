"""Ground truth II: learning a known similarity: how many negatives, which τ, and when WEINCE helps.

    .venv/bin/python -m experiments.ground_truth proposition --out experiments/results/ground_truth
    .venv/bin/python -m experiments.ground_truth negatives   --out experiments/results/ground_truth
    .venv/bin/python -m experiments.ground_truth temperature --out experiments/results/ground_truth
    .venv/bin/python -m experiments.ground_truth encoder     --out experiments/results/ground_truth

Four sweeps over universes with a known kernel (:mod:`simcse_weince.simulation.universe`):

* ``proposition``: Whiteley's Proposition 1 literally. For the fixed embedding φ = the true vectors, the measured
  CE − R_k against k per kernel and τ, its log-log slope, and Whiteley's bounds.
* ``negatives``: a free table trained with each loss at each k (fixed τ). The gap of the trained search to the
  Bayes search against k, with its slope per seed and the interval across seeds; the paired WEINCE − InfoNCE
  differences; the λ the loss chose; and the link coefficients (a, b) read off the learned cosines.
* ``temperature``: the same at a fixed k across τ and two training-set sizes. It gives the best τ per kernel, and
  shows whether a high τ makes the gap vary less across seeds and sample sizes.
* ``encoder``: an MLP encoder of noisy observations, trained on half of the items and scored on both halves, so
  the held-out half measures how the learned search generalises to unseen items.

Each sweep writes ``<sweep>.md``, ``<sweep>.json`` and ``<sweep>.png`` into ``--out``. Its finished cells go to
``<sweep>.cells.jsonl`` one line each as they finish, so a killed sweep resumes where it stopped with the same
command. ``--quick`` is a small size for tests; ``--workers`` runs cells in parallel processes. One seed draws
the universe, the training pairs, the negatives, the initial table and the evaluation problems. All of them are
shared by every loss at that seed, which makes the losses paired.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from pathlib import Path

import numpy as np
import torch

from experiments.common import stop_pool, worker_pool
from simcse_weince.cli.errors import run_command
from simcse_weince.memory import check_memory
from simcse_weince.simulation.learning import LOSSES, TrainConfig, build_loss, observations, train_encoder, train_table
from simcse_weince.simulation.search import (
    first_order_constant,
    geometry,
    learned_link,
    loglog_slope,
    mean_interval,
    proposition_one,
    search_gap,
    top1_agreement,
    universe_gap,
    whole_universe_cross_entropy,
)
from simcse_weince.simulation.universe import KERNELS, PAIR_CHUNK, Universe, kernel_law, make_universe
from simcse_weince.stopping import Stopped, kept_on_stop, stop_name

SWEEPS = ("proposition", "negatives", "temperature", "encoder")
MAX_SEED = 2**62
# Defaults of the full size and of --quick (a test's size); an option given on the command line wins over both.
FULL = {
    "kernels": list(KERNELS), "items": 512, "dim": 8, "kappa": 10.0, "beta": 3.0, "blend_lambda": 0.5,
    "seeds": [0, 1, 2], "steps": 2000, "batch": 256, "lr": 0.02, "eval_sets": 4096, "eval_sizes": [16, 256],
    "link_batches": 8, "link_anchors": 256, "link_size": 64, "samples": 200_000,
    "proposition": {"ks": [4, 16, 64, 256, 1024], "taus": [0.05, 0.1, 0.2, 0.5], "losses": [], "pairs": [0]},
    "negatives": {"ks": [4, 16, 64, 256, 1024], "taus": [0.1], "losses": ["infonce", "weince", "weince_unit", "oracle"],
                  "pairs": [100_000]},
    "temperature": {"ks": [64], "taus": [0.02, 0.05, 0.1, 0.2, 0.5], "losses": ["infonce", "weince"],
                    "pairs": [10_000, 100_000]},
    "encoder": {"ks": [64], "taus": [0.1], "losses": ["infonce", "weince", "oracle"], "pairs": [100_000],
                "items": 1024},
    "obs_width": 32, "hidden": 128, "noise": 0.1,
}  # fmt: skip
QUICK = {
    "items": 64, "dim": 4, "seeds": [0, 1], "steps": 150, "batch": 64, "lr": 0.05, "eval_sets": 256,
    "eval_sizes": [8], "link_batches": 2, "link_anchors": 64, "link_size": 16, "samples": 20_000,
    "proposition": {"ks": [16, 64, 256, 1024], "taus": [0.5], "losses": [], "pairs": [0]},
    "negatives": {"ks": [4, 16, 64], "taus": [0.1], "losses": ["infonce", "weince"], "pairs": [4000]},
    "temperature": {"ks": [16], "taus": [0.1, 0.5], "losses": ["infonce", "weince"], "pairs": [1000, 4000]},
    "encoder": {"ks": [16], "taus": [0.1], "losses": ["infonce", "weince"], "pairs": [4000], "items": 128},
    "obs_width": 8, "hidden": 16,
}  # fmt: skip
PER_SWEEP = ("ks", "taus", "losses", "pairs")
_TRAINING = {"steps", "batch", "lr", "eval_sets", "eval_sizes", "losses", "pairs"}
_LINK = {"link_batches", "link_anchors", "link_size"}
_ENCODER = {"obs_width", "hidden", "noise"}
# Settings a sweep does not read: changing them does not stop a resume.
IGNORED = {
    "proposition": _TRAINING | _LINK | _ENCODER,
    "negatives": {"samples"} | _ENCODER,
    "temperature": {"samples"} | _ENCODER,
    "encoder": {"samples"} | _LINK,
}


def build_parser() -> argparse.ArgumentParser:
    """The options; every size defaults to None here and is resolved by :func:`resolve`."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    p.add_argument("sweep", choices=SWEEPS)
    p.add_argument("--out", required=True, help="output folder (a sweep resumes from the cells it finds there)")
    p.add_argument("--quick", action="store_true", help="a small size, for tests")
    p.add_argument("--workers", type=int, default=1, help="cells run in this many processes (one thread each)")
    p.add_argument("--kernels", nargs="+", help=f"of {KERNELS}")
    p.add_argument("--items", type=int, help="N, the universe's items")
    p.add_argument("--dim", type=int, help="d, the latent (and the table's) dimension")
    p.add_argument("--kappa", type=float, help="the vMF concentration κ (τ* = 1/κ), vmf and blend")
    p.add_argument("--beta", type=float, help="the endpoint kernel's β*, endpoint and blend")
    p.add_argument("--blend_lambda", type=float, help="the blend's λ*, in (0, 1)")
    p.add_argument("--seeds", type=int, nargs="+")
    p.add_argument("--ks", type=int, nargs="+", help="negatives per anchor")
    p.add_argument("--taus", type=float, nargs="+", help="temperatures")
    p.add_argument("--losses", nargs="+", help=f"of {LOSSES} (training sweeps)")
    p.add_argument("--pairs", type=int, nargs="+", help="training-set sizes (training sweeps)")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int, help="anchors per step")
    p.add_argument("--lr", type=float, help="Adam's learning rate")
    p.add_argument("--eval_sets", type=int, help="fresh candidate sets per size for the search gap")
    p.add_argument("--eval_sizes", type=int, nargs="+", help="candidate-set sizes of the search gap")
    p.add_argument("--link_batches", type=int, help="batches of the link fit on the learned cosines")
    p.add_argument("--link_anchors", type=int, help="anchors per batch of the link fit")
    p.add_argument("--link_size", type=int, help="candidates per anchor of the link fit")
    p.add_argument("--samples", type=int, help="Monte Carlo samples per k (proposition)")
    p.add_argument("--obs_width", type=int, help="width of the items' noisy observations (encoder)")
    p.add_argument("--hidden", type=int, help="hidden width of the MLP encoder (encoder)")
    p.add_argument("--noise", type=float, help="noise σ of the observations (encoder)")
    return p


def resolve(args: argparse.Namespace) -> dict:
    """The sweep's settings: command line, then --quick, then the full defaults; every value checked."""
    size = {**FULL, **(QUICK if args.quick else {})}
    settings: dict = {"sweep": args.sweep}
    for name, default in size.items():
        if name in SWEEPS:
            continue
        given = getattr(args, name)
        default = size[args.sweep].get(name, default)  # a sweep's own default (the encoder's universe size)
        settings[name] = default if given is None else given
    for name in PER_SWEEP:
        given = getattr(args, name)
        settings[name] = size[args.sweep][name] if given is None else given
    for name in ("ks", "taus", "pairs", "eval_sizes"):  # ascending: slopes and "the largest k" read the order
        settings[name] = sorted(settings[name])
    check(settings)
    return settings


def _ints(settings: dict, name: str, low: int) -> None:
    """ValueError unless the option (one integer or a list) is non-empty with every value >= ``low``."""
    values = settings[name] if isinstance(settings[name], list) else [settings[name]]
    if not values or any(v < low for v in values):
        raise ValueError(f"--{name} must be integers >= {low}, got {settings[name]!r}")


def check(settings: dict) -> None:
    """ValueError naming the option, before any work."""
    for name in settings["kernels"]:
        if name not in KERNELS:
            raise ValueError(f"--kernels must be of {KERNELS}, got {name!r}")
    for name in settings["losses"]:
        if name not in LOSSES:
            raise ValueError(f"--losses must be of {LOSSES}, got {name!r}")
    if settings["sweep"] != "proposition" and not settings["losses"]:
        raise ValueError("--losses: a training sweep needs at least one loss")
    if not (math.isfinite(settings["noise"]) and settings["noise"] >= 0):
        raise ValueError(f"--noise must be a finite number >= 0, got {settings['noise']!r}")
    if settings["sweep"] == "encoder" and settings["items"] < 6:
        raise ValueError(
            f"--items: the encoder sweep holds out half of the items and needs >= 6, got {settings['items']}"
        )
    for name in ("kappa", "beta", "lr"):
        if not (math.isfinite(settings[name]) and settings[name] > 0):
            raise ValueError(f"--{name} must be a finite number > 0, got {settings[name]!r}")
    for kernel in KERNELS:  # every kernel's parameters, also those of kernels not run: a bad value is never kept
        kernel_law(kernel, settings["kappa"], settings["beta"], settings["blend_lambda"])
    if not all(math.isfinite(t) and t > 0 for t in settings["taus"]) or not settings["taus"]:
        raise ValueError(f"--taus must be finite numbers > 0, got {settings['taus']!r}")
    if not all(0 <= s < MAX_SEED for s in settings["seeds"]) or len(set(settings["seeds"])) != len(settings["seeds"]):
        raise ValueError(f"--seeds must be distinct integers in [0, 2**62), got {settings['seeds']!r}")
    _ints(settings, "items", 3)
    for name in ("dim", "batch", "eval_sets", "eval_sizes", "link_batches", "link_anchors", "link_size", "samples",
                 "obs_width", "hidden"):  # fmt: skip
        _ints(settings, name, 2)
    # WEINCE's tail fits need K >= 3 candidates (fewer fall back to β = 1, which would bend even the oracle's link).
    _ints(settings, "ks", 1 if settings["sweep"] == "proposition" else 3)
    _ints(settings, "steps", 1)
    if min(settings["eval_sizes"]) < 3:
        raise ValueError(
            f"--eval_sizes must be integers >= 3 (the tail fits need 3 candidates), got {settings['eval_sizes']!r}"
        )
    for name in ("kernels", "losses", "ks", "taus", "pairs", "eval_sizes"):
        if len(set(settings[name])) != len(settings[name]):
            raise ValueError(f"--{name} must not repeat a value, got {settings[name]!r}")
    single = {"negatives": ("taus", "pairs"), "temperature": ("ks",), "encoder": ("ks", "taus", "pairs")}
    for name in single.get(settings["sweep"], ()):
        if len(settings[name]) != 1:
            raise ValueError(f"--{name}: the {settings['sweep']} sweep takes one value, got {settings[name]!r}")
    if settings["sweep"] != "proposition":
        _ints(settings, "pairs", 1)
    if settings["sweep"] == "proposition" and len(settings["ks"]) < 2:
        raise ValueError("--ks: a slope needs at least 2 values of k")
    if settings["sweep"] == "negatives" and len(settings["ks"]) < 2:
        raise ValueError("--ks: a slope needs at least 2 values of k")


# The memory a cell needs, by what scales it (float64 and int64 are 8 bytes; the factors count the arrays alive
# at once): the universe's N × N matrices (cosines, logits, M, its CDF, log M, the learned cosines, log Q̂, ...),
# the N × d vectors with the table, its gradient and Adam's two moments, and so on.
_F = 8
WORKER_BYTES = 700 << 20  # a worker process with torch and the project imported


def _largest(settings: dict, *names: str) -> str:
    """Of the flags ``names`` whose values multiply into one array, the one with the largest value (named when it
    does not fit)."""
    return max(names, key=lambda n: max(settings[n]) if isinstance(settings[n], list) else settings[n])


def memory_needs(settings: dict, workers: int) -> dict[str, tuple[object, float]]:
    """``flag -> (value, bytes)``: an upper estimate of the memory the sweep's settings need, per flag (for
    :func:`~simcse_weince.memory.check_memory`); ``--workers`` counts the other workers' cells and processes."""
    s = settings
    n, k = s["items"], max(s["ks"])
    needs: dict[str, tuple[object, float]] = {
        "--items": (n, float(n) * n * _F * 8 + float(PAIR_CHUNK) * n * _F * 2),
        "--dim": (s["dim"], float(n) * s["dim"] * _F * 5),
    }
    if s["sweep"] == "proposition":
        needs["--samples"] = (s["samples"], float(s["samples"]) * _F * 2)
        needs["--ks"] = (s["ks"], 4096.0 * (1 + k) * _F * 5)
    else:
        needs["--pairs"] = (s["pairs"], float(max(s["pairs"])) * _F * 4)
        flag = _largest(s, "batch", "ks")
        needs[f"--{flag}"] = (s[flag], float(s["batch"]) * (1 + k) * _F * 12)
        needs["--eval_sizes"] = (s["eval_sizes"], 256.0 * max(s["eval_sizes"]) * _F * 10)
        needs["--eval_sets"] = (s["eval_sets"], float(s["eval_sets"]) * _F * 2)
        if s["sweep"] == "encoder":
            needs["--obs_width"] = (s["obs_width"], float(n) * s["obs_width"] * _F * 2)
            needs["--hidden"] = (s["hidden"], (float(n) + s["obs_width"]) * s["hidden"] * _F * 4)
        else:
            flag = _largest(s, "link_batches", "link_anchors", "link_size")
            link = float(s["link_batches"]) * s["link_anchors"] * s["link_size"] * _F * 6
            needs[f"--{flag}"] = (s[flag], needs.get(f"--{flag}", (0, 0.0))[1] + link)
    cell = sum(b for _, b in needs.values())
    parallel = min(workers, len(cells(settings)))
    if parallel > 1:
        needs["--workers"] = (workers, (parallel - 1) * (cell + WORKER_BYTES))
    return needs


def cells(settings: dict) -> list[dict]:
    """Every cell of the sweep, in a fixed order."""
    s = settings
    if s["sweep"] == "proposition":
        return [{"kernel": k, "tau": t, "seed": seed} for k in s["kernels"] for t in s["taus"] for seed in s["seeds"]]
    return [
        {"kernel": kernel, "loss": loss, "k": k, "tau": tau, "pairs": n, "seed": seed}
        for kernel in s["kernels"]
        for seed in s["seeds"]
        for n in s["pairs"]
        for tau in s["taus"]
        for k in s["ks"]
        for loss in s["losses"]
    ]


def cell_key(cell: dict) -> str:
    """A cell's identity in the store: its settings as sorted JSON."""
    return json.dumps(cell, sort_keys=True)


def universe_of(settings: dict, kernel: str, seed: int) -> Universe:
    """The seed's universe of the kernel (one per seed, shared by every loss and setting of that seed)."""
    law = kernel_law(kernel, settings["kappa"], settings["beta"], settings["blend_lambda"])
    return make_universe(settings["items"], settings["dim"], law, seed=10_007 + seed, name=kernel)


def run_cell(settings: dict, cell: dict) -> dict:
    """One cell's figures (run in a worker process)."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    universe = universe_of(settings, cell["kernel"], cell["seed"])
    if settings["sweep"] == "proposition":
        out = proposition_cell(settings, cell, universe)
    elif settings["sweep"] == "encoder":
        out = encoder_cell(settings, cell, universe)
    else:
        out = training_cell(settings, cell, universe)
    return {"cell": cell, **out, "seconds": time.perf_counter() - t0}


def proposition_cell(settings: dict, cell: dict, universe: Universe) -> dict:
    """CE − R_k at every k for the true vectors, with the exact constant and the log-log slopes."""
    table, tau = universe.vectors, cell["tau"]
    rows = []
    for k in settings["ks"]:
        generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + k)
        rows.append(proposition_one(universe, table, tau, k, settings["samples"], generator).to_dict())
    ce = whole_universe_cross_entropy(universe, table, tau)
    ks, gaps = [r["k"] for r in rows], [r["gap"] for r in rows]
    return {
        "cross_entropy": ce,
        "first_order_constant": first_order_constant(universe, table, tau),
        "rows": rows,
        "slope": loglog_slope(ks, gaps),
        "tail_slope": loglog_slope(ks[-3:], gaps[-3:]),
        "sign_changes": int(np.sum(np.diff(np.sign(gaps)) != 0)),
    }


def training_cell(settings: dict, cell: dict, universe: Universe) -> dict:
    """A table trained with the cell's loss, k, τ and training-set size, and its metrics against the truth."""
    loss = build_loss(cell["loss"], cell["tau"], universe.kernel)
    cfg = TrainConfig(
        negatives=cell["k"], dim=settings["dim"], steps=settings["steps"], batch=settings["batch"],
        pairs=cell["pairs"], lr=settings["lr"], seed=cell["seed"],
    )  # fmt: skip
    result = train_table(universe, loss, cfg)
    table = result.table
    gaps = {}
    for size in settings["eval_sizes"]:
        generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + size)  # same problems for every loss
        gaps[str(size)] = search_gap(universe, table, loss, size, settings["eval_sets"], generator).to_dict()
    link = learned_link(
        universe, table, settings["link_size"], settings["link_batches"], settings["link_anchors"],
        torch.Generator().manual_seed(cell["seed"] * 1_000_003 + 1),
    )  # fmt: skip
    return {
        "universe_gap": universe_gap(universe, table, loss),
        "search_gap": gaps,
        "top1": top1_agreement(universe, table),
        **geometry(universe, table),
        "lambda_mean": result.lambda_mean,
        "beta_mean": result.beta_mean,
        "final_loss": result.final_loss,
        "link": {k: link.to_dict()[k] for k in ("a", "a_ci", "b", "b_ci", "heldout_gain", "heldout_gain_ci")}
        | {"converged": link.converged},
    }


def encoder_cell(settings: dict, cell: dict, universe: Universe) -> dict:
    """An MLP encoder of noisy observations trained on half of the items, scored on both halves (the held-out half
    is a universe of its own: its Bayes search is over the held-out items)."""
    half = universe.size // 2
    order = torch.randperm(universe.size, generator=torch.Generator().manual_seed(cell["seed"] + 17))
    seen, held = order[:half], order[half:]
    obs = observations(universe, settings["obs_width"], settings["noise"], cell["seed"])
    loss = build_loss(cell["loss"], cell["tau"], universe.kernel)
    cfg = TrainConfig(
        negatives=cell["k"], dim=settings["dim"], steps=settings["steps"], batch=settings["batch"],
        pairs=cell["pairs"], lr=settings["lr"], seed=cell["seed"],
    )  # fmt: skip
    train_part, heldout_part = universe.subset(seen), universe.subset(held)
    encoder, result = train_encoder(train_part, obs[seen], loss, cfg, settings["hidden"])
    with torch.no_grad():
        heldout_table = torch.nn.functional.normalize(encoder(obs[held]).double(), dim=1)
    size = max(settings["eval_sizes"])
    generator = torch.Generator().manual_seed(cell["seed"] * 1_000_003 + size)
    return {
        "train": {
            "universe_gap": universe_gap(train_part, result.table, loss),
            "top1": top1_agreement(train_part, result.table),
        },
        "heldout": {
            "universe_gap": universe_gap(heldout_part, heldout_table, loss),
            "top1": top1_agreement(heldout_part, heldout_table),
            "search_gap": search_gap(
                heldout_part, heldout_table, loss, size, settings["eval_sets"], generator
            ).to_dict(),
            **geometry(heldout_part, heldout_table),
        },
        "lambda_mean": result.lambda_mean,
        "final_loss": result.final_loss,
    }


class CellStore:
    """The finished cells of one sweep in ``<sweep>.cells.jsonl``: one JSON line per cell, flushed and synced as it
    is written, so a killed sweep loses only the cells in flight. A torn last line (a kill mid-write) is dropped."""

    def __init__(self, out: Path, settings: dict) -> None:
        self.path = out / f"{settings['sweep']}.cells.jsonl"
        self.settings_path = out / f"{settings['sweep']}.settings.json"
        self.done: dict[str, dict] = {}
        if self.settings_path.exists():
            before = json.loads(self.settings_path.read_text())
            keys = (before.keys() | settings.keys()) - IGNORED[settings["sweep"]]
            changed = sorted(k for k in keys if before.get(k) != settings.get(k))
            if changed:
                raise ValueError(
                    f"{out} holds a {settings['sweep']} sweep with other settings ({', '.join(changed)}): "
                    "give the same options to resume it, or a new --out"
                )
        elif self.path.exists():
            raise ValueError(f"{self.path} has no settings file beside it ({self.settings_path.name}): use a new --out")
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a kill: that cell runs again
                self.done[cell_key(record["cell"])] = record

    def start(self, settings: dict) -> None:
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)
        self.settings_path.write_text(json.dumps(settings, indent=2))
        if self.path.exists() and (text := self.path.read_text()) and not text.endswith("\n"):
            with self.path.open("a") as f:  # end a torn line, so the next record starts on its own line
                f.write("\n")

    def kept(self, total: int) -> str:
        """What a stop keeps and how to go on (the store is read back by the same command)."""
        return (
            f"kept {len(self.done)} of {total} cells in {self.path} (the cells in progress are dropped); run the "
            "same command to resume from there"
        )

    def add(self, record: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[cell_key(record["cell"])] = record


def run_sweep(settings: dict, out: Path, workers: int, progress: Callable[[str], None] = print) -> list[dict]:
    """Run the cells not yet in the store; return every cell's record in the sweep's order.

    Raises:
        Stopped: Ctrl-C or ``SIGTERM``: the workers are ended, the message says how many cells the store kept
            and that the same command resumes.
    """
    store = CellStore(out, settings)
    todo = [c for c in cells(settings) if cell_key(c) not in store.done]
    total = len(cells(settings))
    with kept_on_stop(lambda: store.kept(total)):
        store.start(settings)
        if len(todo) < total:
            progress(f"resuming: {total - len(todo)} of {total} cells already done in {store.path}")
        if workers == 1:
            for cell in todo:
                store.add(run_cell(settings, cell))
                progress(f"cell {len(store.done)}/{total} done: {cell_key(cell)}")
        elif todo:
            pool = worker_pool(workers)  # its workers end with this process, even on kill -9
            try:
                futures = [pool.submit(run_cell, settings, cell) for cell in todo]
                for future in as_completed(futures):
                    record = future.result()
                    store.add(record)
                    progress(f"cell {len(store.done)}/{total} done: {cell_key(record['cell'])}")
            except BaseException:
                stop_pool(pool)  # a stop or a failed cell: the other cells are not waited for
                raise
            pool.shutdown()
    return [store.done[cell_key(c)] for c in cells(settings)]


# ----------------------------------------------------------------------------------------------------- reports


def _ci(values: Sequence[float], fmt: str = ".4f") -> str:
    mean, low, high = mean_interval(values)
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def _select(records: list[dict], **match: object) -> list[dict]:
    return [r for r in records if all(r["cell"][k] == v for k, v in match.items())]


def _machine() -> str:
    return f"{os.cpu_count()} CPU cores, torch {torch.__version__}, 1 thread per cell"


def report_proposition(settings: dict, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a proposition sweep."""
    s = settings
    summary, lines = {"cells": records, "groups": []}, []
    lines += [
        f"Proposition 1 (fixed embedding = the true vectors): CE − R_k, {s['samples']:,} Monte Carlo samples per k, "
        f"N = {s['items']}, d = {s['dim']}, seeds {s['seeds']} (one universe each); {_machine()}",
        "",
        "| kernel | τ | k | CE − R_k: mean over seeds [95% CI] | MC SE (seed 0) | k·gap | Whiteley lower | "
        "Whiteley upper | inside |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    slopes = []
    for kernel in s["kernels"]:
        for tau in s["taus"]:
            group = _select(records, kernel=kernel, tau=tau)
            by_k = {k: [r["rows"][i] for r in group] for i, k in enumerate(s["ks"])}
            for k, rows in by_k.items():
                gaps = [r["gap"] for r in rows]
                lines.append(
                    f"| {kernel} | {tau:g} | {k} | {_ci(gaps, '.2e')} | {rows[0]['se']:.1e} | "
                    f"{k * float(np.mean(gaps)):.3f} | {rows[0]['lower']:.3g} | {rows[0]['upper']:.3g} | "
                    f"{sum(r['inside'] for r in rows)}/{len(rows)} |"
                )
            per_seed = [r["slope"] for r in group]
            tail = [r["tail_slope"] for r in group]
            constant = [r["first_order_constant"] for r in group]
            last = [r["rows"][-1]["k"] * r["rows"][-1]["gap"] for r in group]
            slopes.append(
                f"| {kernel} | {tau:g} | {_ci(per_seed, '+.3f')} | {_ci(tail, '+.3f')} | "
                f"{sum(r['sign_changes'] > 0 for r in group)}/{len(group)} | {_ci(constant, '+.2f')} | "
                f"{_ci(last, '+.2f')} | {math.exp(2 / tau):.3g} |"
            )
            summary["groups"].append(
                {"kernel": kernel, "tau": tau, "slope": list(mean_interval(per_seed)), "per_seed": per_seed,
                 "tail_slope": list(mean_interval(tail)), "first_order_constant": constant, "k_gap_at_largest_k": last}
            )  # fmt: skip
    lines += [
        "", f"Slopes of log |CE − R_k| on log k per seed (all k; the 3 largest k), seeds whose gap changes sign "
        f"across k, the exact first-order constant C = lim k·(CE − R_k) and the measured k·(CE − R_k) at k = "
        f"{s['ks'][-1]}, against the bounds' constant e^(2/τ); mean [95% t interval]:", "",
        "| kernel | τ | slope, all k | slope, 3 largest k | sign change | C exact | k·gap measured | e^(2/τ) |",
        "|---|---|---|---|---|---|---|---|", *slopes,
    ]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


def _against_infonce(settings: dict) -> list[str]:
    """The arms compared with InfoNCE, paired by seed (none when InfoNCE is not in the sweep)."""
    return [x for x in settings["losses"] if x != "infonce"] if "infonce" in settings["losses"] else []


def _paired(records: list[dict], metric: Callable[[dict], float], loss: str, base: str, **match: object) -> list[float]:
    a = {r["cell"]["seed"]: metric(r) for r in _select(records, loss=loss, **match)}
    b = {r["cell"]["seed"]: metric(r) for r in _select(records, loss=base, **match)}
    return [a[seed] - b[seed] for seed in sorted(a.keys() & b.keys())]


def excess_slope(ks: Sequence[int], gaps: Sequence[float]) -> float | None:
    """Slope of log(gap(k) − floor) on log k over all but the two largest k, floor = the smaller gap at those two;
    ``None`` where an excess is ≤ 0 or fewer than 2 points remain (the rate is then not readable)."""
    if len(ks) < 4:
        return None
    floor = min(gaps[-2:])
    excess = np.asarray(gaps[:-2]) - floor
    if (excess <= 0).any():
        return None
    return loglog_slope(ks[:-2], excess)


def report_negatives(settings: dict, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a negatives sweep."""
    s = settings
    size = str(max(s["eval_sizes"]))
    tau, n = s["taus"][0], s["pairs"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against k: τ = {tau:g}, {n:,} training pairs, {s['steps']} steps "
        f"of {s['batch']} anchors, Adam lr {s['lr']:g}; N = {s['items']}, d = d′ = {s['dim']}; seeds {s['seeds']}; "
        f"{_machine()}. Means over seeds [95% t interval].",
        "",
        f"| kernel | loss | k | universe KL | search KL (m = {size}) | top-1 agreement | cosine r | Procrustes | "
        "λ (training) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    slopes, paired, links, summary = [], [], [], {"cells": records, "slopes": [], "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            for k in s["ks"]:
                g = _select(records, kernel=kernel, loss=loss, k=k, tau=tau, pairs=n)
                lines.append(
                    f"| {kernel} | {loss} | {k} | {_ci([r['universe_gap'] for r in g])} | "
                    f"{_ci([r['search_gap'][size]['mean'] for r in g])} | {_ci([r['top1'] for r in g], '.3f')} | "
                    f"{np.mean([r['cosine_corr'] for r in g]):.3f} | {np.mean([r['procrustes'] for r in g]):.3f} | "
                    f"{np.mean([r['lambda_mean'] for r in g]):.3f} |"
                )
            per_seed, excess = {}, {}
            for seed in s["seeds"]:
                g = sorted(_select(records, kernel=kernel, loss=loss, seed=seed), key=lambda r: r["cell"]["k"])
                ks, gaps = [r["cell"]["k"] for r in g], [r["universe_gap"] for r in g]
                per_seed[seed] = loglog_slope(ks, gaps)
                excess[seed] = excess_slope(ks, gaps)
            mean, low, high = mean_interval(list(per_seed.values()))
            readable = [v for v in excess.values() if v is not None]
            ex = _ci(readable, "+.2f") if readable else "n/a"
            slopes.append(
                f"| {kernel} | {loss} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] | {ex} | {len(readable)}/{len(excess)} |"
            )
            summary["slopes"].append(
                {"kernel": kernel, "loss": loss, "slope": [mean, low, high], "per_seed": per_seed,
                 "excess_slope_per_seed": excess}
            )  # fmt: skip
            g = _select(records, kernel=kernel, loss=loss, k=max(s["ks"]))
            links.append(
                f"| {kernel} | {loss} | {_ci([r['link']['a'] for r in g], '.2f')} | "
                f"{_ci([r['link']['b'] for r in g], '.2f')} | {_ci([r['link']['heldout_gain'] for r in g], '.4f')} |"
            )
        for loss in _against_infonce(s):
            for k in s["ks"]:
                d_gap = _paired(records, lambda r: r["universe_gap"], loss, "infonce", kernel=kernel, k=k)
                d_top = _paired(records, lambda r: r["top1"], loss, "infonce", kernel=kernel, k=k)
                paired.append(f"| {kernel} | {loss} − infonce | {k} | {_ci(d_gap, '+.4f')} | {_ci(d_top, '+.3f')} |")
                summary["paired"].append({"kernel": kernel, "loss": loss, "k": k, "universe_gap": d_gap, "top1": d_top})
    lines += [
        "", "Slope of log(universe KL) on log k, fitted per seed, mean [95% t interval]; and the slope of the excess "
        "over the floor, log(KL(k) − floor) on the k below the two largest, floor = the smaller KL at the two "
        "largest k (seeds where every excess is > 0; the interval is over those):", "",
        "| kernel | loss | slope, all k | excess slope | seeds readable |", "|---|---|---|---|---|", *slopes,
        "", "Paired by seed (same universe, pairs, negatives, initial table and evaluation problems):", "",
        "| kernel | difference | k | universe KL | top-1 agreement |", "|---|---|---|---|---|", *paired,
        "", f"Link selection on the learned cosines (true positives as winners; k = {max(s['ks'])}): a = (1 − λ)/τ, "
        "b = λβ, held-out gain of the family over the softmax link (nats / anchor):", "",
        "| kernel | loss | a | b | held-out gain |", "|---|---|---|---|---|", *links,
    ]  # fmt: skip
    truth = [f"{kernel}: (a*, b*) = {kernel_law(kernel, s['kappa'], s['beta'], s['blend_lambda']).coefficients}"
             for kernel in s["kernels"]]  # fmt: skip
    lines += ["", "True coefficients of the kernels' links: " + "; ".join(truth)]
    return summary, "\n".join(lines) + "\n"


def report_temperature(settings: dict, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a temperature sweep."""
    s = settings
    k = s["ks"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against τ: k = {k}, training sets of {s['pairs']} pairs, "
        f"{s['steps']} steps of {s['batch']} anchors; N = {s['items']}, d = {s['dim']}; seeds {s['seeds']}; "
        f"{_machine()}. Means over seeds [95% t interval]; sd = the standard deviation across seeds.",
        "",
        "| kernel | loss | τ | "
        + " | ".join(f"universe KL, n = {n:,} (sd)" for n in s["pairs"])
        + " | small − large n | top-1 (largest n) | λ (training) |",
        "|---|---|---|" + "---|" * len(s["pairs"]) + "---|---|---|",
    ]
    summary: dict = {"cells": records, "best": [], "paired": []}
    best, paired = [], []
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            means = {}
            for tau in s["taus"]:
                cols, per_n = [], {}
                for n in s["pairs"]:
                    g = _select(records, kernel=kernel, loss=loss, tau=tau, pairs=n)
                    per_n[n] = {r["cell"]["seed"]: r["universe_gap"] for r in g}
                    v = list(per_n[n].values())
                    cols.append(f"{_ci(v)} ({np.std(v, ddof=1) if len(v) > 1 else 0:.4f})")
                small, large = min(s["pairs"]), max(s["pairs"])
                spread = [per_n[small][seed] - per_n[large][seed] for seed in per_n[large]]
                g = _select(records, kernel=kernel, loss=loss, tau=tau, pairs=large)
                means[tau] = float(np.mean(list(per_n[large].values())))
                lines.append(
                    f"| {kernel} | {loss} | {tau:g} | " + " | ".join(cols) + f" | {_ci(spread, '+.4f')} | "
                    f"{_ci([r['top1'] for r in g], '.3f')} | {np.mean([r['lambda_mean'] for r in g]):.3f} |"
                )
            tau_best = min(means, key=means.get)
            best.append(f"| {kernel} | {loss} | {tau_best:g} | {means[tau_best]:.4f} |")
            summary["best"].append({"kernel": kernel, "loss": loss, "tau": tau_best, "universe_gap": means[tau_best]})
        for loss in _against_infonce(s):
            for tau in s["taus"]:
                for n in s["pairs"]:
                    d = _paired(records, lambda r: r["universe_gap"], loss, "infonce", kernel=kernel, tau=tau, pairs=n)
                    paired.append(f"| {kernel} | {loss} − infonce | {tau:g} | {n:,} | {_ci(d, '+.4f')} |")
                    summary["paired"].append({"kernel": kernel, "loss": loss, "tau": tau, "pairs": n, "diff": d})
    lines += [
        "", f"Best τ (lowest mean universe KL at n = {max(s['pairs']):,}):", "", "| kernel | loss | τ | universe KL |",
        "|---|---|---|---|", *best,
        "", "Paired by seed:", "", "| kernel | difference | τ | n | universe KL |", "|---|---|---|---|---|", *paired,
    ]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


def report_encoder(settings: dict, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of an encoder sweep."""
    s = settings
    half = s["items"] // 2
    lines = [
        f"MLP encoder (observations: a random {s['dim']} → {s['obs_width']} projection of the latent vectors plus "
        f"N(0, {s['noise']:g}²) noise; hidden width {s['hidden']}) trained on {half} of {s['items']} items, scored on "
        f"those and on the {s['items'] - half} held-out items; k = {s['ks'][0]}, τ = {s['taus'][0]:g}, "
        f"{s['pairs'][0]:,} pairs, {s['steps']} steps of {s['batch']}; seeds {s['seeds']}; {_machine()}. "
        "Means over seeds [95% t interval].",
        "",
        "| kernel | loss | universe KL, trained items | universe KL, held-out items | top-1, trained | "
        "top-1, held-out | cosine r, held-out | λ (training) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    paired, summary = [], {"cells": records, "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            g = _select(records, kernel=kernel, loss=loss)
            lines.append(
                f"| {kernel} | {loss} | {_ci([r['train']['universe_gap'] for r in g])} | "
                f"{_ci([r['heldout']['universe_gap'] for r in g])} | {_ci([r['train']['top1'] for r in g], '.3f')} | "
                f"{_ci([r['heldout']['top1'] for r in g], '.3f')} | "
                f"{np.mean([r['heldout']['cosine_corr'] for r in g]):.3f} | "
                f"{np.mean([r['lambda_mean'] for r in g]):.3f} |"
            )
        for loss in _against_infonce(s):
            d_gap = _paired(records, lambda r: r["heldout"]["universe_gap"], loss, "infonce", kernel=kernel)
            d_top = _paired(records, lambda r: r["heldout"]["top1"], loss, "infonce", kernel=kernel)
            paired.append(f"| {kernel} | {loss} − infonce | {_ci(d_gap, '+.4f')} | {_ci(d_top, '+.3f')} |")
            summary["paired"].append({"kernel": kernel, "loss": loss, "heldout_gap": d_gap, "heldout_top1": d_top})
    lines += ["", "Held-out items, paired by seed:", "", "| kernel | difference | universe KL | top-1 |",
              "|---|---|---|---|", *paired]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


REPORTS = {
    "proposition": report_proposition,
    "negatives": report_negatives,
    "temperature": report_temperature,
    "encoder": report_encoder,
}


def plot(settings: dict, summary: dict, path: Path) -> Path:
    """One panel per kernel: the gap against k, τ or the arm, per loss."""
    from simcse_weince.diagnostics.plots import headless_pyplot

    plt = headless_pyplot()
    s, records = settings, summary["cells"]
    fig, axes = plt.subplots(1, len(s["kernels"]), figsize=(4.2 * len(s["kernels"]), 3.6), squeeze=False)
    for ax, kernel in zip(axes[0], s["kernels"], strict=True):
        if s["sweep"] == "proposition":
            for tau in s["taus"]:
                g = _select(records, kernel=kernel, tau=tau)
                gaps = np.abs(np.mean([[row["gap"] for row in r["rows"]] for r in g], axis=0))
                ax.loglog(s["ks"], gaps, "o-", label=f"|CE − R_k|, τ = {tau:g}")
            ax.loglog(s["ks"], gaps[0] * s["ks"][0] / np.asarray(s["ks"], dtype=float), "k:", label="slope −1")
            ax.set_xlabel("negatives k")
        elif s["sweep"] == "negatives":
            for loss in s["losses"]:
                m = [
                    np.mean([r["universe_gap"] for r in _select(records, kernel=kernel, loss=loss, k=k)])
                    for k in s["ks"]
                ]
                ax.loglog(s["ks"], m, "o-", label=loss)
            ax.set_xlabel("negatives k")
            ax.set_ylabel("universe KL to the Bayes search")
        elif s["sweep"] == "encoder":
            for i, part in enumerate(("train", "heldout")):
                m = [
                    np.mean([r[part]["universe_gap"] for r in _select(records, kernel=kernel, loss=x)])
                    for x in s["losses"]
                ]
                ax.bar(np.arange(len(m)) + 0.4 * i, m, width=0.4, label="trained items" if i == 0 else "held-out items")
            ax.set_xticks(np.arange(len(s["losses"])) + 0.2, s["losses"])
            ax.set_ylabel("universe KL to the Bayes search")
        else:
            for loss in s["losses"]:
                for n in s["pairs"]:
                    m = [
                        np.mean([r["universe_gap"] for r in _select(records, kernel=kernel, loss=loss, tau=t, pairs=n)])
                        for t in s["taus"]
                    ]
                    ax.loglog(s["taus"], m, "o-", label=f"{loss}, n = {n:,}")
            ax.set_xlabel("temperature τ")
            ax.set_ylabel("universe KL to the Bayes search")
        ax.set_title(kernel)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(argv: Sequence[str]) -> dict:
    """Parse, check (before any work), run the missing cells, write the report; the summary."""
    args = build_parser().parse_args(argv)
    settings = resolve(args)  # before any work
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    workers = min(args.workers, len(cells(settings)))
    check_memory(memory_needs(settings, args.workers), f"{workers} cell{'s' * (workers > 1)} at once")
    out = Path(args.out)
    t0 = time.perf_counter()
    records = run_sweep(settings, out, args.workers)
    sweep = settings["sweep"]
    try:
        summary, table = REPORTS[sweep](settings, records)
        image = plot(settings, summary, out / f"{sweep}.png")
        compute = sum(r["seconds"] for r in records)
        summary |= {"settings": settings, "cell_seconds": compute, "wall_seconds": time.perf_counter() - t0}
        table += f"\nCompute: {compute:.0f} s in cells ({len(records)} cells); plot {image.name}.\n"
        (out / f"{sweep}.json").write_text(json.dumps(summary, indent=2))
        (out / f"{sweep}.md").write_text(table)
    except KeyboardInterrupt as err:
        raise Stopped(
            f"{stop_name(err)}: kept all {len(records)} cells in {out / (sweep + '.cells.jsonl')}, the report not "
            "written; run the same command to write it (no cell runs again)"
        ) from err
    print(table + f"\nwrote {out / (settings['sweep'] + '.md')}")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(run, sys.argv[1:] if argv is None else argv)[1]


if __name__ == "__main__":
    raise SystemExit(main())
