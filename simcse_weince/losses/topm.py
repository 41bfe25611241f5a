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

:class:`TopMConfig` owns the knobs (default, range, help text), as :class:`~simcse_weince.losses.config.WeinceConfig`
does WEINCE's; the training arguments are generated from both. Every field is prefixed ``topm_`` so that the two
configs never share a name. The defaults are the authors' settings of the paper's runs, except the two weights,
which are 0 (off).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import field
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from simcse_weince.losses.config import knob
from simcse_weince.losses.distributed import all_gather_no_grad
from simcse_weince.losses.layout import ScoreMatrix

EPS = 1e-6  # the shortfall floor and the score cap 1 − ε of the Weibit logits (the authors' eps)
MIN_TAIL = 10  # fewer tail points than this: no fit, β_t is kept (the authors' guard)


def _weight(name: str, value: Any, cfg: TopMConfig) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0 (0 = off), got {value!r}")


def _count(name: str, value: Any, cfg: TopMConfig) -> None:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _positive_finite(name: str, value: Any, cfg: TopMConfig) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _clamp(name: str, value: Any, cfg: TopMConfig) -> None:
    if not 0 < cfg.topm_beta_min <= cfg.topm_beta_max < math.inf:
        raise ValueError(
            f"topm_beta_min and topm_beta_max must satisfy 0 < topm_beta_min <= topm_beta_max < inf, got "
            f"{(cfg.topm_beta_min, cfg.topm_beta_max)!r}"
        )


def _fraction(name: str, value: Any, cfg: TopMConfig) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")


def _unit(name: str, value: Any, cfg: TopMConfig) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


def _momentum(name: str, value: Any, cfg: TopMConfig) -> None:
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def _boolean(name: str, value: Any, cfg: TopMConfig) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


@dataclasses.dataclass(frozen=True)
class TopMConfig:
    r"""The two extra terms' knobs, validated at construction (``ValueError`` naming the value and its range).

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
        default=0.0, metadata=knob(_weight, "Weight of the top-M softmax cross-entropy (authors' pl_lambda); 0 = off.")
    )
    topm_softmax_m: int = field(
        default=50, metadata=knob(_count, "M of the top-M softmax term: the M hardest negatives of each anchor.")
    )
    topm_weibit_weight: float = field(
        default=0.0, metadata=knob(_weight, "Weight of the top-M Weibit cross-entropy (authors' weib_lambda); 0 = off.")
    )
    topm_weibit_m: int = field(
        default=50, metadata=knob(_count, "M of the top-M Weibit term: the M hardest negatives of each anchor.")
    )
    topm_beta_auto: bool = field(
        default=True,
        metadata=knob(
            _boolean, "Weibit term's β from the batch's global tail fit (R² gate, running mean); false = beta_init."
        ),
    )
    topm_beta_init: float = field(
        default=4.0, metadata=knob(_positive_finite, "First (or, without auto, fixed) β of the Weibit term, > 0.")
    )
    topm_beta_min: float = field(default=0.5, metadata=knob(_clamp, "Lower clamp of the Weibit term's β̂, > 0."))
    topm_beta_max: float = field(default=16.0, metadata=knob(_clamp, "Upper clamp of the Weibit term's β̂."))
    topm_tail_frac: float = field(
        default=0.05, metadata=knob(_fraction, "Share of all the batch's negatives in the global tail, in (0, 1].")
    )
    topm_min_tail_points: int = field(
        default=1024, metadata=knob(_count, "Lower bound (>= 1) on the size of the global tail.")
    )
    topm_beta_momentum: float = field(
        default=0.9, metadata=knob(_momentum, "Momentum m of the Weibit term's running β, in [0, 1).")
    )
    topm_r2_min: float = field(default=0.85, metadata=knob(_unit, "R² a tail fit needs to move β, in [0, 1]."))

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            f.metadata["check"](f.name, getattr(self, f.name), self)
        for name in ("topm_softmax_m", "topm_weibit_m", "topm_min_tail_points"):
            object.__setattr__(self, name, int(getattr(self, name)))
        for f in dataclasses.fields(self):
            if f.type in ("float", float):
                object.__setattr__(self, f.name, float(getattr(self, f.name)))

    @property
    def active(self) -> bool:
        """Whether any term has a weight (a config without one adds nothing and is left out of cards)."""
        return self.topm_softmax_weight > 0 or self.topm_weibit_weight > 0


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
    burn = max(1, k_tail // 20)
    if k_tail - burn < 2:
        return None
    levels = torch.arange(1, k_tail + 1, dtype=torch.float64, device=delta.device) / (k_tail + 1.0)
    x, y = delta[burn:].log(), levels[burn:].log()
    xc, yc = x - x.mean(), y - y.mean()
    slope = (xc * yc).sum() / (xc * xc).sum().clamp_min(1e-12)
    residual = yc - slope * xc
    r2 = (1.0 - (residual * residual).sum() / (yc * yc).sum().clamp_min(1e-12)).clamp(0.0, 1.0)
    return TailFit(slope.clamp_min(0.0), r2, delta[0])


def top_m_hardest(lay: ScoreMatrix, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each anchor's positive score (A, 1) and its ``min(m, K)`` largest negative scores (A, m'), with
    gradient; rows with fewer valid negatives (masked, absent) are padded with ``-inf``, which the softmax
    ignores."""
    negatives = lay.scores.masked_fill(lay.excluded | lay.positive_mask, float("-inf"))
    top = negatives.topk(min(m, lay.num_negatives), dim=1).values
    return lay.scores.gather(1, lay.positive_index[:, None]), top


