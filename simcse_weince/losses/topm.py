r"""The WEINCE authors' two extra hard-negative terms, as an explicit ablation (off by default).

The paper's vision runs (``slurm/submit_cifar100_r18_weince.slurm`` of ``hsme98/weince``) add to the WEINCE loss

.. math::
    \mathcal{L} = \mathcal{L}_{\text{main}} + w_{\text{sm}}\,\mathcal{L}_{\text{sm}}^{(M)}
                  + w_{\text{wb}}\,\mathcal{L}_{\text{wb}}^{(M)}

where, for each anchor i with positive score ``s_i⁺`` and its M hardest negatives ``s_i,(1) ≥ … ≥ s_i,(M)``
(the M largest scores among its negatives), both terms are the mean over anchors of a cross-entropy over the
1 + M candidates ``[positive | M hardest negatives]``:

* top-M softmax: logits ``s/τ`` (the flags ``--use_pl_topm --pl_lambda --pl_top_m``);
* top-M Weibit: logits ``−β_t·log(1 − min(s, 1 − ε))`` with one β_t per batch (``--use_weib_topm
  --weib_lambda --weib_top_m``).

β_t (``--auto_weib_beta``) comes from the *global* negative tail of the batch, every negative score of every
anchor pooled: the ``k_tail = min(K_tot, int(max(min_tail_points, tail_frac·K_tot)))`` smallest shortfalls
``δ = max(1 − s, ε)`` sorted ascending, levels ``F_k = k / (k_tail + 1)``, the first ``max(1, k_tail // 20)``
dropped, and least squares ``log F_k ≈ a + β·log δ_(k)``: ``β̂ = max(slope, 0)`` with its ``R²`` (clamped to
[0, 1]). A fit with ``R² ≥ r2_min`` and ``β̂ > 0`` moves the running value,
``β_t = m·β_{t−1} + (1 − m)·clip(β̂, β_min, β_max)``; any other batch keeps ``β_t = β_{t−1}``; the first value
is ``beta_init``. Without ``auto`` β_t is ``beta_init`` throughout. The fit is under ``no_grad`` (β_t is not
trained), in float64, and runs only in a forward with gradient enabled (a training step); an evaluation uses the
current β_t and leaves it.

:class:`TopMConfig` owns the knobs (default, range, help text), as :class:`~simcse_weince.losses.weince.WeinceConfig`
does WEINCE's; the training arguments are generated from both. :class:`~simcse_weince.losses.base.WithTopMTerms`
adds the terms to any loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from simcse_weince.core import checks
from simcse_weince.losses.distributed import all_gather_no_grad, rank_and_world_size
from simcse_weince.losses.layout import ScoreMatrix
from simcse_weince.losses.logits import shortfall
from simcse_weince.losses.stats import burn_size, ols_slope_and_sse


def _real_and(check: checks.Check) -> checks.Check:
    """A number (not a bool, not a string) that ``check`` accepts (the top-M knobs come from YAML mappings)."""
    return checks.all_of(checks.real, check)


_WEIGHT = checks.non_negative(" (0 = off)")
_COUNT = _real_and(checks.integer_at_least(1))
_TOPM_CLAMP = _real_and(
    checks.ordered("topm_beta_min", "topm_beta_max", "topm_beta_min and topm_beta_max", bounded=True)
)
_FRACTION = _real_and(checks.within(0, 1, open_low=True))
_MOMENTUM = _real_and(checks.within(0, 1, open_high=True))
_UNIT = _real_and(checks.within(0, 1))


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
        default=0.0,
        metadata=checks.setting(_WEIGHT, "Weight of the top-M softmax cross-entropy (authors' pl_lambda); 0 = off."),
    )
    topm_softmax_m: int = field(
        default=50,
        metadata=checks.setting(_COUNT, "M of the top-M softmax term: the M hardest negatives of each anchor."),
    )
    topm_weibit_weight: float = field(
        default=0.0,
        metadata=checks.setting(_WEIGHT, "Weight of the top-M Weibit cross-entropy (authors' weib_lambda); 0 = off."),
    )
    topm_weibit_m: int = field(
        default=50,
        metadata=checks.setting(_COUNT, "M of the top-M Weibit term: the M hardest negatives of each anchor."),
    )
    topm_beta_auto: bool = field(
        default=True,
        metadata=checks.setting(
            checks.boolean,
            "Weibit term's β from the batch's global tail fit (R² gate, running mean); false = beta_init.",
        ),
    )
    topm_beta_init: float = field(
        default=4.0,
        metadata=checks.setting(checks.positive_finite, "First (or, without auto, fixed) β of the Weibit term, > 0."),
    )
    topm_beta_min: float = field(
        default=0.5, metadata=checks.setting(_TOPM_CLAMP, "Lower clamp of the Weibit term's β̂, > 0.")
    )
    topm_beta_max: float = field(
        default=16.0, metadata=checks.setting(_TOPM_CLAMP, "Upper clamp of the Weibit term's β̂.")
    )
    topm_tail_frac: float = field(
        default=0.05,
        metadata=checks.setting(
            _FRACTION,
            "Share of all the batch's negatives in the global tail, in (0, 1].",
        ),
    )
    topm_min_tail_points: int = field(
        default=1024, metadata=checks.setting(_COUNT, "Lower bound (>= 1) on the size of the global tail.")
    )
    topm_beta_momentum: float = field(
        default=0.9,
        metadata=checks.setting(_MOMENTUM, "Momentum m of the Weibit term's running β, in [0, 1)."),
    )
    topm_r2_min: float = field(
        default=0.85, metadata=checks.setting(_UNIT, "R² a tail fit needs to move β, in [0, 1].")
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)

    @property
    def active(self) -> bool:
        """Whether any term has a weight (a config without one adds nothing and is left out of cards)."""
        return self.topm_softmax_weight > 0 or self.topm_weibit_weight > 0


EPS = 1e-6  # the shortfall floor and the score cap 1 − ε of the Weibit logits (the authors' eps)
MIN_TAIL = 10  # fewer tail points than this: no fit, β_t is kept (the authors' guard)


class TailFit(NamedTuple):
    """The global tail fit of one batch, 0-d float64 tensors."""

    beta_hat: torch.Tensor  # max(slope, 0)
    r2: torch.Tensor  # in [0, 1]; 0 when there was no fit
    rho: torch.Tensor  # the smallest shortfall of the batch


def global_tail_size(total_negatives: int, min_tail_points: int, tail_frac: float) -> int:
    """``min(K_tot, int(max(min_tail_points, tail_frac·K_tot)))``, the authors' tail size (``int`` truncates)."""
    return min(int(max(min_tail_points, tail_frac * total_negatives)), total_negatives)


