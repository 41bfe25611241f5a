"""Optimiser steps of many small logistic regressions at once: the arithmetic of SentEval's ``MLP(nhid=0)``
training, for (G, K·C, D + 1) parameter blocks (G groups of K models sharing their mini-batches; C classes; the
bias folded in as the last feature).

Two engines run the same arithmetic:

* :func:`eager_step` — one step of the groups that have a mini-batch, shapes following the data (a group's
  last, smaller batch; groups dropped once they finish). Fewest operations: the CPU's engine.
* :class:`StaticPasses` — every step has one fixed shape: all groups, full ``batch_size`` rows, a 0/1 step mask
  per group and a weight per row (1/n for a batch's n real rows, 0 for padding), the step index a device
  tensor. Nothing in a step depends on the host, so on a GPU one step is captured once as a CUDA graph and
  replayed: one launch per step instead of ~30 kernels, each costing more host time than its arithmetic.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

logger = logging.getLogger(__name__)
ADAM_LR, ADAM_BETAS, RMSPROP_LR, RMSPROP_ALPHA, EPS = 1e-3, (0.9, 0.999), 1e-2, 0.99, 1e-8
_capture_failed = False  # set once a CUDA graph capture has failed in this process


def relative_logits(
    xa: torch.Tensor, rows: torch.Tensor, params: torch.Tensor, classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows ``xa[rows]`` (G, L, D + 1) and every member's logits relative to its last class, (G, K, C, L).

    Softmax and arg-max do not change when every logit of a row is shifted alike, so only the C − 1 products
    with ``w_c − w_C`` are computed (the last class's relative logit is 0): half the work for 2 classes. The
    layout lets both batched products read the rows in place (``params @ rowsᵀ`` here, ``delta @ rows`` for
    the gradient): on a CPU that is faster than ``rows @ paramsᵀ`` (bench/eval_speed.py)."""
    g, length = rows.shape
    xb = xa.index_select(0, rows.reshape(-1)).view(g, length, xa.shape[1])
    w = params.view(g, -1, classes, xa.shape[1])
    relative = (w[:, :, :-1] - w[:, :, -1:]).reshape(g, -1, xa.shape[1])  # (G, K·(C − 1), D + 1)
    z = torch.bmm(relative, xb.transpose(1, 2)).view(g, -1, classes - 1, length)
    return xb, torch.cat([z, z.new_zeros(g, z.shape[1], 1, length)], dim=2)


def _gradient(xa, y, classes: int, rows, row_weight, params, decay) -> torch.Tensor:
    """Mean cross-entropy's gradient plus coupled L2, (G, K·C, D + 1).

    d loss / d logits = (softmax − one-hot) · weight, whose C entries sum to 0 — so the gradient of the last
    class's row is minus the sum of the others' (C − 1 products instead of C); L2 as coupled weight decay
    (``grad + l2 · param``, bias included, as torch.optim's ``weight_decay``). ``row_weight`` (G, L) is 1/n
    for a group's n real rows and 0 for padding, or ``None`` when every row is real (1/L)."""
    g, length = rows.shape
    xb, logits = relative_logits(xa, rows, params, classes)
    delta = logits.softmax(dim=2)[:, :, :-1]  # (G, K, C − 1, L)
    labels = y.index_select(0, rows.reshape(-1)).view(g, 1, 1, length)
    delta -= (torch.arange(classes - 1, device=xa.device)[None, None, :, None] == labels).to(delta.dtype)
    if row_weight is None:
        delta /= length
    else:
        delta *= row_weight[:, None, None, :]
    part = torch.bmm(delta.reshape(g, -1, length), xb).view(g, -1, classes - 1, xb.shape[2])
    grad = torch.cat([part, -part.sum(dim=2, keepdim=True)], dim=2).view_as(params)
    return grad.addcmul_(params, decay)


@torch.no_grad()
def eager_step(xa, y, classes: int, rows, row_weight, params, decay, opt: Optimiser, sub: np.ndarray | None) -> None:
    """One optimiser step of the groups ``sub`` (all when ``None``, then in place) on their mini-batches.

    ``rows`` (G', L) index ``xa``; ``row_weight`` as in :func:`_gradient`; then each model's torch.optim update.
    """
    index = None if sub is None else torch.as_tensor(sub, device=params.device)
    p = params if index is None else params[index]
    grad = _gradient(xa, y, classes, rows, row_weight, p, decay if index is None else decay[index])
    opt.update(p, grad, index)
    if index is not None:
        params[index] = p


