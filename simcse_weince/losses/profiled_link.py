r"""The profiled link: (a, b) fitted to each batch by the link likelihood (not by gradient) and used as constants,
the identified counterpart of WEINCE's online λ."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import field
from typing import Any

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy
from simcse_weince.losses.link import (
    a_cap,
    a_max_field,
    b_max_field,
    b_min_field,
    check_start,
    damped_newton_step,
    eps_field,
    features,
    link_logits,
    link_run_summary,
    temperature_field,
)


@dataclasses.dataclass(frozen=True)
class ProfiledLinkConfig:
    """The settings of the profiled link: the start (1/τ, 0), the caps, the running average's momentum, the clamp."""

    temperature: float = temperature_field()
    link_a_max: float | None = a_max_field()
    link_b_min: float = b_min_field()
    link_b_max: float = b_max_field()
    link_momentum: float = field(
        default=0.9,
        metadata=checks.setting(
            checks.within(0.0, 1.0, open_high=True),
            "Momentum m in [0, 1) of the profiled link's running (a, b): θ ← m·θ + (1 − m)·(one Newton step).",
        ),
    )
    eps: float = eps_field()

    def __post_init__(self) -> None:
        checks.check_fields(self)
        check_start(self.temperature, self.link_a_max, self.link_b_min, self.link_b_max)


class ProfiledLinkLoss(ContrastiveLoss):
    r"""Cross-entropy under the link ``softmax_j(a·s_ij + b·u_ij)`` with (a, b) a running maximum-likelihood fit to
    the batches' detached scores: no gradient reaches (a, b), and no trainable parameter exists.

    Each forward, from the running value θ = (a, b) (at the start (1/τ, 0), InfoNCE):

    1. one damped Newton step on this batch's link NLL (``docs/algorithm.md`` §4, the diagnostics' fit; the
       positives are the winners, SimCSE's w does not enter), θ̂ = θ − t·H⁻¹∇ within the box 0 <= a <= a_max,
       b_min <= b <= b_max (a coordinate held at a bound that the gradient pushes against;
       :func:`~simcse_weince.losses.link.damped_newton_step`), t halved until Armijo's rule holds;
    2. θ ← m·θ + (1 − m)·θ̂ (inside the box, as both are);
    3. the loss's logits are a·s + b·u with that θ, a constant.

    Steps 1–2 run in a forward with gradient enabled (a training step); an evaluation uses θ as it is.

    On a fixed batch the fixed point of 1–2 is the batch's maximum-likelihood (a, b) within the box (∇ = 0 inside
    it; on separable winners, whose likelihood keeps rising, a corner such as (a_max, b_max)); over a run, the
    running value follows the current encoder's link. With ``gather_across_devices`` the NLL, its gradient and
    Hessian are summed over the processes' anchors, so every process holds the same θ as one process on the
    global batch. θ is a buffer (``theta``): saved in every checkpoint and resumed like WEINCE's top-M β.

    Example:
        >>> loss = ProfiledLinkLoss(temperature=0.05)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))  # a training step: θ moves with this batch
        >>> a, b = loss.coefficients()
    """

    name = "profiled_link"
    display_name = "Profiled link"
    Config = ProfiledLinkConfig
    diagnostic_keys = ("link_a", "link_b", "link_a_batch", "link_b_batch", "link_a_at_cap", "link_b_at_cap")

    def __init__(
        self,
        temperature: float = 0.05,
        link_a_max: float | None = None,
        link_b_min: float = 0.0,
        link_b_max: float = 16.0,
        link_momentum: float = 0.9,
        eps: float = 1e-6,
        **common: Any,
    ) -> None:
        super().__init__(temperature, **common)
        self._config = ProfiledLinkConfig(temperature, link_a_max, link_b_min, link_b_max, link_momentum, eps)
        self.register_buffer("theta", torch.tensor([1.0 / self.temperature, 0.0], dtype=torch.float64))

    @property
    def config(self) -> ProfiledLinkConfig:
        return self._config

    @property
    def a_max(self) -> float:
        """The cap on a (``link_a_max``, or max(100, 1/τ))."""
        return a_cap(self.temperature, self._config.link_a_max)

    def coefficients(self) -> tuple[float, float]:
        """The running (a, b)."""
        return float(self.theta[0]), float(self.theta[1])

    def learned_values(self) -> dict[str, float]:
        a, b = self.coefficients()
        return {"link_a": a, "link_b": b}

    @torch.no_grad()
    def update(self, lay: ScoreMatrix) -> torch.Tensor:
        """One step of the running fit on the batch's detached scores; returns this batch's Newton point θ̂."""
        cfg = self._config
        x = features(lay.scores, cfg.eps)
        if self.theta.device != x.device:  # the loss is no submodule of the model: follow the scores
            self.theta = self.theta.to(x.device)
        theta = self.theta
        low = torch.tensor([0.0, cfg.link_b_min], dtype=theta.dtype)
        high = torch.tensor([self.a_max, cfg.link_b_max], dtype=theta.dtype)
        batch = damped_newton_step(
            x, ~lay.excluded, lay.positive_index, theta, self.gather_across_devices, low.to(x.device), high.to(x.device)
        )  # within the box, so is the average
        self.theta.copy_(cfg.link_momentum * theta + (1.0 - cfg.link_momentum) * batch)
        return batch

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        cfg = self._config
        # a training step (gradient enabled) moves θ first; an evaluation reads it
        batch = self.update(lay) if torch.is_grad_enabled() else None
        a, b = self.theta.to(lay.scores.dtype)
        self.last_diagnostics = {
            "link_a": a,
            "link_b": b,
            **({} if batch is None else {"link_a_batch": batch[0].float(), "link_b_batch": batch[1].float()}),
            "link_a_at_cap": (self.theta[0] >= self.a_max).float(),
            "link_b_at_cap": (self.theta[1] >= cfg.link_b_max).float(),
        }
        return masked_cross_entropy(link_logits(lay.scores, a, b, cfg.eps), lay, self.hard_negative_weight)

    def search_logits(self, scores: torch.Tensor) -> torch.Tensor:
        a, b = self.coefficients()
        return link_logits(scores, a, b, self._config.eps)

    @classmethod
    def run_summary(cls, log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The (step, a, b) trajectory of the logged link, its last value, and the logged steps at each bound."""
        return link_run_summary(cls.diagnostic_keys, log_history)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self._config)}
