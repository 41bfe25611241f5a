r"""The identified link ``softmax_j(a·s_ij + b·u_ij)``, ``u = −log(1 − s)``: the settings its losses share and the
batch likelihood's derivatives (the learned and profiled link losses, ``docs/algorithm.md`` §6).

WEINCE's blend ``(1 − λ)·s/τ + λ·β·u`` reaches the softmax only through a = (1 − λ)/τ and b = λβ (the
diagnostics' identification, :mod:`simcse_weince.diagnostics.link`). The link losses make (a, b) themselves the
quantities a run fits. For anchor i with features x_ij = (s_ij, u_ij) over its candidates and its positive w_i,
the negative log-likelihood per anchor is

.. math::
    \mathrm{NLL}(\theta) = \frac{1}{A}\sum_i \Bigl[\log \sum_j e^{\theta\cdot x_{ij}} - \theta\cdot x_{i w_i}\Bigr],
    \qquad \nabla = \frac{1}{A}\sum_i \bigl(E_{p_i}[x_i] - x_{i w_i}\bigr),
    \qquad H = \frac{1}{A}\sum_i \mathrm{Cov}_{p_i}[x_i],

convex in θ = (a, b): InfoNCE's loss at a = 1/τ, b = 0 (the mean cross-entropy *is* this NLL), and the
diagnostics' link fit divided by the number of anchors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field
from typing import Any

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import temperature_field as base_temperature_field
from simcse_weince.losses.distributed import is_distributed
from simcse_weince.losses.logits import shortfall

A_MAX = 100.0  # CLIP's cap on its logit scale
# The sane ceiling of a cap on a: cosines lie in [-1, 1], so at a = 10^4 a gap of 0.002 between the positive's score
# and every other already puts exp(-a·gap) below float32's resolution: the softmax is one-hot, the loss exactly 0 and
# the gradient exactly 0. A run that reaches a larger slope has stopped learning, so a larger cap is a typo.
A_MAX_SANE = 1e4
B_MAX = 16.0  # WEINCE's default upper clamp of β (b = λβ ≤ β at λ ≤ 1)
_EPS_RANGE = checks.within(0.0, 0.1, open_low=True)


def temperature_field() -> Any:
    return base_temperature_field(
        check=checks.positive_finite, help="τ > 0 dividing the cosine similarities (the link's start a = 1/τ; finite)."
    )


def a_max_field() -> Any:
    return field(
        default=None,
        metadata=checks.setting(
            checks.optional(checks.within(0, A_MAX_SANE, open_low=True), "None (automatic: max(100, 1/temperature))"),
            "Cap on the link's slope a (CLIP caps its logit scale at 100): a number in [1/temperature, 10000] (at "
            "a = 10^4 the softmax of cosines is one-hot in float32 and nothing is learned); None (default) = "
            "max(100, 1/temperature).",
        ),
    )


def a_cap(temperature: float, a_max: float | None) -> float:
    """The cap on a: ``a_max``, or max(100, 1/τ) when it is ``None`` (CLIP's cap, or the start a = 1/τ above it)."""
    return max(A_MAX, 1.0 / temperature) if a_max is None else float(a_max)


def b_min_field() -> Any:
    return field(
        default=0.0,
        metadata=checks.setting(
            checks.finite,
            "Lower bound of the endpoint weight b, <= 0. Below 0 the logit a·s + b·u is not monotone in s (a more "
            "similar candidate can score lower): allowed only by setting it, for link studies.",
        ),
    )


def b_max_field() -> Any:
    return field(
        default=B_MAX,
        metadata=checks.setting(checks.non_negative(), "Cap on the endpoint weight b, >= 0 (finite)."),
    )


def eps_field() -> Any:
    return field(
        default=1e-6,
        metadata=checks.setting(_EPS_RANGE, "Shortfall floor and clamp of the scores below 1, in (0, 0.1]."),
    )


def check_start(
    temperature: float, a_max: float | None, b_min: float | None = None, b_max: float | None = None
) -> None:
    """``ValueError`` unless the start (a, b) = (1/τ, 0) lies within the caps: ``a_max >= 1/τ`` and
    ``b_min <= 0 <= b_max``."""
    if a_max is not None and a_max < 1.0 / temperature:
        raise ValueError(
            f"link_a_max must be >= 1/temperature = {1.0 / temperature:g} (the start a = 1/τ), got {a_max!r}"
        )
    if b_min is not None and b_max is not None and not b_min <= 0.0 <= b_max:
        raise ValueError(f"link_b_min <= 0 <= link_b_max must hold (the start b = 0), got {(b_min, b_max)!r}")


def link_run_summary(diagnostic_keys: Sequence[str], log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a link loss's ``results.json`` says: the (step, a, b) trajectory of the logs (b ``None`` where the loss
    has none), the last logged (a, b), and how many logged steps each bound flag among ``diagnostic_keys`` held."""
    logged = [e for e in log_history if "link_a" in e]
    trajectory = [(e["step"], e["link_a"], e.get("link_b")) for e in logged]
    flags = [k for k in diagnostic_keys if k.endswith(("_at_cap", "_at_min"))]
    return {
        "link_trajectory": trajectory,
        "link_a_final": trajectory[-1][1] if trajectory else None,
        "link_b_final": trajectory[-1][2] if trajectory else None,
        "link_steps_at_bound": {k: sum(1 for e in logged if e.get(k, 0.0) > 0.5) for k in flags},
    }


def link_logits(scores: torch.Tensor, a: torch.Tensor | float, b: torch.Tensor | float, eps: float) -> torch.Tensor:
    """``a·s + b·u`` with ``u = −log(1 − min(s, 1 − eps))`` (the shipped shortfall logit and its clamp)."""
    return a * scores + b * shortfall(scores, eps)


def features(scores: torch.Tensor, eps: float) -> torch.Tensor:
    """(A, C, 2) float64 detached features (s, u) of the link."""
    s = scores.detach().double()
    return torch.stack([s, shortfall(s, eps)], dim=-1)


def _reduce(*values: torch.Tensor) -> list[torch.Tensor]:
    """The sums over processes (one ``all_reduce`` of the concatenated values), or the values themselves."""
    if not is_distributed():
        return list(values)
    flat = torch.cat([v.reshape(-1) for v in values])
    torch.distributed.all_reduce(flat)
    out, start = [], 0
    for v in values:
        out.append(flat[start : start + v.numel()].reshape(v.shape))
        start += v.numel()
    return out


def link_nll(
    x: torch.Tensor, valid: torch.Tensor, winner: torch.Tensor, theta: torch.Tensor, across: bool = False
) -> torch.Tensor:
    """Mean NLL per anchor at θ (over every process's anchors when ``across``)."""
    logp = (x @ theta).masked_fill(~valid, float("-inf")).log_softmax(dim=1)
    total, count = -logp.gather(1, winner[:, None]).sum(), torch.tensor(float(x.shape[0]), dtype=x.dtype)
    if across:
        total, count = _reduce(total, count)
    return total / count


def link_derivatives(
    x: torch.Tensor, valid: torch.Tensor, winner: torch.Tensor, theta: torch.Tensor, across: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean NLL, gradient (2,) and Hessian (2, 2) per anchor at θ (over every process's anchors when ``across``).

    Args:
        x: (A, C, 2) float64 features; valid: (A, C) bool candidates; winner: (A,) the positive's column;
        theta: (2,) float64 (a, b).
    """
    logp = (x @ theta).masked_fill(~valid, float("-inf")).log_softmax(dim=1)
    prob = logp.exp()
    weighted = prob[..., None] * x  # invalid entries have probability 0
    mean = weighted.sum(dim=1)  # (A, 2) E_p[x]
    rows = torch.arange(x.shape[0])
    total = -logp.gather(1, winner[:, None]).sum()
    grad = (mean - x[rows, winner]).sum(dim=0)
    flat = torch.where(valid[..., None], x, torch.zeros_like(x)).reshape(-1, 2)
    hess = weighted.reshape(-1, 2).T @ flat - mean.T @ mean
    count = torch.tensor(float(x.shape[0]), dtype=x.dtype)
    if across:
        total, grad, hess, count = _reduce(total, grad, hess, count)
    return total / count, grad / count, hess / count


def damped_newton_step(
    x: torch.Tensor,
    valid: torch.Tensor,
    winner: torch.Tensor,
    theta: torch.Tensor,
    across: bool = False,
    low: torch.Tensor | None = None,
    high: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""One damped Newton step on the batch's link NLL from ``theta``, within the box ``low <= θ <= high``.

    A coordinate at (or within a small ε of) a bound whose gradient points out of the box is held there (the
    active set of Bertsekas's projected Newton method: a diagonally scaled gradient step, projected, puts it on
    the bound); the free ones take the Newton step of their block of H, ``θ_F − t·H_FF⁻¹∇_F``. The trial point is
    projected onto the box, t the first of 1, ½, ¼, … (at most 30 halvings) that lowers the NLL by Armijo's rule;
    ``theta`` itself when none does (at the optimum to round-off, or a flat direction).

    The fixed point is the box's maximum-likelihood θ (its KKT point); projecting the unconstrained Newton point
    instead can settle where the NLL still falls into the box. H's pseudo-inverse drops eigenvalues below 1e-10 of
    the largest (round-off of a rank-deficient H: a direction the data do not determine, such as candidates whose
    features are collinear, is not stepped along).
    """
    low = torch.full_like(theta, -math.inf) if low is None else low.to(theta)
    high = torch.full_like(theta, math.inf) if high is None else high.to(theta)
    nll, grad, hess = link_derivatives(x, valid, winner, theta, across)
    # Bertsekas's projected Newton: a coordinate within ε of a bound that the gradient pushes against is held
    # (ε shrinks with the projected gradient's size, so that a point converging to a bound is held on the way).
    near = min(1e-2, float((theta - torch.minimum(torch.maximum(theta - grad, low), high)).norm()))
    held = ((theta <= low + near) & (grad > 0)) | ((theta >= high - near) & (grad < 0))
    free = ~held
    step = grad / hess.diagonal().clamp_min(1e-12)  # held coordinates: a scaled gradient step to their bound
    if bool(free.any()):
        block = hess[free][:, free]
        step[free] = torch.linalg.pinv(block, rtol=1e-10, hermitian=True) @ grad[free]
    decrement = float(grad @ step)
    if not math.isfinite(decrement) or decrement <= 0:
        return theta
    t = 1.0
    for _ in range(30):
        trial = torch.minimum(torch.maximum(theta - t * step, low), high)
        if float(link_nll(x, valid, winner, trial, across)) <= float(nll) - 1e-4 * float(grad @ (theta - trial)):
            return trial
        t /= 2
    return theta
