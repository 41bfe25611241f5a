"""SentEval's PyTorch logistic-regression classifier, as the SimCSE authors configure it, trained in batches.

SentEval scores transfer tasks with ``MLP(nhid=0)`` (``senteval/tools/classifier.py``): one linear layer,
mean cross-entropy, L2 penalty ``l2reg`` as the optimiser's (coupled) weight decay on weight and bias, and:

* construction seeds NumPy and torch with ``seed`` (1111): the initial weights are ``nn.Linear``'s default
  initialisation under that seed, the same for every model of a given shape;
* ``fit`` holds out a validation set — the given ``validation_data``, or the first ``int(0.05·n)`` rows of a
  seeded permutation (``validation_split = 0.05``); then, repeatedly, ``epoch_size`` passes over the training
  rows in a fresh permutation each, mini-batches of ``batch_size``, one optimiser step per batch; after each
  such "epoch" the validation accuracy is measured: a new best keeps a copy of the model, otherwise a
  non-improvement counter (never reset) stops training once it reaches ``tenacity``; at most
  ``max_epoch`` (200) passes; the best model is kept and its validation accuracy returned;
* test mode: Adam (lr 1e-3), batch 64, tenacity 5, epoch size 4; fast mode: RMSprop (lr 0.01), batch 128,
  tenacity 3, epoch size 2 (``{nhid: 0, optim: ..., batch_size: ..., tenacity: ..., epoch_size: ...}``).

Here all the models a protocol needs (folds × penalties × inner folds: 410 for a 10-fold task) train
together as one batched tensor program on one device; each model gets the permutations its own
``RandomState(seed)`` would draw in SentEval's order (one generator serves all models whose draws are the same)
and keeps its own optimiser state, step count and early-stopping state, so each follows the trajectory
SentEval's loop gives it (to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch

from simcse_weince.evaluation.logreg_steps import Optimiser, StaticPasses, eager_step, relative_logits

Engine = Literal["auto", "eager", "static", "graph"]
ENGINES: tuple[str, ...] = get_args(Engine)

L2_GRID: tuple[float, ...] = tuple(10.0**t for t in range(-5, -1))  # SentEval's PyTorch grid: 1e-5 … 1e-2
VALIDATION_SPLIT = 0.05


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's classifier settings (the SimCSE authors' values for test and fast mode below)."""

    optim: Literal["adam", "rmsprop"] = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    seed: int = 1111


TEST_CONFIG = ClassifierConfig("adam", 64, 5, 4)
FAST_CONFIG = ClassifierConfig("rmsprop", 128, 3, 2)


@dataclass
class Job:
    """One ``MLP(nhid=0).fit`` call: rows of the feature matrix to train on (in SentEval's order), the
    validation rows (``None``: SentEval's seeded 5 % split of the training rows) and the L2 penalty."""

    train: np.ndarray
    dev: np.ndarray | None
    l2: float


@dataclass
class Fitted:
    """The best models (``weight`` (M, D, C), ``bias`` (M, C)) and their validation accuracies (M,)."""

    weight: torch.Tensor
    bias: torch.Tensor
    dev_accuracy: np.ndarray

    def accuracy(self, m: int, x: torch.Tensor, y: torch.Tensor) -> float:
        """Accuracy of model ``m`` on ``(x, y)`` (predictions: first arg-max, as ``output.max(1)[1]``)."""
        return float((self.predict(m, x) == y).float().mean())

    def predict(self, m: int, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight[m] + self.bias[m]).argmax(dim=1)