class Optimiser:
    """torch.optim's Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8) or RMSprop (lr 1e-2, alpha 0.99, eps 1e-8),
    written out for (G, …) parameter blocks with per-group step counts."""

    def __init__(self, optim: str, params: torch.Tensor) -> None:
        _check_optim(optim)
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
            v.mul_(RMSPROP_ALPHA).addcmul_(grad, grad, value=1 - RMSPROP_ALPHA)
            p.addcdiv_(grad, v.sqrt().add_(EPS), value=-RMSPROP_LR)
        else:
            m = self.exp_avg if index is None else self.exp_avg[index]
            m.lerp_(grad, 1 - ADAM_BETAS[0])
            v.mul_(ADAM_BETAS[1]).addcmul_(grad, grad, value=1 - ADAM_BETAS[1])
            steps = self.steps[sel]
            if (steps == steps[0]).all():  # torch's arithmetic: Python-float bias corrections
                step_size = ADAM_LR / (1 - ADAM_BETAS[0] ** int(steps[0]))
                denom = (v.sqrt() / (1 - ADAM_BETAS[1] ** int(steps[0])) ** 0.5).add_(EPS)
                p.addcdiv_(m, denom, value=-step_size)
            else:  # groups at different step counts (ragged passes): per-group corrections
                shape = (-1,) + (1,) * (p.dim() - 1)
                step_size, bc2 = (torch.as_tensor(a, dtype=p.dtype, device=p.device).view(shape) for a in _adam(steps))
                p.sub_(step_size * m / (v.sqrt() / bc2).add_(EPS))
            if index is not None:
                self.exp_avg[index] = m
        if index is not None:
            self.exp_avg_sq[index] = v


def _check_optim(optim: str) -> None:
    if optim not in ("adam", "rmsprop"):
        raise ValueError(f"optim must be adam or rmsprop, got {optim!r}")


