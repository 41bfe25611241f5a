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
together as one batched tensor program on one device; each model draws its permutations from its own
``RandomState(seed)`` in SentEval's order and keeps its own optimiser state, step count and early-stopping
state, so each follows the trajectory SentEval's loop gives it (to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

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
) -> Fitted:
    """Train every job's logistic regression as SentEval's ``MLP(nhid=0).fit`` would, all at once.

    Jobs with the same training and validation rows (the penalties of one fold) draw the same permutations —
    same seed, same draws — so they are trained as one group: each mini-batch is gathered once for the group
    and multiplied by all its members' weights together. The bias is folded into the weights (a column of
    ones appended to the features: ``[x, 1] · [W; b]``), so each step is one gather, two batched products and
    one optimiser update over all live groups. A model that has stopped keeps training with its group (its
    best weights are already kept, and nothing reads it again); a group whose models have all stopped is
    dropped at the end of the epoch.

    Args:
        x: (N, D) float32 features on the device to train on.
        y: (N,) int64 labels on the same device.
        jobs: the fits to run; their rows index ``x``.
        num_classes: C.
        config: SentEval's classifier settings.
        progress: called after every epoch with (passes so far, models still training).

    Returns:
        :class:`Fitted` with the best (by validation accuracy) weights of each job.
    """
    device, dim, c, bs = x.device, x.shape[1], num_classes, config.batch_size
    xa = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=device)], dim=1)  # (N, D + 1)
    groups = _groups(jobs, config.seed)
    g_count, k_max = groups.slot.shape
    exists = groups.slot >= 0

    w0, b0 = initial_linear(dim, c, config.seed)
    wb0 = torch.cat([w0, b0[None]]).T.to(device)  # (C, D + 1): one row per class, bias last
    # every model's parameters as one (K·C, D + 1) block per group: member k owns rows k·C … k·C + C − 1
    params = wb0.repeat(g_count, k_max, 1)  # (G, K·C, D + 1)
    l2 = np.zeros((g_count, k_max))
    l2[exists] = [jobs[m].l2 for m in groups.slot[exists]]
    decay = torch.as_tensor(np.repeat(l2, c, axis=1), dtype=x.dtype, device=device)[:, :, None]  # (G, K·C, 1)
    opt = _Optimiser(config.optim, params)
    best = params.clone()
    best_acc = np.full((g_count, k_max), -1.0)
    strikes = np.zeros((g_count, k_max), dtype=np.int64)
    active = exists.copy()
    live = np.arange(g_count)  # the groups still training; params, decay and opt hold exactly these rows
    dev_idx, dev_mask = _padded_rows(groups.dev_rows, device)
    epoch = 0
    while active.any() and epoch <= config.max_epoch:
        for _ in range(config.epoch_size):
            # each live group draws its pass's permutation (as SentEval's trainepoch), padded to one matrix
            lengths = np.array([len(groups.train_rows[g]) for g in live])
            order = np.zeros((len(live), int(lengths.max())), dtype=np.int64)
            for i, g in enumerate(live):
                order[i, : lengths[i]] = groups.train_rows[g][groups.rngs[g].permutation(lengths[i])]
            order_t = torch.as_tensor(order, device=device)
            for start in range(0, order.shape[1], bs):
                counts = np.clip(lengths - start, 0, bs)  # rows of this mini-batch in each group (0: its pass ended)
                rows = order_t[:, start : start + bs]
                if counts.min() == rows.shape[1]:  # every group has a full batch of the same size: in place
                    _step(xa, y, c, rows, None, params, decay, opt, None)
                else:
                    sub = np.flatnonzero(counts > 0)
                    weights = torch.as_tensor(counts[sub], dtype=x.dtype, device=device)
                    valid = torch.arange(rows.shape[1], device=device)[None, :] < weights[:, None]
                    _step(xa, y, c, rows[sub], valid / weights[:, None], params, decay, opt, sub)
        epoch += config.epoch_size
        acc = _accuracies(xa, y, params, dev_idx[live], dev_mask[live], c)  # (G_live, K)
        improved = active[live] & (acc > best_acc[live])
        keep = torch.as_tensor(np.repeat(improved, c, axis=1), device=device)[:, :, None]
        live_t = torch.as_tensor(live, device=device)
        best[live_t] = torch.where(keep, params, best[live_t])
        best_acc[live] = np.where(improved, acc, best_acc[live])
        # SentEval's early stop: the counter is checked, then incremented, and never reset
        worse = active[live] & ~improved
        active[live] &= ~(worse & (strikes[live] >= config.tenacity))
        strikes[live] += worse
        still = active[live].any(axis=1)
        if not still.all():  # drop the finished groups' rows from the training state
            live, params, decay = live[still], params[still], decay[still]
            opt.select(torch.as_tensor(np.flatnonzero(still), device=device))
        if progress is not None:
            progress(epoch, int(active.sum()))
    where = [tuple(np.argwhere(groups.slot == m)[0]) for m in range(len(jobs))]
    picked = torch.stack([best[g, k * c : (k + 1) * c] for g, k in where])  # (M, C, D + 1)
    return Fitted(
        picked[:, :, :dim].transpose(1, 2).contiguous(),
        picked[:, :, dim].contiguous(),
        np.array([best_acc[g, k] for g, k in where]),
    )