def initial_linear(dim: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.Linear(dim, classes)``'s weights right after ``torch.manual_seed(seed)``, as (D, C) and (C,); the
    caller's torch RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = torch.nn.Linear(dim, classes)
    return layer.weight.detach().T.contiguous(), layer.bias.detach().clone()


def fit_logregs(
    x: torch.Tensor,
    y: torch.Tensor,
    jobs: Sequence[Job],
    num_classes: int,
    config: ClassifierConfig,
    progress: Callable[[int, int], None] | None = None,
    engine: Engine = "auto",
) -> Fitted:
    """Train every job's logistic regression as SentEval's ``MLP(nhid=0).fit`` would, all at once.

    Jobs with the same training and validation rows (the penalties of one fold) draw the same permutations —
    same seed, same draws — so they are trained as one group: each mini-batch is gathered once for the group
    and multiplied by all its members' weights together. The bias is folded into the weights (a column of
    ones appended to the features: ``[x, 1] · [W; b]``), so each step is one gather, two batched products and
    one optimiser update over all live groups. A model that has stopped keeps training with its group (its
    best weights are already kept, and nothing reads it again); with the ``"eager"`` engine a group whose
    models have all stopped is dropped at the end of the epoch.

    Engines (:mod:`~simcse_weince.evaluation.logreg_steps`), the same arithmetic: ``"eager"`` (shapes follow
    the data, finished groups dropped: fewest operations, the CPU's default), ``"static"`` (every step one
    fixed shape, masks for short batches, no group dropped) and ``"graph"`` (``"static"`` with its step
    replayed as a CUDA graph: a GPU's default, where ~30 kernel launches a step cost more than their arithmetic).

    Steps: (0) the engine (:func:`_engine`); (1) the initial state (:func:`_initial_state`); then, until every
    model has stopped or ``max_epoch`` passes are done, epochs of ``epoch_size`` passes, each (2a) drawing the
    groups' permutations (:func:`_draw_pass`) and (2b) stepping through them (:func:`_eager_pass`, or the static
    engines' ``run_pass``), after which (3a) the best models are kept (:func:`_keep_best`), (3b) SentEval's early
    stop counts (:func:`_stop_early`) and (3c) finished groups leave the eager engine (:func:`_drop_finished`);
    finally (4) each job's best model (:func:`_best_models`).

    Args:
        x: (N, D) float32 features on the device to train on.
        y: (N,) int64 labels on the same device.
        jobs: the fits to run; their rows index ``x``.
        num_classes: C.
        config: SentEval's classifier settings.
        progress: called after every epoch with (passes so far, models still training).
        engine: ``"auto"`` (``"graph"`` on a CUDA device, else ``"eager"``), ``"eager"``, ``"static"`` or
            ``"graph"`` (CUDA only).

    Returns:
        :class:`Fitted` with the best (by validation accuracy) weights of each job.
    """
    engine = _engine(engine, x.device)
    dim, c = x.shape[1], num_classes
    xa = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], dim=1)  # (N, D + 1)
    groups = _groups(jobs, config.seed)
    state = _initial_state(xa, y, jobs, groups, c, config, engine)
    dev_idx, dev_mask = _padded_rows(groups.dev_rows, x.device)
    epoch = 0
    while state.active.any() and epoch <= config.max_epoch:
        for _ in range(config.epoch_size):
            order, lengths = _draw_pass(groups, state.live)
            if engine == "eager":
                _eager_pass(xa, y, c, config.batch_size, order, lengths, state)
            else:
                state.passes.run_pass(order, lengths)
        epoch += config.epoch_size
        improved = _keep_best(xa, y, c, dev_idx, dev_mask, state)
        _stop_early(improved, config.tenacity, state)
        if engine == "eager":
            _drop_finished(state)
        if progress is not None:
            progress(epoch, int(state.active.sum()))
    return _best_models(state, groups.slot, len(jobs), dim, c)


def _engine(engine: Engine, device: torch.device) -> str:
    """Step (0): the engine that runs on ``device`` (``"auto"``: ``"graph"`` on CUDA, else ``"eager"``).

    Raises:
        ValueError: an unknown engine, or ``"graph"`` off CUDA.
    """
    if engine == "auto":
        engine = "graph" if device.type == "cuda" else "eager"
    if engine not in ENGINES or (engine == "graph" and device.type != "cuda"):
        raise ValueError(f"engine must be one of {ENGINES} ('graph' on a CUDA device), got {engine!r} on {device}")
    return engine


@dataclass
class _Training:
    """What changes while the models of :func:`fit_logregs` train; ``G`` groups of ``K`` slots, ``C`` classes.

    ``params``, ``decay`` and the eager optimiser hold the rows of the ``live`` groups only (the eager engine
    drops a group once all its models have stopped); the rest is indexed by every group."""

    params: torch.Tensor  # (G_live, K·C, D + 1): member k's [W; b]ᵀ in rows k·C … k·C + C − 1
    decay: torch.Tensor  # (G_live, K·C, 1): each row's L2 penalty
    opt: Optimiser | None  # the eager engine's optimiser state
    passes: StaticPasses | None  # the static and graph engines' whole-pass stepping
    best: torch.Tensor  # (G, K·C, D + 1): each model's best parameters so far
    best_acc: np.ndarray  # (G, K): their validation accuracy (−1 before the first epoch)
    strikes: np.ndarray  # (G, K): SentEval's non-improvement counter
    active: np.ndarray  # (G, K): still training (an existing slot not yet early-stopped)
    live: np.ndarray  # indices of the groups still in ``params``


