r"""Winner laws: which candidate wins, given its scores, under the blended WEINCE family with known parameters.

The law of the winner W_i of anchor i among candidates with scores s_ij is

.. math::
    P(W_i = j) = \operatorname{softmax}_j\bigl((1-\lambda^*)\,s_{ij}/\tau^* + \lambda^*\,(-\beta^*\log(1-s_{ij}))\bigr)
              = \operatorname{softmax}_j(a^* s_{ij} + b^* u_{ij}),

with a* = (1 − λ*)/τ*, b* = λ*β* (``diagnostics.link``). λ* = 0 is the pure softmax law, λ* = 1 the pure Weibit law
P(W = j) ∝ (1 − s_j)^(−β*). Winners are drawn by the Gumbel-max trick: argmax_j(ℓ_ij + G_ij), G_ij iid Gumbel(0, 1),
which is exact for any logits.

Exact quantities, computed on the realised scores with the expectation over winners taken in closed form:

* the true mean log-likelihood per anchor of the drawn winners, and its expectation −(1/A)Σ_i H(p_i);
* the **pseudo-true softmax slope** a° — the limit of the softmax-only fit under the true law — the unique root of
  Σ_i (E_{p_i}[s_i] − E_{softmax(a s_i)}[s_i]) = 0 (the derivative of the expected log-likelihood, which is concave
  in a), found by Newton's method to round-off;
* the **true gain** of the true law over the best softmax, (1/A)Σ_i KL(p_i ‖ softmax(a° s_i)) ≥ 0 nats per anchor:
  the value the held-out gain of ``select_link`` estimates when the family is correctly specified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from simcse_weince.core import checks
from simcse_weince.losses.logits import weince_logits

EPS = 1e-6


@dataclass(frozen=True)
class BlendedLaw:
    """The blended winner law with parameters (λ*, β*, τ*).

    Raises:
        ValueError: λ outside [0, 1], β or τ not finite and > 0 (naming the value).
    """

    lam: float
    beta: float = field(default=1.0, metadata=checks.setting(checks.positive_finite, "β* > 0."))
    tau: float = field(default=0.1, metadata=checks.setting(checks.positive_finite, "τ* > 0."))

    def __post_init__(self) -> None:
        checks.within(0, 1)("lambda", self.lam)  # λ*, as the messages call it
        checks.check_fields(self)

    @classmethod
    def softmax(cls, tau: float) -> BlendedLaw:
        return cls(0.0, 1.0, tau)

    @classmethod
    def weibit(cls, beta: float) -> BlendedLaw:
        return cls(1.0, beta, 1.0)

    @property
    def coefficients(self) -> tuple[float, float]:
        """(a*, b*) = ((1 − λ*)/τ*, λ*β*)."""
        return (1.0 - self.lam) / self.tau, self.lam * self.beta

    def log_probs(self, scores: torch.Tensor, excluded: torch.Tensor | None = None) -> torch.Tensor:
        """(A, C) float64 log P(W = j)."""
        logits = weince_logits(scores.double(), self.lam, self.beta, self.tau, EPS)
        if excluded is not None:
            logits = logits.masked_fill(excluded, float("-inf"))
        return logits.log_softmax(dim=1)

    def sample(
        self, scores: torch.Tensor, generator: torch.Generator, excluded: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(A,) winners drawn by Gumbel-max."""
        logp = self.log_probs(scores, excluded)
        u = torch.rand(logp.shape, dtype=torch.float64, generator=generator).clamp(1e-300, 1 - 1e-16)
        return (logp - torch.log(-torch.log(u))).argmax(dim=1)

    def describe(self) -> str:
        return f"lambda={self.lam:g}, beta={self.beta:g}, tau={self.tau:g}"


def true_loglik(scores: Sequence[torch.Tensor], winners: Sequence[torch.Tensor], law: BlendedLaw) -> float:
    """Mean log-likelihood per anchor of the drawn winners under the true law."""
    total = sum(float(law.log_probs(s).gather(1, w[:, None]).sum()) for s, w in zip(scores, winners, strict=True))
    return total / sum(w.numel() for w in winners)


def expected_loglik(scores: Sequence[torch.Tensor], law: BlendedLaw) -> float:
    """E[log P(W)] per anchor under the true law: minus the mean entropy of the winner's law."""
    total = 0.0
    for s in scores:
        logp = law.log_probs(s)
        total += float((logp.exp() * logp).nan_to_num().sum())
    return total / sum(s.shape[0] for s in scores)


def pseudo_true_softmax_slope(scores: Sequence[torch.Tensor], law: BlendedLaw, tol: float = 1e-13) -> float:
    """a° = argmax_a Σ_i Σ_j p_ij log softmax(a·s_i)_j, p the true law (Newton on the concave objective)."""
    probs = [law.log_probs(s).exp() for s in scores]
    target = sum(float((p * s.double()).sum()) for p, s in zip(probs, scores, strict=True))
    a = 0.0
    for _ in range(200):
        mean, var = 0.0, 0.0
        for s in scores:
            q = (a * s.double()).softmax(dim=1)
            m = (q * s).sum(dim=1)
            mean += float(m.sum())
            var += float(((q * s * s).sum(dim=1) - m * m).sum())
        step = (target - mean) / var
        a += step
        if abs(step) < tol * max(1.0, abs(a)):
            break
    return a


def true_gain(scores: Sequence[torch.Tensor], law: BlendedLaw, softmax_slope: float | None = None) -> float:
    """(1/A) Σ_i KL(p_i ‖ softmax(a°·s_i)), nats per anchor: the true law's gain over the best softmax link."""
    a = pseudo_true_softmax_slope(scores, law) if softmax_slope is None else softmax_slope
    total = 0.0
    for s in scores:
        logp = law.log_probs(s)
        logq = (a * s.double()).log_softmax(dim=1)
        total += float((logp.exp() * (logp - logq)).nan_to_num().sum())
    return total / sum(s.shape[0] for s in scores)
