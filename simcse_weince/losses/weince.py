"""WEINCE: Weibull-Enhanced InfoNCE (spec: shared/docs/weince_spec.md)."""

from __future__ import annotations

from typing import Any

import torch

from simcse_weince.losses.base import ContrastiveLoss, check_positive
from simcse_weince.losses.distributed import all_gather_no_grad
from simcse_weince.losses.layout import Layout, ScoreMatrix, masked_cross_entropy
from simcse_weince.losses.logits import weince_logits
from simcse_weince.losses.stats import AnchorStatistics, anchor_statistics

BETA_MODES: tuple[str, ...] = ("unit", "ols", "hill")


class WeinceLoss(ContrastiveLoss):
    r"""WEINCE: InfoNCE logits blended per anchor with an endpoint "shortfall" logit.

    For anchor i and candidate j, with float32 cosine similarities ``s_ij`` and score cap ``x_F = 1``:

    .. math::
        \ell_{ij} = (1 - \lambda_i)\,\frac{s_{ij}}{\tau}
                    + \lambda_i\,\bigl(-\beta_i \log(1 - \min(s_{ij}, 1 - \epsilon))\bigr)

    and the loss is the mean cross-entropy of each anchor's positive against its positive and negatives.

    ``λ_i = σ(κ_ρ (log ρ_0 − log ρ_i)) · σ(κ_aic (ΔAIC_i − m))`` where ``ρ_i`` is one minus the hardest
    negative score, ``ρ_0`` the q-quantile of ρ over the global batch, and ``ΔAIC_i`` compares a Weibull-line
    against a Gumbel-proxy fit of the anchor's k_tail hardest negatives. ``β_i`` is 1 (``"unit"``, the
    authors' released code), the clamped Weibull-line slope (``"ols"``, the paper's formula) or a clamped
    Hill estimate (``"hill"``).

    Stop-gradient quantities: λ_i, β_i, ρ_i, ρ_0 and ΔAIC_i are computed under ``no_grad`` from the
    detached scores (the paper's stop-gradient); gradients flow only through ``s_ij`` in the logits.

    λ = 0 is InfoNCE: with ``λ_i ≡ 0`` the logits are exactly ``s_ij / τ`` and the loss equals
    :class:`InfoNCELoss` to float rounding. The same happens automatically when a batch is too small for
    the tail fits (fewer than 2 points after the burn).

    References:
        Erol et al., "When Softmax Fails at the Top: Extreme-Value Corrections for InfoNCE", ICML 2026
        (arXiv 2606.00262).

    Args:
        temperature: τ > 0.
        layout: ``"simcse"`` (B×B) or ``"ntxent"`` (2N views).
        beta_mode: ``"unit"``, ``"ols"`` or ``"hill"``.
        beta_clamp: (β_min, β_max) with 0 < β_min ≤ β_max, default (0.5, 16).
        min_tail_points: lower bound on the tail size, ≥ 1 (default 32).
        tail_frac: tail fraction of the K negatives, in (0, 1] (default 0.10).
        burn: leading tail points dropped before the fits; ``None`` = ``max(1, k_tail // 20)``.
        q: quantile of ρ over anchors defining ρ_0, in [0, 1] (default 0.2).
        kappa_rho: slope κ_ρ > 0 of the hardness gate (default 10).
        kappa_aic: slope κ_aic > 0 of the tail-shape gate (default 1).
        margin: ΔAIC margin m (default 2).
        eps: shortfall floor / clamp of s below 1, in (0, 0.1] (default 1e-6).
        fixed_lambda: if set, λ_i ≡ this value in [0, 1] for every anchor (ablations; 0 gives InfoNCE);
            the statistics are still computed and reported.
        gather_across_devices: score local anchors against all processes' candidates; every statistic,
            ρ_0 included, then equals the single-process value on the global batch.

    Raises:
        ValueError: on an argument outside its range (at construction), or a batch of fewer than 2 rows.

    Example:
        >>> loss = WeinceLoss(temperature=0.05, beta_mode="ols")
        >>> value = loss(torch.randn(64, 32), torch.randn(64, 32))
        >>> loss.last_diagnostics["lambda_mean"]  # a 0-d tensor, no host sync in the loss
    """

    def __init__(
        self,
        temperature: float = 0.05,
        layout: Layout = "simcse",
        beta_mode: str = "ols",
        beta_clamp: tuple[float, float] = (0.5, 16.0),
        min_tail_points: int = 32,
        tail_frac: float = 0.10,
        burn: int | None = None,
        q: float = 0.2,
        kappa_rho: float = 10.0,
        kappa_aic: float = 1.0,
        margin: float = 2.0,
        eps: float = 1e-6,
        fixed_lambda: float | None = None,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(temperature, layout, gather_across_devices)
        if beta_mode not in BETA_MODES:
            raise ValueError(f"beta_mode must be one of {BETA_MODES}, got {beta_mode!r}")
        lo, hi = (float(v) for v in beta_clamp)
        if not 0 < lo <= hi:
            raise ValueError(f"beta_clamp must satisfy 0 < beta_min <= beta_max, got {tuple(beta_clamp)!r}")
        if int(min_tail_points) != min_tail_points or min_tail_points < 1:
            raise ValueError(f"min_tail_points must be an integer >= 1, got {min_tail_points!r}")
        if not 0 < tail_frac <= 1:
            raise ValueError(f"tail_frac must be in (0, 1], got {tail_frac!r}")
        if burn is not None and (int(burn) != burn or burn < 0):
            raise ValueError(f"burn must be None (automatic) or an integer >= 0, got {burn!r}")
        if not 0 <= q <= 1:
            raise ValueError(f"q must be in [0, 1], got {q!r}")
        check_positive("kappa_rho", kappa_rho)
        check_positive("kappa_aic", kappa_aic)
        if not 0 < eps <= 0.1:
            raise ValueError(f"eps must be in (0, 0.1], got {eps!r}")
        if fixed_lambda is not None and not 0 <= fixed_lambda <= 1:
            raise ValueError(f"fixed_lambda must be None or in [0, 1], got {fixed_lambda!r}")
        self.beta_mode = beta_mode
        self.beta_clamp = (lo, hi)
        self.min_tail_points = int(min_tail_points)
        self.tail_frac = float(tail_frac)
        self.burn = None if burn is None else int(burn)
        self.q = float(q)
        self.kappa_rho = float(kappa_rho)
        self.kappa_aic = float(kappa_aic)
        self.margin = float(margin)
        self.eps = float(eps)
        self.fixed_lambda = None if fixed_lambda is None else float(fixed_lambda)
        self.last_statistics: AnchorStatistics | None = None

    def get_config_dict(self) -> dict[str, Any]:
        return {
            **super().get_config_dict(),
            "beta_mode": self.beta_mode,
            "beta_clamp": list(self.beta_clamp),
            "min_tail_points": self.min_tail_points,
            "tail_frac": self.tail_frac,
            "burn": self.burn,
            "q": self.q,
            "kappa_rho": self.kappa_rho,
            "kappa_aic": self.kappa_aic,
            "margin": self.margin,
            "eps": self.eps,
            "fixed_lambda": self.fixed_lambda,
        }

    def statistics(self, lay: ScoreMatrix) -> AnchorStatistics:
        """Stop-gradient per-anchor statistics of a :class:`ScoreMatrix` (spec §3)."""
        with torch.no_grad():
            # Non-negatives (positive, self) never enter the tail; masked negatives count as s = -1.
            stat_scores = lay.scores.detach().masked_fill(lay.user_mask, -1.0)
            stat_scores = stat_scores.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))
            stats = anchor_statistics(
                stat_scores,
                lay.num_negatives,
                beta_mode=self.beta_mode,
                beta_clamp=self.beta_clamp,
                min_tail_points=self.min_tail_points,
                tail_frac=self.tail_frac,
                burn=self.burn,
                q=self.q,
                kappa_rho=self.kappa_rho,
                kappa_aic=self.kappa_aic,
                margin=self.margin,
                eps=self.eps,
                gather_rho=all_gather_no_grad if self.gather_across_devices else None,
            )
            if self.fixed_lambda is not None:
                stats = stats._replace(lam=torch.full_like(stats.lam, self.fixed_lambda))
        return stats

    def logits(self, scores: torch.Tensor, stats: AnchorStatistics) -> torch.Tensor:
        """(A, C) blended logits ``(1 − λ) s/τ + λ·(−β log(1 − s))`` with detached λ, β."""
        lam = stats.lam.detach()[:, None]  # stop-gradient (paper): λ_i is not trained
        beta = stats.beta.detach()[:, None]  # stop-gradient (paper): β_i is not trained
        return weince_logits(scores, lam, beta, self.temperature, self.eps)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        """Mean cross-entropy of the blended logits; the batch's statistics are kept in ``last_statistics``
        and summarised (0-d tensors, no host sync) in ``last_diagnostics``."""
        stats = self.statistics(lay)
        self.last_statistics = stats
        self.last_diagnostics = diagnostics(stats)
        return masked_cross_entropy(self.logits(lay.scores, stats), lay)

    @property
    def citation(self) -> str:
        return """@inproceedings{erol2026weince,
  title={When Softmax Fails at the Top: Extreme-Value Corrections for InfoNCE},
  author={Erol and Evren and Ozel and Morgan and Ryu and Zheng},
  booktitle={International Conference on Machine Learning (ICML)},
  year={2026},
  note={arXiv:2606.00262}
}"""


@torch.no_grad()
def diagnostics(stats: AnchorStatistics) -> dict[str, torch.Tensor]:
    """Batch summaries of the per-anchor statistics, as 0-d detached tensors (no host sync)."""
    lam = stats.lam.float()
    qs = torch.quantile(lam, torch.tensor([0.1, 0.5, 0.9], device=lam.device))
    return {
        "lambda_mean": lam.mean(),
        "lambda_q10": qs[0],
        "lambda_median": qs[1],
        "lambda_q90": qs[2],
        "lambda_frac_gt_half": (lam > 0.5).float().mean(),
        "beta_mean": stats.beta.float().mean(),
        "rho_mean": stats.rho.float().mean(),
        "rho0": stats.rho0.float(),
        "delta_aic_mean": stats.delta_aic.float().mean(),
    }
