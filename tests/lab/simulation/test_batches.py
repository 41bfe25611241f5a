"""Simulated batches in the loss's layouts: shapes, masks, and the hardness of the hardest negative."""

from __future__ import annotations

import math

import pytest
import torch

from simcse_weince.losses import WeinceLoss
from weince_lab.simulation.batches import ScoreSetting, simulate_batch, simulate_ntxent_batch
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw


def test_simcse_batch_and_the_hardest_negative() -> None:
    """ρ = min of K = C − 1 iid shortfalls c·U^(1/α) when the winner is uniform: E[ρ] = c Γ(1 + 1/α) Γ(K + 1) /
    Γ(K + 1 + 1/α) (the mean of the minimum of K such draws), checked through the loss's own ρ."""
    alpha, c, k = 2.5, 0.6, 127
    setting = ScoreSetting(ShortfallLaw("power", alpha=alpha), hardness=c, anchors=128, candidates=k + 1)
    uniform = BlendedLaw.softmax(1e9)  # a ≈ 1e-9: every candidate equally likely to win
    g = torch.Generator().manual_seed(0)
    loss = WeinceLoss()
    rho = torch.cat([loss.statistics(simulate_batch(setting, uniform, g).score_matrix()).rho for _ in range(40)])
    expected = c * math.exp(math.lgamma(1 + 1 / alpha) + math.lgamma(k + 1) - math.lgamma(k + 1 + 1 / alpha))
    assert float(rho.double().mean()) == pytest.approx(expected, rel=0.03)
    batch = simulate_batch(setting, uniform, g)
    lay = batch.score_matrix()
    assert lay.scores.dtype == torch.float32 and lay.num_negatives == k and not lay.self_mask.any()
    assert batch.score_batch().excluded is None and float(batch.scores.max()) < 1


def test_hardness_spread_and_cap() -> None:
    setting = ScoreSetting(ShortfallLaw("power"), hardness=1.5, hardness_spread=1.0, anchors=400, candidates=8)
    batch = simulate_batch(setting, BlendedLaw.softmax(0.1), torch.Generator().manual_seed(1))
    assert float(batch.hardness.max()) == 2.0 and float(batch.hardness.std()) > 0.3
    assert float(batch.scores.min()) >= -1.0


def test_ntxent_batch_layout() -> None:
    setting = ScoreSetting(ShortfallLaw("gumbel"), anchors=16)
    batch = simulate_ntxent_batch(setting, torch.Generator().manual_seed(0))
    s = batch.scores
    assert s.shape == (32, 32) and torch.equal(s, s.T)
    assert torch.equal(batch.positive, torch.cat([torch.arange(16, 32), torch.arange(16)]))
    assert batch.excluded.diagonal().all() and int(batch.excluded.sum()) == 32
    lay = batch.score_matrix()
    assert lay.num_negatives == 30
    stats = WeinceLoss(layout="ntxent").statistics(lay)
    assert stats.lam.shape == (32,)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hardness": 2.5}, "hardness must be in"),
        ({"hardness_spread": -1.0}, "hardness_spread must be"),
        ({"hardness_spread": math.inf}, "hardness_spread must be"),
        ({"anchors": 1}, "anchors must be an integer >= 2"),
    ],
)
def test_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoreSetting(ShortfallLaw(), **kwargs)
