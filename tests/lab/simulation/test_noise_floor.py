"""E1's closed forms against the values the authors' script writes, the vectorised inversion against a per-element
bisection, and the Monte-Carlo rates."""

from __future__ import annotations

import numpy as np
import pytest

from weince_lab.simulation.noise_floor import (
    SCORES,
    closed_forms,
    invert_softmax_mean,
    simulate_noise_floor,
    softmax_mean,
)

# noise_floor_results.csv of hsme98/weince synthetic/noise_floor_simulation.py (defaults), run outside this
# repository; its columns printed to 11 significant digits.
AUTHORS = {
    "true_log_odds": 1.71205293080,
    "softmax_pseudo_log_odds": 1.92454145974,
    "softmax_bias_floor": 0.04515137493,
    "softmax_godambe": 23.7109344342,
    "weibit_c": 7.1360262044,
}


def test_closed_forms_agree_with_the_authors_script() -> None:
    cf = closed_forms().to_dict()
    for key, value in AUTHORS.items():
        assert cf[key] == pytest.approx(value, abs=1e-9), key
    assert cf["softmax_pseudo_true"] == pytest.approx(2.566055280, abs=1e-9)


def test_closed_forms_from_first_principles() -> None:
    s = np.array(SCORES)
    x = -np.log1p(-s)
    p = (1 - s) ** -0.8 / ((1 - s) ** -0.8).sum()
    cf = closed_forms()
    assert cf.true_log_odds == pytest.approx(np.log(p[3] / p[0]), rel=1e-14)
    assert cf.weibit_fisher == pytest.approx(p @ x**2 - (p @ x) ** 2, rel=1e-12)
    m, _ = softmax_mean(np.array([cf.softmax_pseudo_true]), s)
    assert m[0] == pytest.approx(p @ s, abs=1e-14)  # the pseudo-true θ° matches the mean score


def _bisect(target: float, f: np.ndarray) -> float:
    lo, hi = -100.0, 100.0
    target = min(max(target, f.min() + 1e-10), f.max() - 1e-10)
    for _ in range(200):
        mid = (lo + hi) / 2
        w = np.exp(mid * f - (mid * f).max())
        lo, hi = (mid, hi) if (w / w.sum()) @ f < target else (lo, mid)
    return (lo + hi) / 2


def test_vectorised_inversion_equals_bisection() -> None:
    f = -np.log1p(-np.array(SCORES))
    targets = np.array([f.min() - 1.0, f.min() + 1e-3, 0.9, 1.4, f.max() - 1e-4, f.max() + 2.0])
    got = invert_softmax_mean(targets, f)
    np.testing.assert_allclose(got[1:5], [_bisect(t, f) for t in targets[1:5]], rtol=1e-9)
    # at the clipped ends the root is ill-conditioned (m is flat there): compare in the target's units
    clipped = np.clip(targets, f.min() + 1e-10, f.max() - 1e-10)
    np.testing.assert_allclose(softmax_mean(got, f)[0], clipped, atol=1e-12)


def test_monte_carlo_rates() -> None:
    """Weibit: n·MSE → c (within 4 SE); softmax: MSE above its floor and near floor + Godambe/n at large n."""
    rows = simulate_noise_floor((200, 5000), replications=3000, seed=1)
    cf = closed_forms()
    for r in rows:
        assert abs(r.mse_weibit - cf.weibit_c / r.n) < 4 * r.mse_weibit_se
        assert r.mse_softmax > cf.softmax_bias_floor
    big = rows[-1]
    assert abs(big.mse_softmax - big.softmax_floor_plus_godambe) < 4 * big.mse_softmax_se
