r"""Simulated score batches shaped as the loss sees them.

**A × C layout** (the SimCSE layout when C = A, and the link selection's): every candidate score of anchor i is
drawn independently as s_ij = 1 − c_i·D_ij, D_ij from a :class:`ShortfallLaw`, with the anchor's hardness
c_i = min(c·exp(σ·Z_i), 2), Z_i ~ N(0, 1): c sets how close the candidates (and so the hardest negatives) come
to the cap, σ how much that varies between anchors (σ = 0: all anchors alike). A winner law then picks the
winner among the C candidates; the winner is the anchor's positive, the other C − 1 its negatives. With
K = C − 1 iid power-law shortfalls the hardest negative's shortfall is ρ ≈ c·(K + 1)^(−1/α) Γ(1 + 1/α).

**NT-Xent layout** (2N views): the negatives' scores are symmetric, s_uv = s_vu = 1 − √(c_u c_v)·D_uv; view u's
positive is its partner u ± N with a score drawn from the same law; the view itself is excluded. No winner law is
defined there (a score shared by two anchors cannot be both anchors' independent draw): this layout serves the
loss's statistics, which read the negatives only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from simcse_weince.core import checks
from simcse_weince.diagnostics.link import ScoreBatch
from simcse_weince.losses.layout import ScoreMatrix
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw

MAX_SHORTFALL = 2.0  # s ≥ −1


@dataclass(frozen=True)
class ScoreSetting:
    """How the candidates' scores are drawn.

    Raises:
        ValueError: hardness outside (0, 2], a negative or non-finite spread, fewer than 2 anchors or candidates.
    """

    law: ShortfallLaw
    hardness: float = field(
        default=1.0,
        metadata=checks.setting(checks.within(0, MAX_SHORTFALL, open_low=True), "The shortfall's scale c, in (0, 2]."),
    )
    hardness_spread: float = field(
        default=0.0, metadata=checks.setting(checks.non_negative(), "σ of the anchors' log hardness, >= 0.")
    )
    anchors: int = field(default=256, metadata=checks.setting(checks.integer_at_least(2), "Anchors, >= 2."))
    candidates: int = field(default=256, metadata=checks.setting(checks.integer_at_least(2), "Candidates, >= 2."))

    def __post_init__(self) -> None:
        checks.check_fields(self)


@dataclass
class SimulatedBatch:
    """One simulated batch: float64 scores, the positive (winner) column of each anchor, excluded entries."""

    scores: torch.Tensor  # (A, C) float64
    positive: torch.Tensor  # (A,) long
    excluded: torch.Tensor  # (A, C) bool: entries that are no candidate (the view itself in NT-Xent)
    hardness: torch.Tensor  # (A,) the anchors' scales c_i

    def score_batch(self) -> ScoreBatch:
        """For :func:`~simcse_weince.diagnostics.link.select_link`."""
        return ScoreBatch(self.scores, self.positive, self.excluded if bool(self.excluded.any()) else None)

    def score_matrix(self) -> ScoreMatrix:
        """The loss's view (float32 scores, as the loss computes them) for ``WeinceLoss.statistics``."""
        num_negatives = self.scores.shape[1] - 1 - int(self.excluded[0].sum())
        return ScoreMatrix(
            scores=self.scores.float(),
            positive_index=self.positive,
            self_mask=self.excluded,
            user_mask=torch.zeros_like(self.excluded),
            num_negatives=num_negatives,
        )


def anchor_hardness(setting: ScoreSetting, count: int, generator: torch.Generator) -> torch.Tensor:
    """(count,) scales c_i = min(c·exp(σ Z_i), 2)."""
    z = torch.randn(count, dtype=torch.float64, generator=generator)
    return (setting.hardness * torch.exp(setting.hardness_spread * z)).clamp(max=MAX_SHORTFALL)


def simulate_batch(setting: ScoreSetting, law: BlendedLaw, generator: torch.Generator) -> SimulatedBatch:
    """An A × C batch of iid candidate scores and the winners drawn from ``law``."""
    c = anchor_hardness(setting, setting.anchors, generator)
    d = setting.law.sample((setting.anchors, setting.candidates), generator)
    scores = 1.0 - c[:, None] * d
    winner = law.sample(scores, generator)
    excluded = torch.zeros_like(scores, dtype=torch.bool)
    return SimulatedBatch(scores, winner, excluded, c)


def simulate_ntxent_batch(setting: ScoreSetting, generator: torch.Generator) -> SimulatedBatch:
    """A 2N × 2N NT-Xent batch with N = ``setting.anchors`` pairs (``candidates`` is not used)."""
    n = setting.anchors
    views = 2 * n
    c = anchor_hardness(setting, views, generator)
    d = setting.law.sample((views, views), generator).triu(1)
    d = d + d.T
    scale = torch.sqrt(c[:, None] * c[None, :])
    partner = torch.cat([torch.arange(n, views), torch.arange(n)])
    pos_d = setting.law.sample((n,), generator)
    d[torch.arange(n), partner[:n]] = pos_d
    d[partner[:n], torch.arange(n)] = pos_d
    scores = (1.0 - scale * d).clamp(min=-1.0)
    excluded = torch.eye(views, dtype=torch.bool)
    scores = scores.masked_fill(excluded, 1.0)
    return SimulatedBatch(scores, partner, excluded, c)
