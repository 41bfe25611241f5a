"""Per-anchor WEINCE statistics of one batch (λ, β̂, ρ, ΔAIC), summarised for reports and plots."""

from __future__ import annotations

import numpy as np
import torch

from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import score_matrix
from simcse_weince.losses.stats import AnchorStatistics

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@torch.no_grad()
def batch_statistics(anchors: torch.Tensor, positives: torch.Tensor, loss: ContrastiveLoss) -> AnchorStatistics:
    """The loss's own stop-gradient statistics for one batch of embeddings (its layout and knobs): a loss with
    per-anchor statistics, ``LOSSES["weince"]``."""
    return loss.statistics(score_matrix(anchors, positives, loss.layout))


def summarise(stats: AnchorStatistics) -> dict[str, dict[str, float]]:
    """Mean and quantiles of each per-anchor statistic, plus the share of anchors with λ > 0.5."""
    out: dict[str, dict[str, float]] = {}
    for name in ("lam", "beta", "beta_ols", "beta_hill", "rho", "delta_aic"):
        v = getattr(stats, name).double().cpu().numpy()
        v = v[np.isfinite(v)]
        out[name] = {"mean": float(v.mean())} | {f"q{int(100 * q)}": float(np.quantile(v, q)) for q in QUANTILES}
    out["lam"]["frac_gt_half"] = float((stats.lam > 0.5).float().mean())
    out["rho0"] = {"value": float(stats.rho0)}
    return out
