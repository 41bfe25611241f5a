"""Autograd-aware collectives for scoring local anchors against candidates from every process.

The forward pass concatenates the per-process tensors in rank order. The backward pass sums the incoming
gradient over all processes (every process scored its anchors against *every* candidate, so each candidate's
gradient has a contribution from every process) and returns the slice that belongs to this rank. Combined
with DDP's gradient averaging this gives exactly the gradient of the global-batch mean loss.

Only ``all_reduce`` and ``all_gather`` are used, so the functions work on the ``gloo`` (CPU) backend too.
All processes must pass tensors of the same shape (``accelerate``'s ``even_batches`` default ensures it).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    """True when a default process group with more than one process is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world_size() -> tuple[int, int]:
    """This process's rank and the number of processes (``(0, 1)`` without a process group)."""
    if not is_distributed():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


class _AllGatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        rank, world = rank_and_world_size()
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        ctx.rank, ctx.rows = rank, x.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` (R, ...) from all processes into (world·R, ...), differentiably.

    Without a multi-process group this is the identity.
    """
    if not is_distributed():
        return x
    return _AllGatherWithGrad.apply(x)


@torch.no_grad()
def all_gather_no_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` (R, ...) from all processes in rank order, without gradient."""
    if not is_distributed():
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)
