"""WEINCE: Weibull-Enhanced InfoNCE (Erol et al., "When Softmax Fails at the Top: Extreme-Value Corrections
for InfoNCE", ICML 2026, arXiv 2606.00262)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import field
from typing import Any, Literal, get_args

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.distributed import all_gather_no_grad
from simcse_weince.losses.layout import Layout, ScoreMatrix, masked_cross_entropy
from simcse_weince.losses.logits import weince_logits
from simcse_weince.losses.stats import AnchorStatistics, anchor_statistics

__all__ = ["BETA_MODES", "WeinceConfig", "WeinceLoss", "diagnostics"]

BetaMode = Literal["unit", "ols", "hill"]
BETA_MODES: tuple[str, ...] = get_args(BetaMode)

_unit_interval = checks.within(0, 1)
_integer_at_least_one = checks.integer_at_least(1)
_HALF_OPEN_UNIT = checks.within(0, 1, open_low=True)
_EPS_RANGE = checks.within(0, 0.1, open_low=True)
# beta_min and beta_max are one constraint on the pair, reported under the loss's historic name.
_BETA_CLAMP = checks.ordered("beta_min", "beta_max", "beta_clamp")


@dataclasses.dataclass(frozen=True)
class WeinceConfig:
    r"""The settings of WEINCE, validated at construction (``ValueError`` naming the value and its range).

    The loss blends, per anchor i, the InfoNCE logit with an endpoint "shortfall" logit:
    ``ℓ_ij = (1 − λ_i)·s_ij/τ + λ_i·(−β_i·log(1 − s_ij))``, with the mixing weight
    ``λ_i = σ(κ_ρ·(log ρ_0 − log ρ_i)) · σ(κ_aic·(ΔAIC_i − m))`` computed from the anchor's tail of hardest
    negatives (the full statement is in :class:`~simcse_weince.losses.weince.WeinceLoss`). The knobs:

    Attributes:
        temperature: τ > 0 dividing the cosine similarities.
        beta_mode: β_i of the shortfall logit: ``"unit"`` (β = 1, the authors' released code), ``"ols"`` (the
            clamped Weibull-line slope, the paper's formula) or ``"hill"`` (a clamped Hill estimate).
        beta_min: lower clamp of β̂, with 0 < beta_min ≤ beta_max.
        beta_max: upper clamp of β̂.
        min_tail_points: lower bound on the tail size ``k_tail = clip(max(min_tail_points, round(tail_frac·K)),
            10, K)`` over an anchor's K negatives; an integer ≥ 1.
        tail_frac: fraction of the K negatives in the tail, in (0, 1].
        burn: leading tail points dropped before the fits, an integer ≥ 0; ``None`` = ``max(1, k_tail // 20)``.
        q: quantile of the hardness ρ over all anchors of the global batch that defines ρ_0, in [0, 1].
        kappa_rho: slope κ_ρ > 0 of the hardness gate ``σ(κ_ρ·(log ρ_0 − log ρ_i))``.
        kappa_aic: slope κ_aic > 0 of the tail-shape gate ``σ(κ_aic·(ΔAIC_i − m))``.
        margin: ΔAIC margin m of the tail-shape gate, any finite number.
        eps: floor of the shortfall ``δ = max(1 − s, eps)`` and clamp ``s ≤ 1 − eps`` inside the log, in
            (0, 0.1].
        fixed_lambda: ``None`` (λ_i from the statistics) or a value in [0, 1] used as λ_i for every anchor
            (ablations; 0 is InfoNCE); the statistics are still computed and reported.

    The defaults, each written once in its field below, are the paper's (SimCSE's τ for the temperature).

    Example:
        >>> cfg = WeinceConfig(beta_mode="hill", q=0.3)
        >>> dataclasses.replace(cfg, kappa_rho=20.0).kappa_rho
        20.0
    """

    temperature: float = temperature_field()
    beta_mode: BetaMode = field(
        default="ols",
        metadata=checks.setting(
            checks.one_of(BETA_MODES),
            "β_i of the shortfall logit: unit (β = 1, the released code), ols (clamped Weibull-line slope, the "
            "paper) or hill (clamped Hill estimate).",
        ),
    )
    beta_min: float = field(
        default=0.5, metadata=checks.setting(_BETA_CLAMP, "Lower clamp of β̂ (ols, hill): 0 < beta_min <= beta_max.")
    )
    beta_max: float = field(
        default=16.0, metadata=checks.setting(_BETA_CLAMP, "Upper clamp of β̂ (ols, hill): beta_max >= beta_min.")
    )
    min_tail_points: int = field(
        default=32,
        metadata=checks.setting(
            _integer_at_least_one, "Lower bound (>= 1) on the tail size; the tail also has at least 10 points."
        ),
    )
    tail_frac: float = field(
        default=0.10,
        metadata=checks.setting(_HALF_OPEN_UNIT, "Fraction of an anchor's negatives in its tail, in (0, 1]."),
    )
    burn: int | None = field(
        default=None,
        metadata=checks.setting(
            checks.optional(checks.integer_at_least(0), "None (automatic)"),
            "Leading tail points dropped before the fits, >= 0; None = automatic, max(1, k_tail // 20).",
        ),
    )
    q: float = field(
        default=0.2,
        metadata=checks.setting(
            _unit_interval, "Quantile of the hardness ρ over the global batch that defines ρ_0, in [0, 1]."
        ),
    )
    kappa_rho: float = field(
        default=10.0, metadata=checks.setting(checks.positive, "Slope κ_ρ > 0 of the hardness gate of λ.")
    )
    kappa_aic: float = field(
        default=1.0, metadata=checks.setting(checks.positive, "Slope κ_aic > 0 of the tail-shape (ΔAIC) gate of λ.")
    )
    margin: float = field(
        default=2.0, metadata=checks.setting(checks.finite, "ΔAIC margin m of the tail-shape gate (a finite number).")
    )
    eps: float = field(
        default=1e-6,
        metadata=checks.setting(_EPS_RANGE, "Shortfall floor and clamp of the scores below 1, in (0, 0.1]."),
    )
    fixed_lambda: float | None = field(
        default=None,
        metadata=checks.setting(
            checks.optional(_unit_interval),
            "A λ in [0, 1] used for every anchor instead of the statistics' (ablation; 0 is InfoNCE); None = off.",
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)

    @property
    def beta_clamp(self) -> tuple[float, float]:
        """``(beta_min, beta_max)``."""
        return (self.beta_min, self.beta_max)


class WeinceLoss(ContrastiveLoss):
    r"""WEINCE: InfoNCE logits blended per anchor with an endpoint "shortfall" logit.

    For anchor i and candidate j, with float32 cosine similarities ``s_ij`` and score cap ``x_F = 1``:

    .. math::
        \ell_{ij} = (1 - \lambda_i)\,\frac{s_{ij}}{\tau}
                    + \lambda_i\,\bigl(-\beta_i \log(1 - \min(s_{ij}, 1 - \epsilon))\bigr)

    and the loss is the mean cross-entropy of each anchor's positive against its positive and negatives.

    Supervised layout (``forward(anchors, positives, negatives=...)``, ``docs/algorithm.md`` §1): the candidates
    of anchor z_i are the positives of all B rows followed by the hard negatives of all B rows, one block of B per
    negative column (S is B×(1+k)B); its positive is column i and its K = (1+k)B − 1 negatives are all the
    other columns, its own hard negatives included. SimCSE's ``hard_negative_weight`` w is then added to
    the *final* logit of anchor i's own hard negatives, after the blend: ``ℓ_ij + w`` for j = c·B + i.

    Per-anchor statistics (:mod:`simcse_weince.losses.stats`), from the ``k_tail =
    clip(max(min_tail_points, round(tail_frac·K)), 10, K)`` hardest of the anchor's K negatives, with
    shortfalls ``δ = max(1 − s, eps)`` sorted ascending:

    * hardness ``ρ_i = δ_(1)``, one minus the hardest negative score, and ``ρ_0`` the q-quantile of ρ over
      all anchors of the global batch;
    * after dropping ``burn`` points, least squares on ``x_k = log δ_(k)`` with ``F_k = k / (k_tail + 1)``:
      Weibull line ``log F_k ≈ a + β·x_k`` and Gumbel proxy ``log(−log F_k) ≈ b + γ·x_k``;
      ``AIC = n·log(SSE/n) + 4`` and ``ΔAIC_i = AIC_G − AIC_W`` (> 0 favours the Weibull geometry);
    * ``λ_i = σ(κ_ρ (log ρ_0 − log ρ_i)) · σ(κ_aic (ΔAIC_i − m))``;
    * ``β_i`` is 1 (``"unit"``, the authors' released code), the Weibull-line slope clamped to
      [β_min, β_max] (``"ols"``, the paper's formula) or the clamped Hill estimate
      ``k / Σ_{j≤k} log(δ_(k+1) / δ_(j))`` with ``k = k_tail − 1`` (``"hill"``).

    Stop-gradient quantities: λ_i, β_i, ρ_i, ρ_0 and ΔAIC_i are computed under ``no_grad`` from the
    detached scores (the paper's stop-gradient); gradients flow only through ``s_ij`` in the logits. The
    statistics read the unweighted scores ``s`` over all K negatives (w never enters them).

    λ = 0 is InfoNCE: with ``λ_i ≡ 0`` the logits are exactly ``s_ij / τ`` and the loss equals
    :class:`InfoNCELoss` to float rounding. The same happens automatically when a batch is too small for
    the tail fits (fewer than 2 points after the burn).

    References:
        Erol et al., "When Softmax Fails at the Top: Extreme-Value Corrections for InfoNCE", ICML 2026
        (arXiv 2606.00262).

    Args:
        temperature: τ > 0; overrides ``config.temperature`` when given.
        layout: ``"simcse"`` (B×B, or B×(1+k)B with ``negatives``) or ``"ntxent"`` (2N views).
        config: the knobs (:class:`WeinceConfig`, which documents each one's
            meaning, default and range); ``None`` = ``WeinceConfig()``.
        gather_across_devices: score local anchors against all processes' candidates (every candidate block,
            hard negatives included); every statistic, ρ_0 included, then equals the single-process value on
            the global batch.
        hard_negative_weight: SimCSE's w on each anchor's own hard negatives (supervised layout), a finite
            number; 0 (default, SimCSE's recipe) adds nothing. Must be 0 for ``"ntxent"``.
        beta_clamp: ``(beta_min, beta_max)``, the pair under one name (as in :meth:`get_config_dict`).
        **knobs: any :class:`WeinceConfig` field (``beta_mode``, ``q``, ``kappa_rho``, ...), overriding
            ``config``'s value.

    The knobs are read-only attributes (``loss.q``, ``loss.beta_mode``, ``loss.beta_clamp``, ...) reading
    ``loss.config``.

    Raises:
        ValueError: on an argument outside its range (at construction), or a batch of fewer than 2 rows.
        TypeError: an unknown knob, or ``beta_clamp`` together with ``beta_min`` / ``beta_max``.

    Example:
        >>> loss = WeinceLoss(temperature=0.05, beta_mode="ols")
        >>> value = loss(torch.randn(64, 32), torch.randn(64, 32))
        >>> loss.last_diagnostics["lambda_mean"]  # a 0-d tensor, no host sync in the loss
        >>> # Supervised SimCSE triplets (anchor, positive, hard negative): S is 64 × 128, K = 127.
        >>> supervised = WeinceLoss(temperature=0.05, hard_negative_weight=0.0)
        >>> value = supervised(torch.randn(64, 32), torch.randn(64, 32), negatives=[torch.randn(64, 32)])
    """

    name = "weince"
    display_name = "WEINCE"
    Config = WeinceConfig
    diagnostic_keys = ("lambda_mean", "lambda_frac_gt_half", "beta_mean", "rho_mean", "delta_aic_mean")

    def __init__(
        self,
        temperature: float | None = None,
        layout: Layout = "simcse",
        *,
        config: WeinceConfig | None = None,
        gather_across_devices: bool = False,
        hard_negative_weight: float = 0.0,
        beta_clamp: tuple[float, float] | None = None,
        **knobs: Any,
    ) -> None:
        if temperature is not None:
            knobs["temperature"] = temperature
        if beta_clamp is not None:
            if {"beta_min", "beta_max"} & knobs.keys():
                raise TypeError("give beta_clamp or beta_min / beta_max, not both")
            knobs["beta_min"], knobs["beta_max"] = beta_clamp
        config = dataclasses.replace(config or WeinceConfig(), **knobs)  # validates; unknown knob: TypeError
        super().__init__(config.temperature, layout, gather_across_devices, hard_negative_weight)
        self._config = config
        self.last_statistics: AnchorStatistics | None = None

    @classmethod
    def from_config(cls, config: WeinceConfig, **common: Any) -> WeinceLoss:
        return cls(config=config, **common)

    @classmethod
    def run_summary(cls, log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The run's λ curve (step, mean λ of the log) and the means over the training logs of λ, the share of
        λ > 0.5, ΔAIC, ρ and β (``None`` where no log carries them)."""
        curve = [(e["step"], e["lambda_mean"]) for e in log_history if "lambda_mean" in e]

        def mean(key: str) -> float | None:
            values = [e[key] for e in log_history if key in e]
            return sum(values) / len(values) if values else None

        return {
            "mean_lambda": sum(v for _, v in curve) / len(curve) if curve else None,
            "mean_lambda_frac_gt_half": mean("lambda_frac_gt_half"),
            "lambda_curve": curve,
            **{f"mean_{key}": mean(f"{key}_mean") for key in ("delta_aic", "rho", "beta")},
        }

    def histograms(self) -> dict[str, torch.Tensor]:
        """λ and β of the last batch's anchors."""
        stats = self.last_statistics
        return {} if stats is None else {"weince/lambda": stats.lam, "weince/beta": stats.beta}

    @property
    def config(self) -> WeinceConfig:
        """The loss's settings (frozen; build a new loss to change them)."""
        return self._config

    @property
    def beta_clamp(self) -> tuple[float, float]:
        """``(beta_min, beta_max)``."""
        return self._config.beta_clamp

    def get_config_dict(self) -> dict[str, Any]:
        out = super().get_config_dict()
        for name, value in dataclasses.asdict(self._config).items():
            if name == "beta_min":
                out["beta_clamp"] = list(self.beta_clamp)  # the pair under one key, as the constructor takes it
            elif name not in out and name != "beta_max":
                out[name] = value
        return out

    def statistics(self, lay: ScoreMatrix) -> AnchorStatistics:
        """Stop-gradient per-anchor statistics of a :class:`ScoreMatrix` (:func:`anchor_statistics`)."""
        with torch.no_grad():
            # Non-negatives (positive, self) never enter the tail; masked negatives count as s = -1.
            stat_scores = lay.scores.detach().masked_fill(lay.user_mask, -1.0)
            stat_scores = stat_scores.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))
            gather_rho = all_gather_no_grad if self.gather_across_devices else None
            stats = anchor_statistics(stat_scores, lay.num_negatives, self._config, gather_rho)
            if self._config.fixed_lambda is not None:
                stats = stats._replace(lam=torch.full_like(stats.lam, self._config.fixed_lambda))
        return stats

    def logits(self, scores: torch.Tensor, stats: AnchorStatistics) -> torch.Tensor:
        """(A, C) blended logits ``(1 − λ) s/τ + λ·(−β log(1 − s))`` with detached λ, β."""
        lam = stats.lam.detach()[:, None]  # stop-gradient (paper): λ_i is not trained
        beta = stats.beta.detach()[:, None]  # stop-gradient (paper): β_i is not trained
        return weince_logits(scores, lam, beta, self._config.temperature, self._config.eps)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        """Mean cross-entropy of the blended logits (plus w on each anchor's own hard negatives, after the
        blend); the batch's statistics are kept in ``last_statistics`` and summarised (0-d tensors, no host
        sync) in ``last_diagnostics``."""
        stats = self.statistics(lay)  # from the unweighted scores
        self.last_statistics = stats
        self.last_diagnostics = diagnostics(stats)
        return masked_cross_entropy(self.logits(lay.scores, stats), lay, self.hard_negative_weight)

    @property
    def citation(self) -> str:
        return """@inproceedings{erol2026weince,
  title={When Softmax Fails at the Top: Extreme-Value Corrections for InfoNCE},
  author={Erol and Evren and Ozel and Morgan and Ryu and Zheng},
  booktitle={International Conference on Machine Learning (ICML)},
  year={2026},
  note={arXiv:2606.00262}
}"""


def _config_view(name: str) -> property:
    return property(lambda self: getattr(self._config, name), doc=f"``config.{name}`` (read-only).")


# loss.temperature, loss.q, loss.beta_mode, ...: read-only views of loss.config, so they cannot disagree with it.
for _field in dataclasses.fields(WeinceConfig):
    setattr(WeinceLoss, _field.name, _config_view(_field.name))


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