@torch.no_grad()
def global_tail_fit(
    stat_scores: torch.Tensor,
    total_negatives: int,
    config: TopMConfig,
    gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> TailFit | None:
    """The Weibull-line fit of the batch's pooled negative tail (module docstring).

    Args:
        stat_scores: (A, C) detached scores, ``-inf`` at non-negatives (positive, self, absent) and ``-1`` at
            masked negatives, so that exactly the anchor's K negatives of each row are finite.
        total_negatives: K_tot, the negatives of all anchors of the global batch.
        config: the tail size and the clamp.
        gather: maps this process's candidate shortfalls (n,) to all processes' (world·n,), for a global fit.

    Returns:
        :class:`TailFit`, or ``None`` when the tail has fewer than 10 points or fewer than 2 after the burn.
    """
    k_tail = global_tail_size(total_negatives, config.topm_min_tail_points, config.topm_tail_frac)
    if k_tail < MIN_TAIL:
        return None
    flat = stat_scores.reshape(-1)
    # Each process's k_tail smallest shortfalls hold the global k_tail smallest (ties aside, equal values).
    local = (1.0 - flat.topk(min(k_tail, flat.numel())).values.double()).clamp_min(EPS)
    pooled = gather(local) if gather is not None else local
    delta = pooled.topk(k_tail, largest=False).values.sort().values  # ascending
    burn = burn_size(k_tail)
    if k_tail - burn < 2:
        return None
    levels = torch.arange(1, k_tail + 1, dtype=torch.float64, device=delta.device) / (k_tail + 1.0)
    y = levels[burn:].log()
    slope, sse = ols_slope_and_sse(delta[None, burn:].log(), y)  # the per-anchor fits' least squares, one row
    r2 = (1.0 - sse[0] / ((y - y.mean()) ** 2).sum().clamp_min(1e-12)).clamp(0.0, 1.0)
    return TailFit(slope[0].clamp_min(0.0), r2, delta[0])


def top_m_hardest(lay: ScoreMatrix, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each anchor's positive score (A, 1) and its ``min(m, K)`` largest negative scores (A, m'), with
    gradient; rows with fewer valid negatives (masked, absent) are padded with ``-inf``, which the softmax
    ignores."""
    negatives = lay.scores.masked_fill(lay.excluded | lay.positive_mask, float("-inf"))
    top = negatives.topk(min(m, lay.num_negatives), dim=1).values
    return lay.scores.gather(1, lay.positive_index[:, None]), top


def weibit(scores: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
    """The Weibit logit ``−β·log(1 − min(s, 1 − ε))`` (``-inf`` stays ``-inf``)."""
    return beta * shortfall(scores, EPS)


def top_m_cross_entropy(positive: torch.Tensor, hardest: torch.Tensor) -> torch.Tensor:
    """Mean over anchors of ``−log softmax`` of column 0 among ``[positive | hardest]`` logits."""
    logits = torch.cat([positive, hardest], dim=1)
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


class TopMTerms(nn.Module):
    """The two terms of one loss, with the Weibit term's running β_t as a buffer (``beta_t``, saved with
    checkpoints through the loss's ``state_dict``).

    In a process group β_t is one value for all processes, with or without gathered candidates: the fit pools the
    tails of every process (each contributes its k_tail smallest shortfalls), so a resume from any process's
    checkpoint is exact.
    """

    def __init__(self, config: TopMConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("beta_t", torch.tensor(config.topm_beta_init, dtype=torch.float64))
        self.last_fit: TailFit | None = None

    @torch.no_grad()
    def batch_beta(self, lay: ScoreMatrix) -> torch.Tensor:
        """β_t after this batch's fit (module docstring): the running value moved by a trusted fit, else kept."""
        cfg = self.config
        self.last_fit = None
        if not cfg.topm_beta_auto:
            return self.beta_t
        stat = lay.scores.detach().masked_fill(lay.user_mask, -1.0)
        stat = stat.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))
        world = rank_and_world_size()[1]  # every process holds as many anchors, each with K negatives
        gather = all_gather_no_grad if world > 1 else None
        fit = global_tail_fit(stat, world * lay.scores.shape[0] * lay.num_negatives, cfg, gather)
        self.last_fit = fit
        if fit is None:
            return self.beta_t
        moved = cfg.topm_beta_momentum * self.beta_t + (1.0 - cfg.topm_beta_momentum) * fit.beta_hat.clamp(
            cfg.topm_beta_min, cfg.topm_beta_max
        )
        trusted = (fit.r2 >= cfg.topm_r2_min) & (fit.beta_hat > 0)
        return torch.where(trusted, moved, self.beta_t)

    def forward(self, lay: ScoreMatrix, temperature: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The weighted sum of the active terms and their diagnostics (0-d detached tensors).

        With gradient enabled (a training step) the Weibit term's β_t moves with this batch's fit first; without
        (an evaluation) the current β_t is used and kept.
        """
        cfg = self.config
        total = lay.scores.new_zeros(())
        diagnostics: dict[str, torch.Tensor] = {}
        if cfg.topm_softmax_weight > 0:
            positive, hardest = top_m_hardest(lay, cfg.topm_softmax_m)
            term = top_m_cross_entropy(positive / temperature, hardest / temperature)
            total = total + cfg.topm_softmax_weight * term
            diagnostics["topm_softmax_loss"] = term.detach()
        if cfg.topm_weibit_weight > 0:
            if self.beta_t.device != lay.scores.device:  # the loss is no submodule of the model: follow the scores
                self.beta_t = self.beta_t.to(lay.scores.device)
            if torch.is_grad_enabled():
                self.beta_t.copy_(self.batch_beta(lay))
            else:
                self.last_fit = None
            beta = self.beta_t.clone()
            positive, hardest = top_m_hardest(lay, cfg.topm_weibit_m)
            b = beta.to(lay.scores.dtype)
            term = top_m_cross_entropy(weibit(positive, b), weibit(hardest, b))
            total = total + cfg.topm_weibit_weight * term
            diagnostics["topm_weibit_loss"] = term.detach()
            diagnostics["topm_beta"] = beta.detach().float()
            if cfg.topm_beta_auto and torch.is_grad_enabled():  # every training step reports its fit (0: none)
                fit = self.last_fit
                zero = lay.scores.new_zeros(())
                diagnostics["topm_beta_hat"] = fit.beta_hat.float() if fit is not None else zero
                diagnostics["topm_r2"] = fit.r2.float() if fit is not None else zero
        return total, diagnostics