def _adam(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adam's step size ``lr / (1 − β1^t)`` and ``sqrt(1 − β2^t)`` at step counts ``t`` (float64)."""
    return ADAM_LR / (1 - ADAM_BETAS[0] ** steps), (1 - ADAM_BETAS[1] ** steps) ** 0.5


class StaticPasses:
    """Passes over the groups' training rows in steps of one fixed shape, optionally replayed as a CUDA graph.

    Every step computes all G groups on ``batch_size`` rows. Into buffers of fixed shape the host writes, per
    pass, each group's permuted rows (G, B, L) padded with row 0 and, for Adam, the per-group bias corrections
    of each step; and once (they follow from the groups' sizes) the row weights (1/n for a batch's n real
    rows, 0 for padding) and the step mask (G, B) (a group whose pass has fewer batches does not step: its
    parameters and optimiser state are kept as they are). A step reads its slice through a device step
    counter and increments it. The arithmetic is
    :func:`eager_step`'s (Adam in its per-group form), so the models follow the same trajectories to float
    rounding; groups whose models have all stopped keep computing (their results are never read).

    Args:
        xa: (N, D + 1) features with the column of ones.
        y: (N,) labels.
        classes: C.
        batch_size: L.
        max_rows: the largest training set of any group (fixes B = ⌈max_rows / L⌉).
        params: (G, K·C, D + 1), updated in place.
        decay: (G, K·C, 1) L2 penalties.
        optim: ``"adam"`` or ``"rmsprop"``.
        graph: capture the step as a CUDA graph on the first pass (``params`` must be on a CUDA device).
    """

    def __init__(
        self,
        xa: torch.Tensor,
        y: torch.Tensor,
        classes: int,
        batch_size: int,
        max_rows: int,
        params: torch.Tensor,
        decay: torch.Tensor,
        optim: str,
        graph: bool = False,
    ) -> None:
        _check_optim(optim)
        if graph and params.device.type != "cuda":
            raise ValueError(f"a CUDA graph needs the parameters on a CUDA device, got {params.device}")
        g, dev = len(params), params.device
        self.xa, self.y, self.classes, self.batch_size, self.optim = xa, y, classes, batch_size, optim
        self.params, self.decay = params, decay
        self.batches = -(-max_rows // batch_size)  # B
        self.exp_avg = torch.zeros_like(params) if optim == "adam" else None
        self.exp_avg_sq = torch.zeros_like(params)
        self.steps = np.zeros(g, dtype=np.int64)  # optimiser steps taken by each group (host copy)
        self.rows = torch.zeros(g, self.batches, batch_size, dtype=torch.int64, device=dev)
        self.row_weight = torch.zeros(g, self.batches, batch_size, dtype=xa.dtype, device=dev)
        self.step_mask = torch.zeros(g, self.batches, dtype=torch.bool, device=dev)
        self.step_size = torch.zeros(g, self.batches, dtype=xa.dtype, device=dev)  # Adam's lr / (1 − β1^t)
        self.bc2 = torch.ones(g, self.batches, dtype=xa.dtype, device=dev)  # Adam's sqrt(1 − β2^t)
        self.counter = torch.zeros(1, dtype=torch.int64, device=dev)
        self.graph = graph
        self._graph: torch.cuda.CUDAGraph | None = None
        self._lengths: np.ndarray | None = None  # the groups' training-set sizes the masks were made for
        self._taken = np.zeros((g, self.batches), dtype=np.int64)

    def run_pass(self, order: np.ndarray, lengths: np.ndarray) -> None:
        """One pass: group ``i`` trains on ``order[i, :lengths[i]]`` (its permuted rows) in mini-batches."""
        g, bs, nb = len(self.params), self.batch_size, self.batches
        if order.shape[0] != g or int(lengths.max()) > nb * bs:
            raise ValueError(f"a pass needs {g} groups of at most {nb * bs} rows, got {order.shape} / {lengths.max()}")
        if self._lengths is None or not np.array_equal(lengths, self._lengths):  # the same every pass of a fit
            counts = np.clip(lengths[:, None] - bs * np.arange(nb)[None, :], 0, bs)  # (G, B) real rows per batch
            real = np.arange(bs)[None, None, :] < counts[:, :, None]  # (G, B, L)
            weight = np.where(real, np.float32(1) / np.maximum(counts, 1).astype(np.float32)[:, :, None], 0)
            self._load(self.row_weight, weight.astype(np.float32))
            self._load(self.step_mask, counts > 0)
            self._taken = np.cumsum(counts > 0, axis=1)  # the step each batch is, counted from the pass's start
            self._lengths = lengths.copy()
        rows = np.zeros((g, nb * bs), dtype=np.int64)
        rows[:, : order.shape[1]] = order
        self._load(self.rows, rows.reshape(g, nb, bs))
        if self.optim == "adam":
            step_size, bc2 = _adam(self.steps[:, None] + np.maximum(self._taken, 1))
            self._load(self.step_size, step_size)  # float64, rounded once to the parameters' dtype by the copy
            self._load(self.bc2, bc2)
        self.steps += self._taken[:, -1]
        self.counter.zero_()
        steps = int((self._taken[:, -1]).max())  # batches in which at least one group steps
        if self.graph and self._graph is None:
            if _capture_failed:  # known to fail in this process: do not retry (and warn) on every fit
                self.graph = False
            else:
                self._capture()
        if self._graph is None:
            for _ in range(steps):
                self._step()
            return
        with torch.cuda.device(self.params.device):  # replays launch on the current device's stream
            for _ in range(steps):
                self._graph.replay()

    def _load(self, buffer: torch.Tensor, values: np.ndarray) -> None:
        buffer.copy_(torch.from_numpy(values))

    @torch.no_grad()
    def _step(self) -> None:
        i, p = self.counter, self.params  # this step's batch index (a device tensor), (G, K·C, D + 1)
        rows = self.rows.index_select(1, i).squeeze(1)  # (G, L)
        row_weight = self.row_weight.index_select(1, i).squeeze(1)
        mask = self.step_mask.index_select(1, i).view(-1, 1, 1)
        grad = _gradient(self.xa, self.y, self.classes, rows, row_weight, p, self.decay)
        v = self.exp_avg_sq.mul(RMSPROP_ALPHA if self.optim == "rmsprop" else ADAM_BETAS[1])
        if self.optim == "rmsprop":
            v.addcmul_(grad, grad, value=1 - RMSPROP_ALPHA)
            new = torch.addcdiv(p, grad, v.sqrt().add_(EPS), value=-RMSPROP_LR)
        else:
            v.addcmul_(grad, grad, value=1 - ADAM_BETAS[1])
            m = torch.lerp(self.exp_avg, grad, 1 - ADAM_BETAS[0])
            step_size = self.step_size.index_select(1, i).view(-1, 1, 1)
            bc2 = self.bc2.index_select(1, i).view(-1, 1, 1)
            new = p - step_size * m / (v.sqrt() / bc2).add_(EPS)
            self.exp_avg.copy_(torch.where(mask, m, self.exp_avg))
        self.exp_avg_sq.copy_(torch.where(mask, v, self.exp_avg_sq))
        p.copy_(torch.where(mask, new, p))
        self.counter += 1

    def _state(self) -> list[torch.Tensor]:
        """What a step changes: parameters, optimiser moments and the step counter."""
        return [t for t in (self.params, self.exp_avg, self.exp_avg_sq, self.counter) if t is not None]

    def _snapshot(self) -> list[torch.Tensor]:
        return [t.clone() for t in self._state()]

    def _restore(self, saved: list[torch.Tensor]) -> None:
        for t, s in zip(self._state(), saved, strict=True):
            t.copy_(s)

    def _replay_matches_step(self) -> bool:
        """Whether one replay of the recorded graph changes the state as one direct step does; the state is
        left as it was.

        To float rounding (cuBLAS may pick another algorithm under capture), on each tensor's own scale: the
        moments to 1e-4 of their largest entry, the parameters to 1e-3 of the step's largest change — a replay
        that skips or repeats an update, or reads another batch, misses by the size of a step."""
        saved = self._snapshot()
        self._graph.replay()
        replayed = self._snapshot()
        self._restore(saved)
        self._step()
        state = self._state()
        scales = [(state[0] - saved[0]).abs().max() * 1e-3] + [t.abs().max() * 1e-4 for t in state[1:-1]]
        same = torch.equal(replayed[-1], state[-1]) and all(
            bool(((a - b).abs() <= scale).all()) for a, b, scale in zip(replayed[:-1], state[:-1], scales, strict=True)
        )
        self._restore(saved)
        return same

    def _warm_up(self, steps: int = 2) -> None:
        """Run ``steps`` steps of the pass's first batch and undo them (state and counter as before)."""
        saved = self._snapshot()
        try:
            for _ in range(steps):
                self.counter.zero_()  # batch 0 exists whatever the number of batches
                self._step()
        finally:
            self._restore(saved)

    def _capture(self) -> None:
        """Record one step as a CUDA graph, after warm-up steps on a side stream (as torch.cuda.graphs asks).

        A capture that fails, or whose first replay does not reproduce a direct step, leaves the steps
        unrecorded (same arithmetic, one launch per kernel) with a warning, once per process; the caller's
        device and stream are kept either way."""
        global _capture_failed
        device = self.params.device
        with torch.cuda.device(device):
            current = torch.cuda.current_stream(device)
            side = torch.cuda.Stream(device=device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                self._warm_up()
            current.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            saved = self._snapshot()
            try:
                with torch.cuda.graph(graph, stream=side):  # records, runs nothing
                    self._step()
            except RuntimeError as err:  # same steps, launched one kernel at a time: slower, never wrong
                torch.cuda.set_stream(current)
                current.wait_stream(side)  # whatever ran on the capture stream is undone after it
                self._restore(saved)
                _capture_failed, self.graph = True, False
                logger.warning("CUDA graph capture failed (%s); running the classifier steps without it", err)
                return
            finally:
                torch.cuda.set_stream(current)  # a failed capture's exit can leave its capture stream current
            self._graph = graph
            if not self._replay_matches_step():  # checked once per fit: a wrong recording must not train models
                self._graph, self.graph, _capture_failed = None, False, True
                logger.warning("a CUDA graph replay differed from the step it recorded; running the steps without it")
