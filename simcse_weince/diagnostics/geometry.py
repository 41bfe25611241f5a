"""Alignment and uniformity of embeddings (Wang & Isola 2020), as analysed in the SimCSE paper.

With L2-normalised embeddings f:

* alignment ``ℓ_align = E_{(x,y) positive} ‖f(x) − f(y)‖^α`` (α = 2): lower = positives closer;
* uniformity ``ℓ_uniform = log E_{x,y} exp(−t‖f(x) − f(y)‖²)`` (t = 2) over distinct pairs: lower = more uniform.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def alignment(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> float:
    """Mean ``‖f(x_i) − f(y_i)‖^α`` over positive pairs (rows of x and y)."""
    x, y = F.normalize(x.double(), dim=1), F.normalize(y.double(), dim=1)
    return float((x - y).norm(dim=1).pow(alpha).mean())


@torch.no_grad()
def uniformity(x: torch.Tensor, t: float = 2.0) -> float:
    """``log mean_{i<j} exp(−t‖f(x_i) − f(x_j)‖²)`` (log-sum-exp, stable)."""
    if x.shape[0] < 2:
        raise ValueError("uniformity needs at least 2 embeddings")
    x = F.normalize(x.double(), dim=1)
    sq = torch.pdist(x).pow(2)
    return float(torch.logsumexp(-t * sq, dim=0) - math.log(sq.numel()))
