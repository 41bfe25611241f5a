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
import torch.nn.functional as F

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
    and multiplied by all its members' weights together.

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
    rngs = [np.random.RandomState(config.seed) for _ in jobs]  # each model's np.random.seed(seed)
    split: list[tuple[np.ndarray, np.ndarray]] = []
    for job, rng in zip(jobs, rngs, strict=True):
        if job.dev is None:  # validation_split: the seeded permutation's first int(0.05 n) rows
            perm = rng.permutation(len(job.train))
            n_dev = int(VALIDATION_SPLIT * len(job.train))
            split.append((job.train[perm[n_dev:]], job.train[perm[:n_dev]]))
        else:
            split.append((job.train, job.dev))
    groups: dict[tuple[bytes, bytes], list[int]] = {}
    for m, (tr, dv) in enumerate(split):
        groups.setdefault((np.asarray(tr).tobytes(), np.asarray(dv).tobytes()), []).append(m)
    members = list(groups.values())
    g_count, k_max = len(members), max(len(g) for g in members)
    slot = np.full((g_count, k_max), -1)
    for g, ms in enumerate(members):
        slot[g, : len(ms)] = ms
    exists = slot >= 0
    group_rng = [rngs[ms[0]] for ms in members]  # the members' generators are in the same state
    train_rows = [split[ms[0]][0] for ms in members]

    w0, b0 = initial_linear(dim, c, config.seed)
    weight = w0.to(device).repeat(g_count, k_max, 1, 1)  # (G, K, D, C)
    bias = b0.to(device).repeat(g_count, k_max, 1)  # (G, K, C)
    l2 = np.zeros((g_count, k_max))
    l2[exists] = [jobs[m].l2 for m in slot[exists]]
    l2_t = torch.as_tensor(l2, dtype=torch.float32, device=device)
    state = _OptimiserState(config.optim, weight, bias)
    best_w, best_b = weight.clone(), bias.clone()
    best_acc = np.full((g_count, k_max), -1.0)
    strikes = np.zeros((g_count, k_max), dtype=np.int64)
    active = exists.copy()
    epoch = 0
    dev_x, dev_y, dev_mask = _padded(x, y, [split[ms[0]][1] for ms in members])
    while active.any() and epoch <= config.max_epoch:
        live = np.flatnonzero(active.any(axis=1))
        live_t = torch.as_tensor(live, device=device)
        update = torch.as_tensor(active[live], device=device)  # (G_live, K): members that train this epoch
        for _ in range(config.epoch_size):
            # every live group draws its pass's permutation (as SentEval's trainepoch), padded to one matrix
            lengths = np.array([len(train_rows[g]) for g in live])
            order = np.zeros((len(live), int(lengths.max())), dtype=np.int64)
            for i, g in enumerate(live):
                order[i, : lengths[i]] = train_rows[g][group_rng[g].permutation(lengths[i])]
            order_t = torch.as_tensor(order, device=device)
            lengths_t = torch.as_tensor(lengths, device=device)
            for start in range(0, int(lengths.max()), bs):
                take = lengths_t > start  # groups that still have a batch in this pass
                cols = torch.arange(start, min(start + bs, order.shape[1]), device=device)
                valid = cols[None, :] < lengths_t[take, None]  # (B, L)
                _step(x, y, order_t[take][:, cols], valid, live_t[take], update[take], weight, bias, l2_t, state)
        epoch += config.epoch_size
        acc = _accuracies(weight, bias, dev_x, dev_y, dev_mask)  # (G, K)
        improved = active & (acc > best_acc)
        best_acc[improved] = acc[improved]
        keep = torch.as_tensor(improved, device=device)
        best_w = torch.where(keep[:, :, None, None], weight, best_w)
        best_b = torch.where(keep[:, :, None], bias, best_b)
        # SentEval's early stop: the counter is checked, then incremented, and never reset
        worse = active & ~improved
        active[worse & (strikes >= config.tenacity)] = False
        strikes[worse] += 1
        if progress is not None:
            progress(epoch, int(active.sum()))
    order_back = [tuple(np.argwhere(slot == m)[0]) for m in range(len(jobs))]
    return Fitted(
        torch.stack([best_w[g, k] for g, k in order_back]),
        torch.stack([best_b[g, k] for g, k in order_back]),
        np.array([best_acc[g, k] for g, k in order_back]),
    )


