"""Winner laws: sampling frequencies, the pseudo-true softmax slope and the true gain against closed forms and
brute-force references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from weince_lab.simulation.winners import (
    BlendedLaw,
    expected_loglik,
    pseudo_true_softmax_slope,
    true_gain,
    true_loglik,
)


def _scores(a: int = 64, c: int = 32, seed: int = 0) -> torch.Tensor:
    return 1 - 1.5 * torch.rand(a, c, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) ** 0.5


def test_gumbel_max_draws_follow_the_law() -> None:
    s = torch.tensor([[0.15, 0.45, 0.70, 0.90]], dtype=torch.float64).expand(40_000, 4)
    law = BlendedLaw(0.5, 2.0, 0.2)
    winners = law.sample(s, torch.Generator().manual_seed(0))
    p = law.log_probs(s[:1]).exp()[0].numpy()
    counts = np.bincount(winners.numpy(), minlength=4)
    assert chisquare(counts, 40_000 * p).pvalue > 0.01
    # the blended logits: P ∝ exp((1 − λ) s/τ) (1 − s)^(−λβ)
    ref = np.exp(0.5 * s[0].numpy() / 0.2) * (1 - s[0].numpy()) ** (-1.0)
    np.testing.assert_allclose(p, ref / ref.sum(), rtol=1e-12)


def test_pseudo_true_slope_is_the_truth_for_softmax_winners_and_matches_moments_otherwise() -> None:
    s = [_scores(seed=1), _scores(seed=2)]
    assert pseudo_true_softmax_slope(s, BlendedLaw.softmax(0.1)) == pytest.approx(10.0, rel=1e-10)
    assert true_gain(s, BlendedLaw.softmax(0.1)) == pytest.approx(0.0, abs=1e-12)
    law = BlendedLaw.weibit(3.0)
    a0 = pseudo_true_softmax_slope(s, law)
    # the root of the score equation: E_p[s] = E_softmax(a0 s)[s] summed over anchors
    p = [law.log_probs(x).exp() for x in s]
    q = [(a0 * x).softmax(1) for x in s]
    lhs = sum(float((pi * x).sum()) for pi, x in zip(p, s, strict=True))
    rhs = sum(float((qi * x).sum()) for qi, x in zip(q, s, strict=True))
    assert lhs == pytest.approx(rhs, rel=1e-12)
    # and the maximum of the expected softmax log-likelihood: a brute-force grid does no better
    gains = [true_gain(s, law, a) for a in np.linspace(a0 - 1, a0 + 1, 41)]
    assert true_gain(s, law, a0) <= min(gains) + 1e-12
    assert true_gain(s, law, a0) > 0.05


def test_likelihoods() -> None:
    s = [_scores(seed=3)]
    law = BlendedLaw(0.3, 2.0, 0.1)
    w = [law.sample(s[0], torch.Generator().manual_seed(0))]
    logp = law.log_probs(s[0])
    assert true_loglik(s, w, law) == pytest.approx(float(logp.gather(1, w[0][:, None]).mean()), abs=1e-12)
    entropy = -(logp.exp() * logp).sum(1).mean()
    assert expected_loglik(s, law) == pytest.approx(-float(entropy), abs=1e-12)
    assert BlendedLaw(0.25, 2.0, 0.5).coefficients == (1.5, 0.5)


@pytest.mark.parametrize(
    ("args", "message"),
    [((1.5,), "lambda must be in"), ((0.5, -1.0), "beta must be"), ((0.5, 1.0, math.nan), "tau must be")],
)
def test_bad_parameters(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BlendedLaw(*args)
