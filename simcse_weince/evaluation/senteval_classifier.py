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
    device, (m_count, dim) = x.device, (len(jobs), x.shape[1])
    bs = config.batch_size
    rngs = [np.random.RandomState(config.seed) for _ in jobs]  # each model's np.random.seed(seed)
    train_rows, dev_rows = [], []
    for job, rng in zip(jobs, rngs, strict=True):
        if job.dev is None:  # validation_split: the seeded permutation's first int(0.05 n) rows
            perm = rng.permutation(len(job.train))
            n_dev = int(VALIDATION_SPLIT * len(job.train))
            train_rows.append(job.train[perm[n_dev:]])
            dev_rows.append(job.train[perm[:n_dev]])
        else:
            train_rows.append(job.train)
            dev_rows.append(job.dev)

    w0, b0 = initial_linear(dim, num_classes, config.seed)
    weight = w0.to(device).repeat(m_count, 1, 1)  # (M, D, C)
    bias = b0.to(device).repeat(m_count, 1)  # (M, C)
    l2 = torch.tensor([job.l2 for job in jobs], dtype=torch.float32, device=device)
    state = _OptimiserState(config.optim, weight, bias)
    best_w, best_b = weight.clone(), bias.clone()
    best_acc = np.full(m_count, -1.0)
    strikes = np.zeros(m_count, dtype=np.int64)
    active = np.ones(m_count, dtype=bool)
    epoch = 0
    dev_x, dev_y, dev_mask = _padded(x, y, dev_rows)
    while active.any() and epoch <= config.max_epoch:
        live = np.flatnonzero(active)
        for _ in range(config.epoch_size):
            # every live model draws its pass's permutation (as SentEval's trainepoch), padded to one matrix
            lengths = np.array([len(train_rows[m]) for m in live])
            order = np.zeros((len(live), int(lengths.max())), dtype=np.int64)
            for i, m in enumerate(live):
                order[i, : lengths[i]] = train_rows[m][rngs[m].permutation(lengths[i])]
            order_t = torch.as_tensor(order, device=device)
            lengths_t = torch.as_tensor(lengths, device=device)
            live_t = torch.as_tensor(live, device=device)
            for start in range(0, int(lengths.max()), bs):
                take = lengths_t > start  # models that still have a batch in this pass
                cols = torch.arange(start, min(start + bs, order.shape[1]), device=device)
                valid = cols[None, :] < lengths_t[take, None]  # (B, L)
                _step(x, y, order_t[take][:, cols], valid, live_t[take], weight, bias, l2, state)
        epoch += config.epoch_size
        acc = _accuracies(weight, bias, dev_x, dev_y, dev_mask)
        for m in live:
            if acc[m] > best_acc[m]:
                best_acc[m] = acc[m]
                best_w[m], best_b[m] = weight[m], bias[m]
            else:  # SentEval's early stop: the counter is checked, then incremented, and never reset
                if strikes[m] >= config.tenacity:
                    active[m] = False
                strikes[m] += 1
        if progress is not None:
            progress(epoch, int(active.sum()))
    return Fitted(best_w, best_b, best_acc)


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


@torch.no_grad()
def _accuracies(weight, bias, xs, ys, mask) -> np.ndarray:
    pred = (torch.bmm(xs, weight) + bias[:, None, :]).argmax(dim=2)
    correct = ((pred == ys) & mask).sum(dim=1).double()
    return (correct / mask.sum(dim=1).clamp_min(1).double()).cpu().numpy()


class _OptimiserState:
    """Per-model Adam or RMSprop state with torch's default hyper-parameters and per-model step counts."""

    def __init__(self, optim: str, weight: torch.Tensor, bias: torch.Tensor) -> None:
        if optim not in ("adam", "rmsprop"):
            raise ValueError(f"optim must be adam or rmsprop, got {optim!r}")
        self.optim = optim
        self.exp_avg = [torch.zeros_like(weight), torch.zeros_like(bias)]
        self.exp_avg_sq = [torch.zeros_like(weight), torch.zeros_like(bias)]
        self.steps = torch.zeros(weight.shape[0], dtype=torch.float64, device=weight.device)


@torch.no_grad()
def _step(x, y, rows, valid, models, weight, bias, l2, state: _OptimiserState) -> None:
    """One optimiser step of ``models`` on their mini-batches (``rows`` (B, L) indices into ``x``, ``valid``
    (B, L) which of them are real): mean cross-entropy, L2 as weight decay, each model's own torch.optim
    update written out."""
    xb, yb = x[rows], y[rows]  # (B, L, D), (B, L)
    w, b = weight[models], bias[models]  # (B, D, C), (B, C)
    logits = torch.baddbmm(b[:, None, :], xb, w)  # (B, L, C)
    # d(mean CE)/d logits = (softmax − one-hot) / n over the valid rows
    delta = logits.softmax(dim=2)
    delta -= F.one_hot(yb, delta.shape[2]).to(delta.dtype)
    delta *= (valid / valid.sum(dim=1, keepdim=True)).unsqueeze(2)
    grad_w = torch.bmm(xb.transpose(1, 2), delta) + l2[models, None, None] * w
    grad_b = delta.sum(dim=1) + l2[models, None] * b
    state.steps[models] += 1
    step = state.steps[models]
    for i, (param, grad) in enumerate(((weight, grad_w), (bias, grad_b))):
        shape = (-1,) + (1,) * (grad.dim() - 1)
        if state.optim == "adam":  # torch.optim.Adam: lr 1e-3, betas (0.9, 0.999), eps 1e-8
            m = state.exp_avg[i][models].lerp_(grad, 0.1)
            v = state.exp_avg_sq[i][models].mul_(0.999).addcmul_(grad, grad, value=0.001)
            bc1 = (1 - 0.9**step).to(grad.dtype).view(shape)
            bc2 = (1 - 0.999**step).to(grad.dtype).view(shape)
            param[models] = param[models] - (1e-3 / bc1) * m / (v.sqrt() / bc2.sqrt()).add_(1e-8)
            state.exp_avg[i][models], state.exp_avg_sq[i][models] = m, v
        else:  # torch.optim.RMSprop: lr 1e-2, alpha 0.99, eps 1e-8
            v = state.exp_avg_sq[i][models].mul_(0.99).addcmul_(grad, grad, value=0.01)
            param[models] = param[models] - 1e-2 * grad / v.sqrt().add_(1e-8)
            state.exp_avg_sq[i][models] = v
