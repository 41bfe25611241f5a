r"""E3: WEINCE's online per-anchor statistics (λ_i, β̂_i, ρ_i, ΔAIC_i) on batches whose tail shape, hardness and
winner law are set independently.

The statistics are the loss's own (``WeinceLoss.statistics`` on the simulated batch's
:class:`~simcse_weince.losses.layout.ScoreMatrix`). They read the negatives' scores only — the positive (the drawn
winner) is removed — so a winner law can move them only through which candidate it removes.

λ_i = σ(κ_ρ (log ρ_0 − log ρ_i)) · σ(κ_aic (ΔAIC_i − m)), ρ_0 the q-quantile of ρ over the batch. When ΔAIC_i ≫ m
for every anchor the second factor is ≈ 1 and λ_i > 1/2 exactly when ρ_i < ρ_0, so **the share of anchors with
λ > 1/2 is ≈ q by construction** whatever the scores: :func:`knob_sweep` measures how much of it is left to the
data over the authors' grid of (m, κ_ρ, κ_aic) and several q. The sweep recomputes λ from the stored ρ and ΔAIC
with :func:`~simcse_weince.losses.stats.mixing_weight`, the loss's own function.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.stats import mixing_weight, quantile_by_index
from weince_lab.simulation.batches import ScoreSetting, simulate_batch, simulate_ntxent_batch
from weince_lab.simulation.winners import BlendedLaw

AUTHORS_MARGINS = (0.0, 2.0, 6.0)
AUTHORS_KAPPA_RHO = (5.0, 10.0, 20.0)
AUTHORS_KAPPA_AIC = (0.5, 1.0, 2.0)
SWEEP_QS = (0.1, 0.2, 0.3, 0.5)


@dataclass
class CellStatistics:
    """The per-anchor statistics of every batch of one cell, (batches, A) each."""

    rho: torch.Tensor
    delta_aic: torch.Tensor
    lam: torch.Tensor
    beta_ols: torch.Tensor
    beta_hill: torch.Tensor


def cell_statistics(
    setting: ScoreSetting,
    law: BlendedLaw | None,
    loss: ContrastiveLoss,
    num_batches: int,
    seed: int,
) -> CellStatistics:
    """The loss's statistics on ``num_batches`` simulated batches (``law`` None: the NT-Xent layout, no winners)."""
    g = torch.Generator().manual_seed(seed)
    parts = []
    for _ in range(num_batches):
        batch = simulate_ntxent_batch(setting, g) if law is None else simulate_batch(setting, law, g)
        st = loss.statistics(batch.score_matrix())
        parts.append((st.rho, st.delta_aic, st.lam, st.beta_ols, st.beta_hill))
    return CellStatistics(*(torch.stack([p[i] for p in parts]).double() for i in range(5)))


def summarise_cell(stats: CellStatistics, margin: float = 2.0) -> dict[str, float]:
    """Mean λ (with its SE over batches), share λ > 1/2, mean ΔAIC and its share above the loss's margin m,
    mean β̂ (OLS, Hill), mean ρ."""
    per_batch = stats.lam.mean(dim=1)
    nb = per_batch.numel()
    return {
        "lambda_mean": float(stats.lam.mean()),
        "lambda_mean_se": float(per_batch.std() / np.sqrt(nb)) if nb > 1 else 0.0,
        "share_gt_half": float((stats.lam > 0.5).double().mean()),
        "delta_aic_mean": float(stats.delta_aic.mean()),
        "share_delta_aic_gt_margin": float((stats.delta_aic > margin).double().mean()),
        "beta_ols_mean": float(stats.beta_ols.mean()),
        "beta_hill_mean": float(stats.beta_hill[torch.isfinite(stats.beta_hill)].mean()),
        "rho_mean": float(stats.rho.mean()),
    }


def knob_lambda(stats: CellStatistics, q: float, kappa_rho: float, kappa_aic: float, margin: float) -> torch.Tensor:
    """(batches, A) λ recomputed from the stored ρ and ΔAIC with other knobs (ρ_0 per batch, as in the loss)."""
    rho0 = torch.stack([quantile_by_index(r, q) for r in stats.rho])[:, None]
    return mixing_weight(stats.rho, rho0, stats.delta_aic, kappa_rho, kappa_aic, margin)


def knob_sweep(
    stats: CellStatistics,
    qs: Sequence[float] = SWEEP_QS,
    margins: Sequence[float] = AUTHORS_MARGINS,
    kappa_rhos: Sequence[float] = AUTHORS_KAPPA_RHO,
    kappa_aics: Sequence[float] = AUTHORS_KAPPA_AIC,
) -> list[dict[str, float]]:
    """Mean λ and share λ > 1/2 for every (q, m, κ_ρ, κ_aic) of the grid."""
    out = []
    for q, m, kr, ka in itertools.product(qs, margins, kappa_rhos, kappa_aics):
        lam = knob_lambda(stats, q, kr, ka, m)
        out.append(
            {
                "q": q,
                "margin": m,
                "kappa_rho": kr,
                "kappa_aic": ka,
                "lambda_mean": float(lam.mean()),
                "share_gt_half": float((lam > 0.5).double().mean()),
            }
        )
    return out
