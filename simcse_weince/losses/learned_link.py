r"""The learned link: InfoNCE's likelihood with the link's two identified coefficients (a, b) trained with the
encoder."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import field
from typing import Any

import torch
from torch import nn

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy
from simcse_weince.losses.link import (
    a_cap,
    a_max_field,
    b_max_field,
    b_min_field,
    check_start,
    eps_field,
    link_logits,
    link_run_summary,
    temperature_field,
)
from simcse_weince.losses.logits import shortfall


@dataclasses.dataclass(frozen=True)
class LearnedLinkConfig:
    """The settings of the learned link: the start a = 1/τ, whether a is learned, the caps, the shortfall clamp."""

    temperature: float = temperature_field()
    link_learn_a: bool = field(
        default=True,
        metadata=checks.setting(
            checks.boolean,
            "Learn the slope a with b (true), or keep a = 1/temperature and learn b alone (false: the conservative "
            "arm, since a is confounded with the encoder's spread of cosines and b is not).",
        ),
    )
    link_a_max: float | None = a_max_field()
    link_b_min: float = b_min_field()
    link_b_max: float = b_max_field()
    eps: float = eps_field()

    def __post_init__(self) -> None:
        checks.check_fields(self)
        check_start(self.temperature, self.link_a_max, self.link_b_min, self.link_b_max)


class LearnedLinkLoss(ContrastiveLoss):
    r"""InfoNCE's likelihood under the link ``softmax_j(a·s_ij + b·u_ij)``, ``u = −log(1 − s)``, with (a, b) two
    global scalars of the loss trained with the encoder (as CLIP learns its logit scale and SigLIP its scale and
    bias).

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i -\log
        \frac{e^{a s_{i p(i)} + b u_{i p(i)}}}{\sum_{j} e^{a s_{ij} + b u_{ij} + w h_{ij}}},
        \qquad a = \frac{e^{\alpha}}{\tau} \le a_{\max},\quad b_{\min} \le b \le b_{\max}

    (``s``, ``p(i)``, the candidates, SimCSE's w and ``h`` as in :class:`InfoNCELoss`). The parameters are α
    (``log_a``, 0 at the start) and b (``b``, 0 at the start), so step 0 is InfoNCE at τ bit for bit. b is a
    plain parameter projected onto [b_min, b_max] at every forward (projected gradient: the optimiser's step,
    then the projection), because a softplus or exp never reaches the InfoNCE start b = 0; α likewise onto
    α ≤ log(a_max·τ). With ``link_learn_a=False`` a stays 1/τ (a buffer) and b alone is learned.

    **Why the caps.** With SimCSE's dropout views the positive is often far above every negative; winners that
    the scores separate give a likelihood whose supremum is at |θ| → ∞, and without caps the scalars run away.
    ``link_a_at_cap`` / ``link_b_at_cap`` / ``link_b_at_min`` log (1.0) the steps at which a bound holds them.

    The gradient of the loss in (a, b) is the link fit's score (``docs/algorithm.md`` §4) per anchor:
    ``∇ = mean_i(E_{p_i}[(s, u)] − (s, u)_{i p(i)})``. The trainer optimises (α, b) in their own parameter group
    (``--loss_learning_rate``, default the run's learning rate; ``--loss_weight_decay``, default 0), saves them in
    every checkpoint and averages their gradients over the processes.

    Example:
        >>> loss = LearnedLinkLoss(temperature=0.05)
        >>> loss.coefficients()  # (a, b) before any step: InfoNCE at τ
        (20.0, 0.0)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "learned_link"
    display_name = "Learned link"
    Config = LearnedLinkConfig
    diagnostic_keys = ("link_a", "link_b", "link_a_at_cap", "link_b_at_cap", "link_b_at_min")

    def __init__(
        self,
        temperature: float = 0.05,
        link_learn_a: bool = True,
        link_a_max: float | None = None,
        link_b_min: float = 0.0,
        link_b_max: float = 16.0,
        eps: float = 1e-6,
        **common: Any,
    ) -> None:
        super().__init__(temperature, **common)
        self._config = self._make_config(temperature, link_learn_a, link_a_max, link_b_min, link_b_max, eps)
        log_a = torch.zeros(())
        if self.learns_a:
            self.log_a = nn.Parameter(log_a)
        else:
            self.register_buffer("log_a", log_a)
        if self.learns_b:
            self.b = nn.Parameter(torch.zeros(()))
        else:
            self.register_buffer("b", torch.zeros(()))

    def _make_config(self, temperature: float, learn_a: bool, a_max: float | None, *bounds: float) -> Any:
        return LearnedLinkConfig(temperature, learn_a, a_max, *bounds)

    @property
    def config(self) -> Any:
        """The loss's settings (frozen)."""
        return self._config

    @property
    def learns_a(self) -> bool:
        return bool(getattr(self._config, "link_learn_a", True))

    @property
    def learns_b(self) -> bool:
        return True

    @property
    def _bounds(self) -> tuple[float, float, float]:
        """α's upper bound log(a_max·τ), b's bounds."""
        cfg = self._config
        alpha_max = math.log(a_cap(self.temperature, cfg.link_a_max) * self.temperature)
        return alpha_max, getattr(cfg, "link_b_min", 0.0), getattr(cfg, "link_b_max", 0.0)

    def _project(self) -> None:
        """Move (α, b) back into their bounds (in place, no gradient): the projection of projected gradient descent."""
        alpha_max, b_min, b_max = self._bounds
        with torch.no_grad():
            self.log_a.clamp_(max=alpha_max)
            self.b.clamp_(min=b_min, max=b_max)

    def coefficients(self) -> tuple[float, float]:
        """The link's (a, b) as the next forward uses them (within their bounds)."""
        alpha_max, b_min, b_max = self._bounds
        a = math.exp(min(float(self.log_a.detach()), alpha_max)) / self.temperature
        return a, min(max(float(self.b.detach()), b_min), b_max)

    def learned_values(self) -> dict[str, float]:
        a, b = self.coefficients()
        return {"link_a": a, "link_b": b} if self.learns_b else {"link_a": a}

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        self._project()
        alpha_max, b_min, b_max = self._bounds
        a_scale = self.log_a.exp()
        logits = (lay.scores / self.temperature) * a_scale  # s/τ exactly at α = 0
        if self.learns_b:
            logits = logits + self.b * shortfall(lay.scores, self._config.eps)
        with torch.no_grad():
            diagnostics = {
                "link_a": a_scale.detach() / self.temperature,
                "link_a_at_cap": (self.log_a >= alpha_max).float(),
            }
            if self.learns_b:
                diagnostics |= {
                    "link_b": self.b.detach().clone(),
                    "link_b_at_cap": (self.b >= b_max).float(),
                    "link_b_at_min": (self.b <= b_min).float(),
                }
        self.last_diagnostics = diagnostics
        return masked_cross_entropy(logits, lay, self.hard_negative_weight)

    def search_logits(self, scores: torch.Tensor) -> torch.Tensor:
        a, b = self.coefficients()
        return link_logits(scores, a, b, self._config.eps) if self.learns_b else scores * a

    @classmethod
    def run_summary(cls, log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The (step, a, b) trajectory of the logged link, its last value, and the logged steps at each bound."""
        return link_run_summary(cls.diagnostic_keys, log_history)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self._config)}
