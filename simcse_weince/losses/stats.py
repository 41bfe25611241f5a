"""Per-anchor extreme-value statistics of WEINCE (``docs/algorithm.md`` §3), as pure no-grad tensor functions.

Everything here runs under ``torch.no_grad`` on detached scores, returns tensors (no host syncs), and is
vectorised over anchors. Notation for one anchor with K negatives:

* tail size ``k_tail = clip(max(min_tail_points, round(tail_frac·K)), 10, K)``;
* shortfalls of the k_tail hardest negatives, ascending: ``δ_(1) ≤ … ≤ δ_(k_tail)``, ``δ = max(1 − s, eps)``;
* hardness ``ρ = δ_(1)``;
* empirical CDF levels ``F_k = k / (k_tail + 1)``; after dropping ``burn = max(1, k_tail // 20)`` points,
  ordinary least squares on ``x_k = log δ_(k)``:
  Weibull line ``log F_k ≈ a + β·x_k`` and Gumbel proxy ``log(−log F_k) ≈ b + γ·x_k``;
  ``AIC = n·log(SSE/n) + 4`` and ``ΔAIC = AIC_G − AIC_W`` (> 0 favours the Weibull geometry);
* Hill estimate ``β̂ = k / Σ_{j≤k} log(δ_(k+1) / δ_(j))`` with ``k = k_tail − 1``;
* mixing weight ``λ = σ(κ_ρ·(log ρ_0 − log ρ)) · σ(κ_aic·(ΔAIC − m))`` with ρ_0 the q-quantile of ρ over
  all anchors of the global batch.

The fits run in float64 (they are A×k_tail elements, negligible next to the encoder) so that the
vectorised statistics match a plain per-anchor reference to round-off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

# Added to the SSE of a wrong-signed fit so that it loses the AIC comparison (``docs/algorithm.md`` §3b).
WRONG_SIGN_PENALTY = 1e6
SSE_FLOOR = 1e-12


class AnchorStatistics(NamedTuple):
    """Per-anchor statistics, each (A,), all detached."""

    lam: torch.Tensor  # mixing weight λ_i ∈ [0, 1]
    beta: torch.Tensor  # β_i used in the logits (mode-dependent)
    rho: torch.Tensor  # hardness ρ_i = 1 − hardest negative score (≥ eps)
    delta_aic: torch.Tensor  # ΔAIC_i = AIC_Gumbel − AIC_Weibull
    beta_ols: torch.Tensor  # Weibull-line slope β̂_i before clamping
    beta_hill: torch.Tensor  # Hill estimate before clamping
    rho0: torch.Tensor  # () the global q-quantile of ρ


def tail_size(num_negatives: int, min_tail_points: int, tail_frac: float) -> int:
    """``k_tail = clip(max(min_tail_points, round(tail_frac·K)), 10, K)`` (Python ``round``)."""
    return min(max(max(min_tail_points, round(tail_frac * num_negatives)), 10), num_negatives)


def burn_size(k_tail: int) -> int:
    """Points dropped from the start of the tail before the fits: ``max(1, k_tail // 20)``."""
    return max(1, k_tail // 20)


def quantile_index(q: float, count: int) -> int:
    """Index of the q-quantile in ``count`` values sorted ascending: ``round(q·(count − 1))``."""
    return round(q * (count - 1))


@torch.no_grad()
def tail_shortfalls(stat_scores: torch.Tensor, k_tail: int, eps: float) -> torch.Tensor:
    """Ascending shortfalls of the ``k_tail`` largest scores of each row.

    Args:
        stat_scores: (A, C) scores; entries that are not negatives must be ``-inf`` and masked negatives
            ``-1`` so that they enter the tail only when too few valid negatives exist.
        k_tail: tail size, at most the number of finite entries per row.
        eps: floor of the shortfall ``δ = max(1 − s, eps)``.

    Returns:
        (A, k_tail) shortfalls δ_(1) ≤ … ≤ δ_(k_tail).
    """
    top = stat_scores.topk(k_tail, dim=1).values  # descending scores -> ascending shortfalls
    return (1.0 - top).clamp_min(eps)


@torch.no_grad()
def ols_slope_and_sse(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row least squares ``y ≈ a + b·x``.

    Args:
        x: (A, n) abscissae, one regression per row.
        y: (n,) ordinates shared by all rows.

    Returns:
        slope b (A,) (0 where x is constant) and residual sum of squares (A,).
    """
    xc = x - x.mean(dim=1, keepdim=True)  # (A, n)
    yc = y - y.mean()  # (n,)
    sxx = (xc * xc).sum(dim=1)
    sxy = (xc * yc).sum(dim=1)
    # A constant row (a tail of ties) has no slope. Test it exactly: the rounded mean of n equal values can be
    # 1 ulp off, which would leave sxx ~ 1e-31 > 0 and a slope made of rounding noise.
    varies = (x.amax(dim=1) > x.amin(dim=1)) & (sxx > 0)
    slope = torch.where(varies, sxy / torch.where(varies, sxx, torch.ones_like(sxx)), torch.zeros_like(sxx))
    resid = yc - slope[:, None] * xc
    return slope, (resid * resid).sum(dim=1)


@torch.no_grad()
def weibull_gumbel_fits(delta: torch.Tensor, burn: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weibull-line and Gumbel-proxy fits on ascending shortfalls (``docs/algorithm.md`` §3b).

    Args:
        delta: (A, k_tail) ascending shortfalls (any float dtype; computed in float64).
        burn: number of leading points dropped; needs ``k_tail − burn ≥ 2``.

    Returns:
        β̂ (A,) Weibull slope, γ̂ (A,) Gumbel slope, ΔAIC = AIC_G − AIC_W (A,), all float64.
    """
    k_tail = delta.shape[1]
    n = k_tail - burn
    if n < 2:
        raise ValueError(f"the fits need at least 2 points after the burn, got k_tail={k_tail}, burn={burn}")
    levels = torch.arange(1, k_tail + 1, dtype=torch.float64, device=delta.device) / (k_tail + 1)
    levels = levels[burn:]
    x = delta[:, burn:].double().log()  # (A, n)
    beta, sse_w = ols_slope_and_sse(x, levels.log())
    gamma, sse_g = ols_slope_and_sse(x, (-levels.log()).log())
    sse_w = sse_w.clamp_min(SSE_FLOOR) + WRONG_SIGN_PENALTY * (beta <= 0)
    sse_g = sse_g.clamp_min(SSE_FLOOR) + WRONG_SIGN_PENALTY * (gamma >= 0)
    # AIC_G − AIC_W with AIC = n log(SSE/n) + 4: the n and the +4 cancel.
    delta_aic = n * (sse_g.log() - sse_w.log())
    return beta, gamma, delta_aic


@torch.no_grad()
def hill_beta(delta: torch.Tensor) -> torch.Tensor:
    """Hill-type MLE of the Weibull index from ascending shortfalls (``docs/algorithm.md`` §3c).

    ``β̂ = k / Σ_{j≤k} log(δ_(k+1) / δ_(j))`` with ``k = k_tail − 1``; +inf where all k+1 shortfalls tie.

    Args:
        delta: (A, k_tail) ascending shortfalls, k_tail ≥ 2.

    Returns:
        (A,) float64 estimates.
    """
    k = delta.shape[1] - 1
    if k < 1:
        raise ValueError(f"the Hill estimate needs at least 2 tail points, got {delta.shape[1]}")
    logd = delta.double().log()
    denom = k * logd[:, k] - logd[:, :k].sum(dim=1)
    return k / denom.clamp_min(0.0)


@torch.no_grad()
def mixing_weight(
    rho: torch.Tensor,
    rho0: torch.Tensor,
    delta_aic: torch.Tensor,
    kappa_rho: float,
    kappa_aic: float,
    margin: float,
) -> torch.Tensor:
    """``λ = σ(κ_ρ·(log ρ_0 − log ρ)) · σ(κ_aic·(ΔAIC − m))`` (``docs/algorithm.md`` §3d)."""
    hard = torch.sigmoid(kappa_rho * (rho0.log() - rho.log()))
    shape = torch.sigmoid(kappa_aic * (delta_aic - margin))
    return hard * shape


@torch.no_grad()
def quantile_by_index(values: torch.Tensor, q: float) -> torch.Tensor:
    """The q-quantile of a 1-D tensor as the element at ``round(q·(A−1))`` of its ascending sort."""
    idx = quantile_index(q, values.numel())
    return values.kthvalue(idx + 1).values


@torch.no_grad()
def anchor_statistics(
    stat_scores: torch.Tensor,
    num_negatives: int,
    config: Any,  # a WeinceConfig (losses/weince.py, which imports this module)
    gather_rho: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> AnchorStatistics:
    """All per-anchor statistics of one batch.

    Args:
        stat_scores: (A, C) detached float32 scores, ``-inf`` at non-negatives (positive, self) and ``-1``
            at masked negatives.
        num_negatives: K from the layout, before masking.
        config: the knobs (tail size, burn, q, κ_ρ, κ_aic, margin, eps, β mode and clamp);
            ``temperature`` and ``fixed_lambda`` are the loss's business and unused here.
        gather_rho: optional callable mapping the local ρ (A,) to the global ρ of all processes, so that
            ρ_0 is the quantile over the global batch.

    Returns:
        :class:`AnchorStatistics`. With fewer than 2 points after the burn, λ ≡ 0 (InfoNCE fallback),
        β ≡ 1 and ΔAIC ≡ 0.
    """
    k_tail = tail_size(num_negatives, config.min_tail_points, config.tail_frac)
    b = burn_size(k_tail) if config.burn is None else config.burn
    delta = tail_shortfalls(stat_scores, k_tail, config.eps)  # (A, k_tail)
    rho = delta[:, 0]
    rho_all = gather_rho(rho) if gather_rho is not None else rho
    rho0 = quantile_by_index(rho_all, config.q)
    dtype = stat_scores.dtype
    if k_tail - b < 2:
        zeros = torch.zeros_like(rho)
        ones = torch.ones_like(rho)
        return AnchorStatistics(zeros, ones, rho, zeros, ones, ones, rho0)
    beta_ols, _, delta_aic = weibull_gumbel_fits(delta, b)
    beta_h = hill_beta(delta)
    lo, hi = config.beta_clamp
    if config.beta_mode == "unit":
        beta = torch.ones_like(rho)
    elif config.beta_mode == "ols":
        beta = beta_ols.clamp(lo, hi).to(dtype)
    elif config.beta_mode == "hill":
        beta = beta_h.clamp(lo, hi).to(dtype)
    else:
        raise ValueError(f"beta_mode must be 'unit', 'ols' or 'hill', got {config.beta_mode!r}")
    lam = mixing_weight(rho.double(), rho0.double(), delta_aic, config.kappa_rho, config.kappa_aic, config.margin)
    lam = lam.to(dtype)
    return AnchorStatistics(lam, beta, rho, delta_aic.to(dtype), beta_ols.to(dtype), beta_h.to(dtype), rho0)
