"""Closed-form checks of the pure statistics, and property-based invariants of λ."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simcse_weince.losses import WeinceLoss
from simcse_weince.losses.stats import (
    burn_size,
    hill_beta,
    mixing_weight,
    quantile_by_index,
    tail_shortfalls,
    tail_size,
    weibull_gumbel_fits,
)


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, 1), (5, 5), (9, 9), (20, 20), (63, 32), (320, 32), (330, 33), (1023, 102), (2046, 205)],
)
def test_tail_size(k: int, expected: int) -> None:
    assert tail_size(k, 32, 0.10) == expected


def test_burn_size() -> None:
    assert [burn_size(k) for k in (3, 19, 20, 39, 40, 102)] == [1, 1, 1, 1, 2, 5]


def test_tail_shortfalls_order_and_floor() -> None:
    s = torch.tensor([[0.1, 0.9, float("-inf"), 1.0, -1.0]])
    d = tail_shortfalls(s, 3, 1e-6)
    torch.testing.assert_close(d, torch.tensor([[1e-6, 0.1, 0.9]]))


def test_weibull_fit_recovers_exact_power_law() -> None:
    # δ_k placed exactly on F = c·δ^β: the Weibull line is exact, slope β, and the Gumbel proxy loses.
    k_tail, beta, c = 40, 3.0, 2.0
    levels = torch.arange(1, k_tail + 1, dtype=torch.float64) / (k_tail + 1)
    delta = (levels / c) ** (1 / beta)
    b, g, d_aic = weibull_gumbel_fits(delta[None], burn_size(k_tail))
    assert float(b[0]) == pytest.approx(beta, rel=1e-10)
    assert float(g[0]) < 0
    n = k_tail - burn_size(k_tail)
    assert float(d_aic[0]) > n * math.log(1e-3 / 1e-12)  # SSE_W at its floor, SSE_G clearly not


def test_wrong_signed_fits_are_penalised() -> None:
    # Shortfalls decreasing with the level (impossible ordering) give β̂ < 0: the Weibull fit must lose.
    delta = torch.linspace(1.0, 0.1, 30, dtype=torch.float64)[None]
    b, g, d_aic = weibull_gumbel_fits(delta, 1)
    assert float(b[0]) < 0 and float(g[0]) > 0
    # Both penalised by 1e6; ΔAIC stays finite.
    assert math.isfinite(float(d_aic[0]))


def test_hill_hand_example_and_ties() -> None:
    d = torch.tensor([[1.0, 2.0, 4.0], [0.5, 0.5, 0.5]], dtype=torch.float64)
    out = hill_beta(d)
    assert float(out[0]) == pytest.approx(2 / (3 * math.log(2)))
    assert math.isinf(float(out[1]))


def test_hill_recovers_index_on_sample() -> None:
    gen = np.random.default_rng(0)
    beta = 2.5
    sample = np.sort(gen.uniform(size=200_000) ** (1 / beta))[:2001]  # P(δ ≤ x) = x^β
    est = float(hill_beta(torch.from_numpy(sample)[None])[0])
    assert est == pytest.approx(beta, rel=0.08)


def test_mixing_weight_closed_form() -> None:
    lam = mixing_weight(torch.tensor([0.1, 0.2]), torch.tensor(0.2), torch.tensor([4.0, 2.0]), 10.0, 1.0, 2.0)
    expected0 = 1 / (1 + math.exp(-10 * math.log(2))) * 1 / (1 + math.exp(-2))
    assert float(lam[0]) == pytest.approx(expected0, rel=1e-6)
    assert float(lam[1]) == pytest.approx(0.25, rel=1e-6)


def test_quantile_by_index() -> None:
    v = torch.tensor([5.0, 1.0, 3.0, 2.0, 4.0])
    assert float(quantile_by_index(v, 0.2)) == 2.0  # round(0.2·4) = 1 -> second smallest
    assert float(quantile_by_index(v, 0.0)) == 1.0
    assert float(quantile_by_index(v, 1.0)) == 5.0


embeddings = st.integers(min_value=2, max_value=40).flatmap(
    lambda b: st.tuples(
        st.just(b), st.integers(0, 10_000), st.floats(0.0, 2.0), st.sampled_from(["unit", "ols", "hill"])
    )
)


@settings(max_examples=40, deadline=None)
@given(embeddings, st.sampled_from(["simcse", "ntxent"]))
def test_lambda_in_unit_interval_and_loss_finite(case, layout: str) -> None:
    b, seed, noise, mode = case
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 6, generator=g)
    p = a + noise * torch.randn(b, 6, generator=g)
    loss_fn = WeinceLoss(layout=layout, beta_mode=mode, min_tail_points=10)
    value = loss_fn(a, p)
    lam = loss_fn.last_statistics.lam
    assert torch.isfinite(value)
    assert bool(((lam >= 0) & (lam <= 1)).all())
    lo, hi = loss_fn.beta_clamp
    beta = loss_fn.last_statistics.beta
    assert bool(((beta >= lo) & (beta <= hi)).all())


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=12, max_value=48), st.integers(0, 10_000), st.sampled_from(["unit", "ols", "hill"]))
def test_permuting_the_batch_permutes_lambda(b: int, seed: int, mode: str) -> None:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 8, generator=g)
    p = a + 0.7 * torch.randn(b, 8, generator=g)
    perm = torch.randperm(b, generator=g)
    f1, f2 = WeinceLoss(beta_mode=mode, min_tail_points=10), WeinceLoss(beta_mode=mode, min_tail_points=10)
    v1, v2 = f1(a, p), f2(a[perm], p[perm])
    torch.testing.assert_close(f2.last_statistics.lam, f1.last_statistics.lam[perm], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(v1, v2, rtol=1e-5, atol=1e-6)