def _initial_state(
    xa: torch.Tensor,
    y: torch.Tensor,
    jobs: Sequence[Job],
    groups: _Groups,
    c: int,
    config: ClassifierConfig,
    engine: str,
) -> _Training:
    """Step (1): every model starts from ``nn.Linear(D, C)``'s initialisation under ``seed`` (SentEval seeds each
    MLP alike), laid out as one (K·C, D + 1) block per group with the bias as the last column (``[x, 1] · [W; b]``),
    each row decayed by its model's L2 penalty; nothing is best yet (accuracy −1), every existing slot active."""
    device, dim = xa.device, xa.shape[1] - 1
    g_count, k_max = groups.slot.shape
    exists = groups.slot >= 0
    w0, b0 = initial_linear(dim, c, config.seed)
    wb0 = torch.cat([w0, b0[None]]).T.to(device)  # (C, D + 1): one row per class, bias last
    params = wb0.repeat(g_count, k_max, 1)  # (G, K·C, D + 1)
    l2 = np.zeros((g_count, k_max))
    l2[exists] = [jobs[m].l2 for m in groups.slot[exists]]
    decay = torch.as_tensor(np.repeat(l2, c, axis=1), dtype=xa.dtype, device=device)[:, :, None]  # (G, K·C, 1)
    opt, passes = None, None
    if engine == "eager":
        opt = Optimiser(config.optim, params)
    else:
        longest = max(len(rows) for rows in groups.train_rows)
        passes = StaticPasses(xa, y, c, config.batch_size, longest, params, decay, config.optim, engine == "graph")
    return _Training(
        params,
        decay,
        opt,
        passes,
        best=params.clone(),
        best_acc=np.full((g_count, k_max), -1.0),
        strikes=np.zeros((g_count, k_max), dtype=np.int64),
        active=exists.copy(),
        live=np.arange(g_count),
    )