@dataclass
class _Groups:
    """Jobs that share training and validation rows (one fold's penalties), laid out as (G, K) slots."""

    slot: np.ndarray  # (G, K) job index of each member, −1 for an empty slot
    train_rows: list[np.ndarray]  # per group
    dev_rows: list[np.ndarray]  # per group
    rngs: list[np.random.RandomState]  # per group: the permutations of its members (all draw the same)


def _groups(jobs: Sequence[Job], seed: int) -> _Groups:
    rngs = [np.random.RandomState(seed) for _ in jobs]  # each model's np.random.seed(seed)
    split: list[tuple[np.ndarray, np.ndarray]] = []
    for job, rng in zip(jobs, rngs, strict=True):
        if job.dev is None:  # validation_split: the seeded permutation's first int(0.05 n) rows
            perm = rng.permutation(len(job.train))
            n_dev = int(VALIDATION_SPLIT * len(job.train))
            split.append((job.train[perm[n_dev:]], job.train[perm[:n_dev]]))
        else:
            split.append((job.train, job.dev))
        if len(split[-1][0]) == 0 or len(split[-1][1]) == 0:
            raise ValueError(
                f"a classifier needs training and validation rows; got {len(split[-1][0])} and {len(split[-1][1])} "
                f"(from {len(job.train)} training rows)"
            )
    by_rows: dict[tuple[bytes, bytes], list[int]] = {}
    for m, (tr, dv) in enumerate(split):
        by_rows.setdefault((np.asarray(tr).tobytes(), np.asarray(dv).tobytes()), []).append(m)
    members = list(by_rows.values())
    slot = np.full((len(members), max(len(g) for g in members)), -1)
    for g, ms in enumerate(members):
        slot[g, : len(ms)] = ms
    return _Groups(
        slot,
        [split[ms[0]][0] for ms in members],
        [split[ms[0]][1] for ms in members],
        [rngs[ms[0]] for ms in members],  # the members' generators are in the same state
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
    pred = _relative_logits(xa, idx, params, c)[1].argmax(dim=2)  # (G, K, L)
    correct = ((pred == y[idx][:, None, :]) & mask[:, None, :]).sum(dim=2).double()
    return (correct / mask.sum(dim=1)[:, None].clamp_min(1).double()).cpu().numpy()


def _relative_logits(
    xa: torch.Tensor, rows: torch.Tensor, params: torch.Tensor, classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows ``xa[rows]`` (G, L, D + 1) and every member's logits relative to its last class, (G, K, C, L).

    Softmax and arg-max do not change when every logit of a row is shifted alike, so only the C − 1 products
    with ``w_c − w_C`` are computed (the last class's relative logit is 0): half the work for 2 classes. The
    layout lets both batched products read the rows in place (``params @ rowsᵀ`` here, ``delta @ rows`` for
    the gradient): on a CPU that is about 3× faster than ``rows @ paramsᵀ``."""
    g, length = rows.shape
    xb = xa.index_select(0, rows.reshape(-1)).view(g, length, xa.shape[1])
    w = params.view(g, -1, classes, xa.shape[1])
    relative = (w[:, :, :-1] - w[:, :, -1:]).reshape(g, -1, xa.shape[1])  # (G, K·(C − 1), D + 1)
    z = torch.bmm(relative, xb.transpose(1, 2)).view(g, -1, classes - 1, length)
    return xb, torch.cat([z, z.new_zeros(g, z.shape[1], 1, length)], dim=2)


@torch.no_grad()
def _step(xa, y, classes: int, rows, row_weight, params, decay, opt: _Optimiser, sub: np.ndarray | None) -> None:
    """One optimiser step of the groups ``sub`` (all when ``None``, then in place) on their mini-batches.

    ``rows`` (G', L) index ``xa``; ``row_weight`` (G', L) is 1/n for a group's n real rows and 0 for
    padding, or ``None`` when every row is real (1/L). Mean cross-entropy: d loss / d logits =
    (softmax − one-hot) · weight, whose C entries sum to 0 — so the gradient of the last class's row is
    minus the sum of the others' (C − 1 products instead of C); L2 as coupled weight decay
    (``grad + l2 · param``, bias included, as torch.optim's ``weight_decay``); then each model's torch.optim
    update.
    """
    index = None if sub is None else torch.as_tensor(sub, device=params.device)
    p = params if index is None else params[index]
    g, length = rows.shape
    xb, logits = _relative_logits(xa, rows, p, classes)
    delta = logits.softmax(dim=2)[:, :, :-1]  # (G', K, C − 1, L)
    labels = torch.arange(classes - 1, device=xa.device)[None, :, None] == y[rows][:, None, :]  # (G', C − 1, L)
    delta -= labels[:, None].to(delta.dtype)
    if row_weight is None:
        delta /= length
    else:
        delta *= row_weight[:, None, None, :]
    part = torch.bmm(delta.reshape(g, -1, length), xb).view(g, -1, classes - 1, xb.shape[2])
    grad = torch.cat([part, -part.sum(dim=2, keepdim=True)], dim=2).view_as(p)  # (G', K·C, D + 1)
    grad.addcmul_(p, decay if index is None else decay[index])
    opt.update(p, grad, index)
    if index is not None:
        params[index] = p


class _Optimiser:
    """torch.optim's Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8) or RMSprop (lr 1e-2, alpha 0.99, eps 1e-8),
    written out for (G, …) parameter blocks with per-group step counts."""

    def __init__(self, optim: str, params: torch.Tensor) -> None:
        if optim not in ("adam", "rmsprop"):
            raise ValueError(f"optim must be adam or rmsprop, got {optim!r}")
        self.optim = optim
        self.exp_avg = torch.zeros_like(params) if optim == "adam" else None
        self.exp_avg_sq = torch.zeros_like(params)
        self.steps = np.zeros(len(params), dtype=np.int64)

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the rows ``keep`` (groups still training)."""
        self.steps = self.steps[keep.cpu().numpy()]
        self.exp_avg_sq = self.exp_avg_sq[keep]
        if self.exp_avg is not None:
            self.exp_avg = self.exp_avg[keep]

    def update(self, p: torch.Tensor, grad: torch.Tensor, index: torch.Tensor | None) -> None:
        """Update ``p`` (the rows ``index`` of the parameters, or all) in place with ``grad``."""
        sel = slice(None) if index is None else index.cpu().numpy()
        self.steps[sel] += 1
        v = self.exp_avg_sq if index is None else self.exp_avg_sq[index]
        if self.optim == "rmsprop":
            v.mul_(0.99).addcmul_(grad, grad, value=0.01)
            p.addcdiv_(grad, v.sqrt().add_(1e-8), value=-1e-2)
        else:
            m = self.exp_avg if index is None else self.exp_avg[index]
            m.lerp_(grad, 0.1)
            v.mul_(0.999).addcmul_(grad, grad, value=0.001)
            steps = self.steps[sel]
            if (steps == steps[0]).all():  # torch's arithmetic: Python-float bias corrections
                step_size = 1e-3 / (1 - 0.9 ** int(steps[0]))
                denom = (v.sqrt() / (1 - 0.999 ** int(steps[0])) ** 0.5).add_(1e-8)
                p.addcdiv_(m, denom, value=-step_size)
            else:  # groups at different step counts (ragged passes): per-group corrections
                shape = (-1,) + (1,) * (p.dim() - 1)
                step_size = torch.as_tensor(1e-3 / (1 - 0.9**steps), dtype=p.dtype, device=p.device).view(shape)
                bc2 = torch.as_tensor((1 - 0.999**steps) ** 0.5, dtype=p.dtype, device=p.device).view(shape)
                p.sub_(step_size * m / (v.sqrt() / bc2).add_(1e-8))
            if index is not None:
                self.exp_avg[index] = m
        if index is not None:
            self.exp_avg_sq[index] = v
