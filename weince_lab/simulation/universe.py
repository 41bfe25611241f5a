r"""A universe with a known similarity kernel: items, positive pairs and the Bayes posterior of a search.

N items carry latent unit vectors x_1 … x_N in d dimensions (uniform on the sphere, seeded). Positive pairs are
drawn from a density ratio r(x, y) = p(y | x) / p(y) with p uniform over the items and an item never its own
positive:

.. math::
    M(x, y) = p(y \mid x) = \frac{r(x, y)}{\sum_{y' \ne x} r(x, y')}, \qquad
    \log r(x, y) = (1 - \lambda^*)\,\kappa\, s_{xy} + \lambda^*\,\bigl(-\beta^* \log(1 - s_{xy})\bigr) + \text{const},

s_xy the cosine of the latent vectors. The kernel is a :class:`~weince_lab.simulation.winners.BlendedLaw`
with τ* = 1/κ: λ* = 0 is the von Mises–Fisher kernel r ∝ exp(κ s), λ* = 1 the endpoint kernel r ∝ (1 − s)^(−β*),
and 0 < λ* < 1 their product, the blend whose logit is WEINCE's.

**The Bayes posterior of a search.** An anchor x, its positive y_0 ~ M(x, ·) and m − 1 negatives drawn uniformly
from the other items, shuffled into a candidate set {y_1 … y_m}. The posterior that candidate j is the positive is

.. math::
    P(j \mid x, y_{1:m}) = \frac{M(x, y_j) \prod_{l \ne j} q(y_l)}{\sum_{j'} M(x, y_{j'}) \prod_{l \ne j'} q(y_l)}
                       = \operatorname{softmax}_j \log r(x, y_j),

q uniform over the N − 1 items other than x, because M(x, y)/q(y) ∝ r(x, y). Under the vMF kernel this is exactly
the softmax link at τ = 1/κ; under the endpoint kernel exactly the Weibit link with β*; under the blend exactly
WEINCE's blended logit at (λ*, β*, τ*). Every kernel here increases in s, so the Bayes top-1 over any set is the
candidate with the largest latent cosine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from simcse_weince.core import checks
from simcse_weince.losses.logits import weince_logits
from weince_lab.simulation.winners import EPS as KERNEL_EPS
from weince_lab.simulation.winners import BlendedLaw

PAIR_CHUNK = 8192
KERNELS: tuple[str, ...] = ("vmf", "endpoint", "blend")


def kernel_law(name: str, kappa: float = 10.0, beta: float = 3.0, lam: float = 0.5) -> BlendedLaw:
    """The kernel's log density ratio as a :class:`BlendedLaw`: ``vmf`` (λ* = 0, τ* = 1/κ), ``endpoint``
    (λ* = 1, β*) or ``blend`` (λ*, β*, τ* = 1/κ).

    Raises:
        ValueError: an unknown kernel, or a parameter outside its range (naming the value).
    """
    checks.one_of(KERNELS)("kernel", name)
    checks.positive_finite("kappa", kappa)
    if name == "vmf":
        return BlendedLaw.softmax(1.0 / kappa)
    if name == "endpoint":
        return BlendedLaw.weibit(beta)
    checks.within(0, 1, open_low=True, open_high=True)("the blend's lambda", lam)
    return BlendedLaw(lam, beta, 1.0 / kappa)


def cosine_scores(vectors: torch.Tensor, anchors: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """(count, m) cosines of unit rows ``vectors`` between anchors (count,) and their candidates (count, m)."""
    return torch.einsum("ad,amd->am", vectors[anchors], vectors[candidates])


def unit_vectors(count: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """(count, dim) float64 vectors uniform on the unit sphere."""
    z = torch.randn(count, dim, dtype=torch.float64, generator=generator)
    return z / z.norm(dim=1, keepdim=True)


@dataclass(eq=False)
class Universe:
    """N items with latent unit vectors and the kernel that makes their positive pairs.

    Raises:
        ValueError: fewer than 3 items, a dimension below 2, vectors that are not unit rows.
    """

    vectors: torch.Tensor  # (N, d) float64 unit rows
    kernel: BlendedLaw
    name: str = ""
    _transition: torch.Tensor | None = field(default=None, repr=False)
    _cdf: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n, d = self.vectors.shape
        if n < 3 or d < 2:
            raise ValueError(f"a universe needs >= 3 items of dimension >= 2, got {n} items of dimension {d}")
        if not torch.allclose(self.vectors.norm(dim=1), torch.ones(n, dtype=self.vectors.dtype), atol=1e-9):
            raise ValueError("the latent vectors must be unit rows")

    @property
    def size(self) -> int:
        return self.vectors.shape[0]

    def subset(self, items: torch.Tensor) -> Universe:
        """The universe of ``items`` alone (held-out items): their vectors and the same kernel, so its M is the
        kernel restricted to them and renormalised."""
        return Universe(self.vectors[items], self.kernel, self.name)

    def cosines(self) -> torch.Tensor:
        """(N, N) latent cosines s_xy (float64)."""
        return (self.vectors @ self.vectors.T).clamp(-1.0, 1.0)

    def log_ratio(self, scores: torch.Tensor) -> torch.Tensor:
        """log r at latent cosines ``scores`` up to a constant per anchor: the kernel's logit (float64)."""
        law = self.kernel
        return weince_logits(scores.double(), law.lam, law.beta, law.tau, KERNEL_EPS)

    def transition(self) -> torch.Tensor:
        """(N, N) M(x, y) = p(y | x), zero on the diagonal, rows summing to 1 (computed once)."""
        if self._transition is None:
            logits = self.log_ratio(self.cosines())
            logits.fill_diagonal_(float("-inf"))
            self._transition = logits.softmax(dim=1)
        return self._transition

    def cdf(self) -> torch.Tensor:
        """(N, N) row-wise cumulative sums of M (computed once)."""
        if self._cdf is None:
            self._cdf = self.transition().cumsum(dim=1)
        return self._cdf

    def sample_pairs(self, count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` positive pairs: anchors uniform over the items, positives ~ M(anchor, ·); two (count,) longs."""
        anchors = torch.randint(0, self.size, (count,), generator=generator)
        uniform = torch.rand(count, 1, dtype=torch.float64, generator=generator)
        positives = torch.empty(count, dtype=torch.long)
        for start in range(0, count, PAIR_CHUNK):  # inversion of each anchor's CDF, a chunk of rows at a time
            part = slice(start, start + PAIR_CHUNK)
            cdf = self.cdf()[anchors[part]]
            positives[part] = torch.searchsorted(cdf, uniform[part] * cdf[:, -1:]).clamp(max=self.size - 1)[:, 0]
        return anchors, positives

    def sample_negatives(self, anchors: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
        """(len(anchors), k) negatives, each uniform over the items other than its anchor (with replacement)."""
        draw = torch.randint(0, self.size - 1, (anchors.numel(), k), generator=generator)
        return draw + (draw >= anchors[:, None]).long()

    def candidate_sets(
        self, count: int, size: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``count`` search problems: anchors (count,), candidates (count, size) with the positive at a uniform
        position among ``size − 1`` uniform negatives, and that position (count,)."""
        anchors, positives = self.sample_pairs(count, generator)
        negatives = self.sample_negatives(anchors, size - 1, generator)
        where = torch.randint(0, size, (count,), generator=generator)
        candidates = torch.empty(count, size, dtype=torch.long)
        rest = torch.ones(count, size, dtype=torch.bool)
        rest[torch.arange(count), where] = False
        candidates[~rest] = positives
        candidates[rest] = negatives.reshape(-1)
        return anchors, candidates, where

    def bayes_log_posterior(self, anchors: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """(count, m) log P(j is the positive | anchor, candidates) = log softmax_j log r(x, y_j)."""
        scores = cosine_scores(self.vectors, anchors, candidates).clamp(-1.0, 1.0)
        return self.log_ratio(scores).log_softmax(dim=1)

    def bayes_universe_log_posterior(self) -> torch.Tensor:
        """(N, N) log M(x, y): the Bayes search over the whole universe (−inf on the diagonal)."""
        return self.transition().log()


def make_universe(items: int, dim: int, kernel: BlendedLaw, seed: int, name: str = "") -> Universe:
    """A seeded universe of ``items`` uniform unit vectors in ``dim`` dimensions."""
    generator = torch.Generator().manual_seed(seed)
    return Universe(unit_vectors(items, dim, generator), kernel, name)