def weibit(scores: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
    """The Weibit logit ``−β·log(1 − min(s, 1 − ε))`` (``-inf`` stays ``-inf``)."""
    return -beta * torch.log1p(-scores.clamp(max=1.0 - EPS))


def top_m_cross_entropy(positive: torch.Tensor, hardest: torch.Tensor) -> torch.Tensor:
    """Mean over anchors of ``−log softmax`` of column 0 among ``[positive | hardest]`` logits."""
    logits = torch.cat([positive, hardest], dim=1)
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


class TopMTerms(nn.Module):
    """The two terms of one loss, with the Weibit term's running β_t as a buffer (``beta_t``, saved with
    checkpoints through the loss's ``state_dict``)."""

    def __init__(self, config: TopMConfig, gather_across_devices: bool = False) -> None:
        super().__init__()
        self.config = config
        self.gather_across_devices = gather_across_devices
        self.register_buffer("beta_t", torch.tensor(config.topm_beta_init, dtype=torch.float64))
        self.last_fit: TailFit | None = None

    @torch.no_grad()
    def batch_beta(self, lay: ScoreMatrix, num_anchors_global: int) -> torch.Tensor:
        """β_t of this batch (module docstring); moves the running value in a forward with gradient."""
        cfg = self.config
        if not cfg.topm_beta_auto:
            return self.beta_t
        stat = lay.scores.detach().masked_fill(lay.user_mask, -1.0)
        stat = stat.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))
        gather = all_gather_no_grad if self.gather_across_devices else None
        fit = global_tail_fit(stat, num_anchors_global * lay.num_negatives, cfg, gather)
        self.last_fit = fit
        if fit is None:
            return self.beta_t
        moved = cfg.topm_beta_momentum * self.beta_t + (1.0 - cfg.topm_beta_momentum) * fit.beta_hat.clamp(
            cfg.topm_beta_min, cfg.topm_beta_max
        )
        trusted = (fit.r2 >= cfg.topm_r2_min) & (fit.beta_hat > 0)
        return torch.where(trusted, moved, self.beta_t.to(moved.device))

    def forward(self, lay: ScoreMatrix, temperature: float, world_size: int = 1) -> tuple[torch.Tensor, dict]:
        """The weighted sum of the active terms and their diagnostics (0-d detached tensors)."""
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
            if torch.is_grad_enabled():  # a training step: this batch's fit moves β_t
                with torch.no_grad():
                    self.beta_t.copy_(self.batch_beta(lay, world_size * lay.scores.shape[0]))
            else:  # an evaluation: the current β_t, unchanged
                self.last_fit = None
            beta = self.beta_t.clone()
            positive, hardest = top_m_hardest(lay, cfg.topm_weibit_m)
            b = beta.to(lay.scores.dtype)
            term = top_m_cross_entropy(weibit(positive, b), weibit(hardest, b))
            total = total + cfg.topm_weibit_weight * term
            diagnostics["topm_weibit_loss"] = term.detach()
            diagnostics["topm_beta"] = beta.detach().float()
            if self.last_fit is not None and cfg.topm_beta_auto:
                diagnostics["topm_beta_hat"] = self.last_fit.beta_hat.float()
                diagnostics["topm_r2"] = self.last_fit.r2.float()
        return total, diagnostics