def _padded(x: torch.Tensor, y: torch.Tensor, rows: Sequence[np.ndarray]):
    """(M, L, D) features, (M, L) labels and (M, L) validity of ragged row sets, padded with row 0."""
    length = max(1, max(len(r) for r in rows))
    idx = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros((len(rows), length), dtype=bool)
    for i, r in enumerate(rows):
        idx[i, : len(r)] = r
        mask[i, : len(r)] = True
    idx_t = torch.as_tensor(idx, device=x.device)
    return x[idx_t], y[idx_t], torch.as_tensor(mask, device=x.device)


def _group_logits(xb: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """(G, L, D) rows × (G, K, D, C) weights of the group's K members -> (G, L, K, C) logits."""
    g, k, d, c = weight.shape
    flat = weight.permute(0, 2, 1, 3).reshape(g, d, k * c)  # (G, D, K·C): all members in one product
    return torch.baddbmm(bias.reshape(g, 1, k * c), xb, flat).view(g, -1, k, c)


@torch.no_grad()
def _accuracies(weight, bias, xs, ys, mask) -> np.ndarray:
    pred = _group_logits(xs, weight, bias).argmax(dim=3)  # (G, L, K)
    correct = ((pred == ys[:, :, None]) & mask[:, :, None]).sum(dim=1).double()  # (G, K)
    return (correct / mask.sum(dim=1, keepdim=True).clamp_min(1).double()).cpu().numpy()


class _OptimiserState:
    """Per-model Adam or RMSprop state with torch's default hyper-parameters and per-model step counts."""

    def __init__(self, optim: str, weight: torch.Tensor, bias: torch.Tensor) -> None:
        if optim not in ("adam", "rmsprop"):
            raise ValueError(f"optim must be adam or rmsprop, got {optim!r}")
        self.optim = optim
        self.exp_avg = [torch.zeros_like(weight), torch.zeros_like(bias)]
        self.exp_avg_sq = [torch.zeros_like(weight), torch.zeros_like(bias)]
        self.steps = torch.zeros(weight.shape[:2], dtype=torch.float64, device=weight.device)


@torch.no_grad()
def _step(x, y, rows, valid, groups, update, weight, bias, l2, state: _OptimiserState) -> None:
    """One optimiser step of the members ``update`` (B, K) of ``groups`` on their shared mini-batches (``rows``
    (B, L) indices into ``x``, ``valid`` (B, L) which are real): mean cross-entropy, L2 as weight decay, each
    model's own torch.optim update written out."""
    xb, yb = x[rows], y[rows]  # (B, L, D), (B, L)
    w, b = weight[groups], bias[groups]  # (B, K, D, C), (B, K, C)
    k, c = w.shape[1], w.shape[3]
    # d(mean CE)/d logits = (softmax − one-hot) / n over the valid rows
    delta = _group_logits(xb, w, b).softmax(dim=3)  # (B, L, K, C)
    delta -= F.one_hot(yb, c).to(delta.dtype)[:, :, None, :]
    delta *= (valid / valid.sum(dim=1, keepdim=True))[:, :, None, None]
    grad_w = torch.bmm(xb.transpose(1, 2), delta.flatten(2)).view(w.shape[0], -1, k, c).permute(0, 2, 1, 3)
    grad_w = grad_w + l2[groups][:, :, None, None] * w
    grad_b = delta.sum(dim=1) + l2[groups][:, :, None] * b
    state.steps[groups] += update
    step = state.steps[groups]
    for i, (param, old, grad) in enumerate(((weight, w, grad_w), (bias, b, grad_b))):
        mask = update.view(update.shape + (1,) * (grad.dim() - 2))
        shape = step.shape + (1,) * (grad.dim() - 2)
        v_old = state.exp_avg_sq[i][groups]
        if state.optim == "adam":  # torch.optim.Adam: lr 1e-3, betas (0.9, 0.999), eps 1e-8
            m_old = state.exp_avg[i][groups]
            m = m_old.lerp(grad, 0.1)
            v = v_old * 0.999 + 0.001 * grad * grad
            bc1 = (1 - 0.9**step).to(grad.dtype).view(shape)
            bc2 = (1 - 0.999**step).to(grad.dtype).view(shape)
            new = old - (1e-3 / bc1) * m / (v.sqrt() / bc2.sqrt()).add_(1e-8)
            state.exp_avg[i][groups] = torch.where(mask, m, m_old)
        else:  # torch.optim.RMSprop: lr 1e-2, alpha 0.99, eps 1e-8
            v = v_old * 0.99 + 0.01 * grad * grad
            new = old - 1e-2 * grad / (v.sqrt() + 1e-8)
        state.exp_avg_sq[i][groups] = torch.where(mask, v, v_old)
        param[groups] = torch.where(mask, new, old)