def _draw_pass(groups: _Groups, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step (2a): each live group's training rows in the permutation of this pass (as SentEval's ``trainepoch``
    draws it), padded to one (G_live, max rows) matrix, and each group's row count.

    A generator shared by groups is drawn once: every group it serves is live since the first pass and has drawn
    once a pass, as the shared generator has (while any of them was live)."""
    lengths = np.array([len(groups.train_rows[g]) for g in live])
    order = np.zeros((len(live), int(lengths.max())), dtype=np.int64)
    drawn: dict[int, np.ndarray] = {}
    for i, g in enumerate(live):
        rng = groups.rngs[g]
        if id(rng) not in drawn:
            drawn[id(rng)] = rng.permutation(lengths[i])
        order[i, : lengths[i]] = groups.train_rows[g][drawn[id(rng)]]
    return order, lengths


def _eager_pass(
    xa: torch.Tensor, y: torch.Tensor, c: int, bs: int, order: np.ndarray, lengths: np.ndarray, state: _Training
) -> None:
    """Step (2b), eager engine: one optimiser step per mini-batch of ``bs`` permuted rows, every live group at
    once. While every group has a full batch the step runs in place; a group's last, shorter batch averages its
    loss over its own rows (``row_weight`` 1 / rows), and a group whose pass has ended sits the step out."""
    device = xa.device
    order_t = torch.as_tensor(order, device=device)
    for start in range(0, order.shape[1], bs):
        counts = np.clip(lengths - start, 0, bs)  # rows of this mini-batch in each group (0: its pass ended)
        rows = order_t[:, start : start + bs]
        if counts.min() == rows.shape[1]:  # every group has a full batch of the same size: in place
            eager_step(xa, y, c, rows, None, state.params, state.decay, state.opt, None)
        else:
            sub = np.flatnonzero(counts > 0)
            weights = torch.as_tensor(counts[sub], dtype=xa.dtype, device=device)
            valid = torch.arange(rows.shape[1], device=device)[None, :] < weights[:, None]
            eager_step(xa, y, c, rows[sub], valid / weights[:, None], state.params, state.decay, state.opt, sub)


def _keep_best(
    xa: torch.Tensor, y: torch.Tensor, c: int, dev_idx: torch.Tensor, dev_mask: torch.Tensor, state: _Training
) -> np.ndarray:
    """Step (3a), after each epoch: every live model's validation accuracy; an active model that beats its best
    (strictly, as SentEval's ``devacc > bestaccuracy``) keeps a copy of its parameters. Returns (G_live, K)
    "improved"."""
    live = state.live
    acc = _accuracies(xa, y, state.params, dev_idx[live], dev_mask[live], c)  # (G_live, K)
    improved = state.active[live] & (acc > state.best_acc[live])
    keep = torch.as_tensor(np.repeat(improved, c, axis=1), device=xa.device)[:, :, None]
    live_t = torch.as_tensor(live, device=xa.device)
    state.best[live_t] = torch.where(keep, state.params, state.best[live_t])
    state.best_acc[live] = np.where(improved, acc, state.best_acc[live])
    return improved


def _stop_early(improved: np.ndarray, tenacity: int, state: _Training) -> None:
    """Step (3b), SentEval's early stop: an active model that did not improve stops if its counter has already
    reached ``tenacity``, else the counter grows; the counter is checked, then incremented, and never reset."""
    live = state.live
    worse = state.active[live] & ~improved
    state.active[live] &= ~(worse & (state.strikes[live] >= tenacity))
    state.strikes[live] += worse


def _drop_finished(state: _Training) -> None:
    """Step (3c), eager engine: the groups whose models have all stopped leave the training state (their best
    weights are kept; nothing reads their current ones again)."""
    still = state.active[state.live].any(axis=1)
    if not still.all():
        state.live, state.params, state.decay = state.live[still], state.params[still], state.decay[still]
        state.opt.select(torch.as_tensor(np.flatnonzero(still), device=state.params.device))


def _best_models(state: _Training, slot: np.ndarray, count: int, dim: int, c: int) -> Fitted:
    """Step (4): each job's best parameters, unfolded from its slot's rows (``W`` (D, C) and ``b`` (C,)), and their
    validation accuracies, in job order."""
    where = [tuple(np.argwhere(slot == m)[0]) for m in range(count)]
    picked = torch.stack([state.best[g, k * c : (k + 1) * c] for g, k in where])  # (M, C, D + 1)
    return Fitted(
        picked[:, :, :dim].transpose(1, 2).contiguous(),
        picked[:, :, dim].contiguous(),
        np.array([state.best_acc[g, k] for g, k in where]),
    )


@dataclass
class _Groups:
    """Jobs that share training and validation rows (one fold's penalties), laid out as (G, K) slots."""

    slot: np.ndarray  # (G, K) job index of each member, −1 for an empty slot
    train_rows: list[np.ndarray]  # per group
    dev_rows: list[np.ndarray]  # per group
    # per group: the generator of its members' permutations (all draw the same). Groups whose generators have
    # the same history — the same validation-split draw (or none) and the same training size — draw the same
    # permutations every pass, so they share one generator, drawn once a pass (see fit_logregs)
    rngs: list[np.random.RandomState]


def _groups(jobs: Sequence[Job], seed: int) -> _Groups:
    split: list[tuple[np.ndarray, np.ndarray]] = []
    history: list[tuple[int | None, int]] = []  # (size of the validation-split draw or None, training rows)
    for job in jobs:
        if job.dev is None:  # validation_split: the seeded permutation's first int(0.05 n) rows
            perm = np.random.RandomState(seed).permutation(len(job.train))  # each model's np.random.seed(seed)
            n_dev = int(VALIDATION_SPLIT * len(job.train))
            split.append((job.train[perm[n_dev:]], job.train[perm[:n_dev]]))
        else:
            split.append((job.train, job.dev))
        if len(split[-1][0]) == 0 or len(split[-1][1]) == 0:
            raise ValueError(
                f"a classifier needs training and validation rows; got {len(split[-1][0])} and {len(split[-1][1])} "
                f"(from {len(job.train)} training rows)"
            )
        history.append((len(job.train) if job.dev is None else None, len(split[-1][0])))
    by_rows: dict[tuple, list[int]] = {}  # members of a group share rows and generator history, so permutations
    for m, (tr, dv) in enumerate(split):
        by_rows.setdefault((history[m], np.asarray(tr).tobytes(), np.asarray(dv).tobytes()), []).append(m)
    members = list(by_rows.values())
    slot = np.full((len(members), max(len(g) for g in members)), -1)
    for g, ms in enumerate(members):
        slot[g, : len(ms)] = ms
    shared: dict[tuple[int | None, int], np.random.RandomState] = {}
    for ms in members:
        drawn, _ = key = history[ms[0]]
        if key not in shared:
            shared[key] = np.random.RandomState(seed)
            if drawn is not None:
                shared[key].permutation(drawn)  # the validation split's draw, replayed
    return _Groups(
        slot,
        [split[ms[0]][0] for ms in members],
        [split[ms[0]][1] for ms in members],
        [shared[history[ms[0]]] for ms in members],
    )


def _padded_rows(rows: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, L) row indices of ragged row sets, padded with row 0, and their (M, L) validity."""
    length = max(1, max(len(r) for r in rows))
    idx = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros((len(rows), length), dtype=bool)
    for i, r in enumerate(rows):
        idx[i, : len(r)] = r
        mask[i, : len(r)] = True
    return torch.as_tensor(idx, device=device), torch.as_tensor(mask, device=device)


@torch.no_grad()
def _accuracies(xa, y, params, idx, mask, c: int) -> np.ndarray:
    """(G, K) validation accuracies: each group's K models on its own (padded) rows."""
    pred = relative_logits(xa, idx, params, c)[1].argmax(dim=2)  # (G, K, L)
    correct = ((pred == y[idx][:, None, :]) & mask[:, None, :]).sum(dim=2).double()
    return (correct / mask.sum(dim=1)[:, None].clamp_min(1).double()).cpu().numpy()
