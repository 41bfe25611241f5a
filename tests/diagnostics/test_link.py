"""Link selection in its identified parametrisation: the identifiability property, the convex fit against a
general-purpose optimiser, recovery of a known (a, b), intervals, and degenerate winners."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from simcse_weince.diagnostics.link import (
    ScoreBatch,
    anchor_logliks,
    coefficients,
    fit_coefficients,
    mean_loglik,
    select_link,
)
from simcse_weince.losses.logits import weince_logits


def _batches(lam: float, beta: float, tau: float, n: int = 8, a: int = 128, c: int = 128, seed: int = 0):
    """Scores with shortfalls 1.6·Beta(2, 5) (the issue's probe), winners drawn from the blended law."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ga = torch.distributions.Gamma(2.0, 1.0)
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        x, y = ga.sample((a, c)), torch.distributions.Gamma(5.0, 1.0).sample((a, c))
        s = (1 - 1.6 * x / (x + y)).double()
        winner = torch.multinomial(weince_logits(s, lam, beta, tau).softmax(1), 1, generator=g)[:, 0]
        out.append(ScoreBatch(s, winner))
    return out


def test_equal_coefficients_give_equal_likelihoods() -> None:
    """(λ, β, τ) enter only through (a, b): three points of one (a, b) = (5, 1.5) agree to 1e-12 (the
    issue's probe found three λ̂ with one NLL); a point with another b does not."""
    batches = _batches(0.5, 3.0, 0.1, n=2)
    a, b = coefficients(0.5, 3.0, 0.1)
    assert (a, b) == pytest.approx((5.0, 1.5))
    values = [mean_loglik(batches, lam, b / lam, (1 - lam) / a) for lam in (0.12, 0.5, 0.88)]
    assert max(values) - min(values) < 1e-12
    assert abs(mean_loglik(batches, 0.5, 3.3, 0.1) - values[0]) > 1e-3  # b = 1.65: a different law
    # the (a, b) form of the likelihood is the same function
    assert float(anchor_logliks(batches, a, b).mean()) == pytest.approx(values[0], abs=1e-12)


def _nll(theta: np.ndarray, batches) -> float:
    return -float(anchor_logliks(batches, float(theta[0]), float(theta[1])).sum())


def test_newton_fit_is_the_maximum_likelihood() -> None:
    """The damped Newton optimum equals Nelder–Mead's from a distant start (the NLL is convex)."""
    batches = _batches(0.5, 3.0, 0.1, n=2, a=64, c=64, seed=3)
    fit = fit_coefficients(batches)
    assert fit.converged
    ref = minimize(_nll, x0=np.array([20.0, -3.0]), args=(batches,), method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})  # fmt: skip
    np.testing.assert_allclose(fit.theta, ref.x, atol=2e-4)
    assert -fit.mean_loglik * fit.n_anchors <= ref.fun + 1e-8
    soft = fit_coefficients(batches, endpoint_term=False)
    ref1 = minimize(lambda t: _nll(np.array([t[0], 0.0]), batches), x0=np.array([1.0]), method="Nelder-Mead",
                    options={"xatol": 1e-9, "fatol": 1e-12})  # fmt: skip
    assert soft.theta[0] == pytest.approx(ref1.x[0], abs=2e-4)


@pytest.mark.parametrize(("lam", "beta", "tau"), [(0.0, 1.0, 0.1), (0.5, 3.0, 0.1), (1.0, 3.0, 1.0)])
def test_select_link_recovers_the_coefficients(lam: float, beta: float, tau: float) -> None:
    """On 8 × 128 anchors of a fixed seed, â and b̂ lie within 3 standard errors of the truth, the standard
    errors are small enough to matter, and the held-out gain is ~0 for softmax winners, > 0.1 otherwise."""
    fit = select_link(_batches(lam, beta, tau))
    a_true, b_true = coefficients(lam, beta, tau)
    assert fit.converged
    assert abs(fit.a - a_true) < 3 * fit.a_se and fit.a_se < 1.0
    assert abs(fit.b - b_true) < 3 * fit.b_se and fit.b_se < 0.2
    assert fit.a_ci[0] < fit.a < fit.a_ci[1] and fit.b_ci[1] - fit.b_ci[0] == pytest.approx(2 * 1.959964 * fit.b_se)
    if lam == 0:
        assert abs(fit.heldout_gain) < 3 * fit.heldout_gain_se + 1e-3
        assert fit.softmax_tau == pytest.approx(tau, rel=0.05)
    else:
        assert fit.heldout_gain > 0.1 and fit.heldout_gain_ci[0] > 0
    assert fit.lam_at(tau) == pytest.approx(1 - fit.a * tau)


def _hessian(theta: np.ndarray, batches, h: float = 1e-3) -> np.ndarray:
    """Central finite differences of the summed NLL (exact for a quadratic; O(h²) here)."""
    out = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            e_i, e_j = np.eye(2)[i] * h, np.eye(2)[j] * h
            out[i, j] = (
                _nll(theta + e_i + e_j, batches)
                - _nll(theta + e_i - e_j, batches)
                - _nll(theta - e_i + e_j, batches)
                + _nll(theta - e_i - e_j, batches)
            ) / (4 * h * h)
    return out


def test_sandwich_matches_the_fisher_information_when_the_law_is_right() -> None:
    """Correctly specified: the sandwich SEs equal the inverse-Hessian (Fisher) ones up to sampling noise
    (~15 %), and they shrink like 1/√n (4× the anchors, half the SE)."""
    batches = _batches(0.5, 3.0, 0.1, n=8, seed=5)
    large = fit_coefficients(batches)
    fisher_se = np.sqrt(np.diag(np.linalg.inv(_hessian(np.array(large.theta), batches))))
    np.testing.assert_allclose(large.se, fisher_se, rtol=0.15)
    small = fit_coefficients(_batches(0.5, 3.0, 0.1, n=2, seed=5))
    ratio = np.array(small.se) / np.array(large.se)
    np.testing.assert_allclose(ratio, 2.0, rtol=0.2)


def test_winners_must_be_candidates() -> None:
    s = torch.zeros(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="one column index in"):
        fit_coefficients([ScoreBatch(s, torch.tensor([0, 1, 2, 3]))])
    excluded = torch.zeros(4, 3, dtype=torch.bool)
    excluded[0, 0] = True
    with pytest.raises(ValueError, match="a winner is an excluded entry"):
        fit_coefficients([ScoreBatch(s, torch.tensor([0, 1, 2, 0]), excluded)])


def test_winners_that_always_top_the_scores_are_flagged() -> None:
    """When the winner is every anchor's highest score, the likelihood grows without bound in a: not converged."""
    s = torch.rand(64, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1.8 - 0.9
    batches = [ScoreBatch(s, s.argmax(dim=1)), ScoreBatch(s.flip(0), s.flip(0).argmax(dim=1))]
    fit = select_link(batches)
    assert not fit.converged


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least 2 batches"):
        select_link(_batches(0.5, 3.0, 0.1, n=1, a=8, c=8))
    with pytest.raises(ValueError, match="level must be in"):
        select_link(_batches(0.5, 3.0, 0.1, n=2, a=8, c=8), level=1.0)
