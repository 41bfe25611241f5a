"""Shortfall laws: their CDFs, samplers and extreme-value shapes checked against their math."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import kstest

from simcse_weince.diagnostics.pot import fit_exceedances_many
from weince_lab.simulation.shortfall import ShortfallLaw

LAWS = [
    ShortfallLaw("power", alpha=2.5),
    ShortfallLaw("beta", alpha=2.0, beta_d=5.0),
    ShortfallLaw("gumbel", theta=1.5),
]


@pytest.mark.parametrize("law", LAWS, ids=lambda law: law.kind)
def test_samples_follow_the_cdf(law: ShortfallLaw) -> None:
    """Kolmogorov–Smirnov of 20,000 draws against the law's own CDF (fails if the sampler's inversion is wrong)."""
    d = law.sample((20_000,), torch.Generator().manual_seed(0))
    assert float(d.min()) > 0 and float(d.max()) <= 1
    result = kstest(d.numpy(), lambda x: law.cdf(torch.as_tensor(x, dtype=torch.float64)).numpy())
    assert result.pvalue > 0.01


def test_closed_form_cdfs() -> None:
    x = torch.tensor([0.1, 0.5], dtype=torch.float64)
    np.testing.assert_allclose(ShortfallLaw("power", alpha=3.0).cdf(x), [1e-3, 0.125], rtol=1e-12)
    np.testing.assert_allclose(ShortfallLaw("gumbel", theta=2.0).cdf(x), np.exp(-2 / x.numpy() + 2), rtol=1e-12)
    # Beta(1, 1) is uniform
    np.testing.assert_allclose(ShortfallLaw("beta", alpha=1.0, beta_d=1.0).cdf(x), x.numpy(), rtol=1e-12)
    assert ShortfallLaw("power", alpha=4.0).xi == -0.25 and ShortfallLaw("gumbel").xi == 0.0


def test_power_law_exceedances_are_generalised_pareto_with_xi_minus_one_over_alpha() -> None:
    """s = 1 − c·U^(1/α): the exceedances over u are GPD(ξ = −1/α, σ = (1 − u)/α) exactly, so the maximum-likelihood
    fit of 200,000 of them recovers both within a few standard errors (SE of ξ̂ ≈ (1 + ξ)/√n ≈ 0.0013)."""
    alpha, c, u = 2.5, 0.8, 0.6
    law = ShortfallLaw("power", alpha=alpha)
    s = 1 - c * law.sample((1_000_000,), torch.Generator().manual_seed(1)).numpy()
    exc = s[s > u] - u
    assert exc.size == pytest.approx(1_000_000 * ((1 - u) / c) ** alpha, rel=0.01)  # P(s > u) = ((1 − u)/c)^α
    xi, sigma, _ = fit_exceedances_many(exc[None, :])
    assert xi[0] == pytest.approx(-1 / alpha, abs=0.006)
    assert sigma[0] == pytest.approx((1 - u) / alpha, rel=0.01)


def test_gumbel_law_reads_negative_at_every_threshold_but_drifts() -> None:
    """The Gumbel-domain law (true ξ = 0, endpoint 1): the GPD fit at any finite threshold is negative (its
    penultimate shape, von Mises: a'(u) = −2(1 − u)/θ < 0), rising towards 0 as the threshold rises; the power law's
    ξ̂ stays at −1/α at every threshold. A single ξ̂ < 0 does not tell the two domains apart; the drift does."""
    g = torch.Generator().manual_seed(2)
    gum = 1 - ShortfallLaw("gumbel", theta=1.0).sample((2_000_000,), g).numpy()
    power = 1 - ShortfallLaw("power", alpha=2.5).sample((2_000_000,), g).numpy()
    fits = {}
    for name, s in (("gumbel", gum), ("power", power)):
        fits[name] = []
        for q in (0.9, 0.99, 0.999):
            u = np.quantile(s, q)
            fits[name].append(float(fit_exceedances_many((s[s > u] - u)[None, :])[0][0]))
    assert fits["gumbel"][0] < fits["gumbel"][1] < fits["gumbel"][2] < -0.1
    assert fits["gumbel"][2] - fits["gumbel"][0] > 0.1
    np.testing.assert_allclose(fits["power"], -0.4, atol=0.02)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "cauchy"}, "shortfall law must be one of"),
        ({"alpha": 0.0}, "alpha must be a finite number > 0"),
        ({"theta": math.nan}, "theta must be a finite number > 0"),
        ({"beta_d": math.inf}, "beta_d must be a finite number > 0"),
    ],
)
def test_bad_parameters(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ShortfallLaw(**kwargs)
