"""The loss knobs, each written once: its default, its range and its help text.

:class:`WeinceConfig` is the single owner of WEINCE's settings and :class:`TopMConfig` of those of the authors'
extra top-M terms. :class:`~simcse_weince.losses.weince.WeinceLoss` takes one of each,
:func:`~simcse_weince.losses.stats.anchor_statistics` reads the first, and the training arguments
(``LossArguments``) and the ``simcse-diagnose`` flags are derived from their fields, so a default, a range or a
help text is changed here and nowhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any, Literal, get_args

from simcse_weince import checks

BetaMode = Literal["unit", "ols", "hill"]
BETA_MODES: tuple[str, ...] = get_args(BetaMode)

_unit_interval = checks.within(0, 1)
_integer_at_least_one = checks.integer_at_least(1)
_HALF_OPEN_UNIT = checks.within(0, 1, open_low=True)
_EPS_RANGE = checks.within(0, 0.1, open_low=True)
# beta_min and beta_max are one constraint on the pair, reported under the loss's historic name.
_BETA_CLAMP = checks.ordered("beta_min", "beta_max", "beta_clamp")


def knob(check: checks.Check, help: str) -> dict[str, Any]:
    """A config field's metadata: its range check and ``--help`` text (:func:`~simcse_weince.checks.setting`)."""
    return checks.setting(check, help)


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

    temperature: float = field(default=0.05, metadata=knob(checks.positive, "τ > 0 dividing the cosine similarities."))
    beta_mode: BetaMode = field(
        default="ols",
        metadata=knob(
            checks.one_of(BETA_MODES),
            "β_i of the shortfall logit: unit (β = 1, the released code), ols (clamped Weibull-line slope, the "
            "paper) or hill (clamped Hill estimate).",
        ),
    )
    beta_min: float = field(
        default=0.5, metadata=knob(_BETA_CLAMP, "Lower clamp of β̂ (ols, hill): 0 < beta_min <= beta_max.")
    )
    beta_max: float = field(
        default=16.0, metadata=knob(_BETA_CLAMP, "Upper clamp of β̂ (ols, hill): beta_max >= beta_min.")
    )
    min_tail_points: int = field(
        default=32,
        metadata=knob(
            _integer_at_least_one, "Lower bound (>= 1) on the tail size; the tail also has at least 10 points."
        ),
    )
    tail_frac: float = field(
        default=0.10,
        metadata=knob(_HALF_OPEN_UNIT, "Fraction of an anchor's negatives in its tail, in (0, 1]."),
    )
    burn: int | None = field(
        default=None,
        metadata=knob(
            checks.optional(checks.integer_at_least(0), "None (automatic)"),
            "Leading tail points dropped before the fits, >= 0; None = automatic, max(1, k_tail // 20).",
        ),
    )
    q: float = field(
        default=0.2,
        metadata=knob(_unit_interval, "Quantile of the hardness ρ over the global batch that defines ρ_0, in [0, 1]."),
    )
    kappa_rho: float = field(default=10.0, metadata=knob(checks.positive, "Slope κ_ρ > 0 of the hardness gate of λ."))
    kappa_aic: float = field(
        default=1.0, metadata=knob(checks.positive, "Slope κ_aic > 0 of the tail-shape (ΔAIC) gate of λ.")
    )
    margin: float = field(
        default=2.0, metadata=knob(checks.finite, "ΔAIC margin m of the tail-shape gate (a finite number).")
    )
    eps: float = field(
        default=1e-6,
        metadata=knob(_EPS_RANGE, "Shortfall floor and clamp of the scores below 1, in (0, 0.1]."),
    )
    fixed_lambda: float | None = field(
        default=None,
        metadata=knob(
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


# ---- the authors' extra top-M terms ------------------------------------------------------------------------
def _real_and(check: checks.Check) -> checks.Check:
    """A number (not a bool, not a string) that ``check`` accepts (the top-M knobs come from YAML mappings)."""
    return checks.all_of(checks.real, check)


_WEIGHT = checks.non_negative(" (0 = off)")
_COUNT = _real_and(_integer_at_least_one)
_TOPM_CLAMP = _real_and(
    checks.ordered("topm_beta_min", "topm_beta_max", "topm_beta_min and topm_beta_max", bounded=True)
)
_FRACTION = _real_and(_HALF_OPEN_UNIT)
_MOMENTUM = _real_and(checks.within(0, 1, open_high=True))
_UNIT = _real_and(_unit_interval)


@dataclasses.dataclass(frozen=True)
class TopMConfig:
    r"""The knobs of the WEINCE authors' two extra top-M terms (:mod:`~simcse_weince.losses.topm`, which states
    their math), validated at construction (``ValueError`` naming the value and its range).

    Every field is prefixed ``topm_`` so that this config and :class:`WeinceConfig` never share a name. The
    defaults are the authors' settings of the paper's runs, except the two weights, which are 0 (off).

    Attributes:
        topm_softmax_weight: w_sm ≥ 0 of the top-M softmax cross-entropy (the authors' ``pl_lambda``); 0 = off.
        topm_softmax_m: M of that term (``pl_top_m``), an integer ≥ 1 (at most the anchor's negatives are used).
        topm_weibit_weight: w_wb ≥ 0 of the top-M Weibit cross-entropy (``weib_lambda``); 0 = off.
        topm_weibit_m: M of that term (``weib_top_m``).
        topm_beta_auto: β_t from the global tail fit with the R² gate and the running mean (``auto_weib_beta``);
            false = ``topm_beta_init`` throughout.
        topm_beta_init: the first (or fixed) β_t > 0 (``weib_beta``).
        topm_beta_min: lower clamp of β̂ before the running mean.
        topm_beta_max: upper clamp of β̂.
        topm_tail_frac: share of all the batch's negatives in the global tail, in (0, 1] (``tail_frac``).
        topm_min_tail_points: lower bound on the global tail size (``min_tail_points``).
        topm_beta_momentum: m of the running mean, in [0, 1) (``beta_ema_momentum``).
        topm_r2_min: the R² a fit needs to move β_t, in [0, 1] (``r2_min``).

    Example:
        >>> TopMConfig(topm_softmax_weight=0.5, topm_weibit_weight=0.5).active
        True
        >>> TopMConfig().active  # the default: no extra term
        False
    """

    topm_softmax_weight: float = field(
        default=0.0, metadata=knob(_WEIGHT, "Weight of the top-M softmax cross-entropy (authors' pl_lambda); 0 = off.")
    )
    topm_softmax_m: int = field(
        default=50, metadata=knob(_COUNT, "M of the top-M softmax term: the M hardest negatives of each anchor.")
    )
    topm_weibit_weight: float = field(
        default=0.0, metadata=knob(_WEIGHT, "Weight of the top-M Weibit cross-entropy (authors' weib_lambda); 0 = off.")
    )
    topm_weibit_m: int = field(
        default=50, metadata=knob(_COUNT, "M of the top-M Weibit term: the M hardest negatives of each anchor.")
    )
    topm_beta_auto: bool = field(
        default=True,
        metadata=knob(
            checks.boolean,
            "Weibit term's β from the batch's global tail fit (R² gate, running mean); false = beta_init.",
        ),
    )
    topm_beta_init: float = field(
        default=4.0, metadata=knob(checks.positive_finite, "First (or, without auto, fixed) β of the Weibit term, > 0.")
    )
    topm_beta_min: float = field(default=0.5, metadata=knob(_TOPM_CLAMP, "Lower clamp of the Weibit term's β̂, > 0."))
    topm_beta_max: float = field(default=16.0, metadata=knob(_TOPM_CLAMP, "Upper clamp of the Weibit term's β̂."))
    topm_tail_frac: float = field(
        default=0.05,
        metadata=knob(
            _FRACTION,
            "Share of all the batch's negatives in the global tail, in (0, 1].",
        ),
    )
    topm_min_tail_points: int = field(
        default=1024, metadata=knob(_COUNT, "Lower bound (>= 1) on the size of the global tail.")
    )
    topm_beta_momentum: float = field(
        default=0.9,
        metadata=knob(_MOMENTUM, "Momentum m of the Weibit term's running β, in [0, 1)."),
    )
    topm_r2_min: float = field(default=0.85, metadata=knob(_UNIT, "R² a tail fit needs to move β, in [0, 1]."))

    def __post_init__(self) -> None:
        checks.check_fields(self)

    @property
    def active(self) -> bool:
        """Whether any term has a weight (a config without one adds nothing and is left out of cards)."""
        return self.topm_softmax_weight > 0 or self.topm_weibit_weight > 0
