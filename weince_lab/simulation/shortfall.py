r"""Laws of the shortfall δ = 1 − s of bounded similarity scores, with their extreme-value domain derived.

Every law is a standardised shortfall D on (0, 1] times a scale c ∈ (0, 2] (the *hardness*: the smaller c, the
closer every candidate, the hardest ones included, comes to the cap s = 1), so that s = 1 − c·D ∈ [−1, 1).

* ``power`` — P(D ≤ x) = x^α on [0, 1]. The score's upper tail is P(s > 1 − y) = (y/c)^α: regularly varying
  at the endpoint with index α, so s is in the **Weibull domain** with GPD shape **ξ = −1/α**. More: the
  exceedances over any u ≥ 1 − c are *exactly* generalised Pareto,
  P(s − u > y | s > u) = (1 − y/(1 − u))^α = (1 + ξ y/σ_u)^(−1/ξ) with σ_u = (1 − u)/α,
  so a peaks-over-threshold fit has no threshold bias.
* ``beta`` — D ~ Beta(α, β_D). Near 0, P(D ≤ x) = x^α/(α B(α, β_D)) (1 + O(x)): the same Weibull domain,
  ξ = −1/α, but the exceedances are generalised Pareto only as u → 1 (a threshold bias at finite u).
* ``gumbel`` — P(D ≤ x) = exp(−θ/x + θ) on (0, 1]. The score's tail P(s > 1 − y) ∝ exp(−θc/y) is the classical
  example of a **Gumbel-domain** law with a finite endpoint: ξ = 0 although s < 1. Von Mises' auxiliary function
  f(u) = (1 − u)²/(θc) has f'(u) = −2(1 − u)/(θc) → 0, the *penultimate* shape a POT fit at threshold u
  approaches: slightly negative at any finite threshold. This is the contrast WEINCE's premise must be told
  apart from: an endpoint, but no power law at it.

Sampling is by inversion of the CDF from uniforms (seeded ``torch.Generator``), in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from scipy.special import betainc, betaincinv

from simcse_weince.core import checks

ShortfallKind = Literal["power", "beta", "gumbel"]
SHORTFALL_KINDS: tuple[str, ...] = ("power", "beta", "gumbel")


@dataclass(frozen=True)
class ShortfallLaw:
    """A standardised shortfall law D on (0, 1] (see the module docstring).

    Args:
        kind: ``"power"``, ``"beta"`` or ``"gumbel"``.
        alpha: the power-law index α > 0 at 0 (``power`` and ``beta``); unused by ``gumbel``.
        beta_d: the second Beta parameter (``beta`` only), > 0.
        theta: the Gumbel law's θ > 0 (``gumbel`` only).

    Raises:
        ValueError: an unknown kind or a parameter out of range (naming it).
    """

    kind: ShortfallKind = "power"
    alpha: float = field(default=2.5, metadata=checks.setting(checks.positive_finite, "α > 0 (power, beta)."))
    beta_d: float = field(default=5.0, metadata=checks.setting(checks.positive_finite, "β_D > 0 (beta)."))
    theta: float = field(default=1.0, metadata=checks.setting(checks.positive_finite, "θ > 0 (gumbel)."))

    def __post_init__(self) -> None:
        checks.one_of(SHORTFALL_KINDS)("shortfall law", self.kind)  # the law's kind, as the messages call it
        checks.check_fields(self)

    @property
    def xi(self) -> float:
        """The GPD shape of the score s = 1 − c·D: −1/α in the Weibull domain, 0 for ``gumbel``."""
        return 0.0 if self.kind == "gumbel" else -1.0 / self.alpha

    def cdf(self, x: torch.Tensor) -> torch.Tensor:
        """P(D ≤ x) for x in [0, 1] (float64)."""
        x = x.double().clamp(0.0, 1.0)
        if self.kind == "power":
            return x**self.alpha
        if self.kind == "beta":
            return torch.from_numpy(np.asarray(betainc(self.alpha, self.beta_d, x.numpy()), dtype=np.float64))
        return torch.where(x > 0, torch.exp(-self.theta / x.clamp_min(1e-300) + self.theta), torch.zeros_like(x))

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        """Draws of D in (0, 1], float64, by inversion of the CDF at seeded uniforms."""
        u = torch.rand(shape, dtype=torch.float64, generator=generator).clamp_min(1e-300)
        if self.kind == "beta":
            return torch.from_numpy(betaincinv(self.alpha, self.beta_d, u.numpy())).clamp_min(1e-300)
        if self.kind == "power":
            return u ** (1.0 / self.alpha)
        return self.theta / (self.theta - torch.log(u))  # inverse of exp(−θ/x + θ)

    def describe(self) -> str:
        if self.kind == "power":
            return f"power(alpha={self.alpha:g})"
        if self.kind == "beta":
            return f"beta({self.alpha:g}, {self.beta_d:g})"
        return f"gumbel(theta={self.theta:g})"
