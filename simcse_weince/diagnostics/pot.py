"""Peaks over threshold: a generalised Pareto fit of the upper tail of similarity scores (spec §4).

For exceedances ``y = s − u > 0`` over the q-quantile ``u`` of the scores, the GPD has survival function
``P(Y > y) = (1 + ξ y / σ)^(−1/ξ)``. ξ < 0 is the Weibull domain of attraction — a finite upper endpoint,
estimated as ``u − σ/ξ`` — which is the geometry WEINCE's shortfall logit assumes (scores capped at 1).
The fit is maximum likelihood (``scipy.stats.genpareto.fit`` with location 0); the interval of ξ̂ is a
seeded percentile bootstrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import genpareto

MIN_EXCEEDANCES = 10


@dataclass
class GPDFit:
    q: float
    threshold: float
    n_scores: int
    n_exceedances: int
    xi: float
    sigma: float
    xi_ci: tuple[float, float]
    endpoint: float | None  # u − σ/ξ for ξ < 0
    log_likelihood: float

    def to_dict(self) -> dict:
        return asdict(self)


def fit_exceedances(exc: np.ndarray) -> tuple[float, float, float]:
    """(ξ̂, σ̂, log-likelihood) of positive exceedances by maximum likelihood.

    Raises:
        ValueError: fewer than ``MIN_EXCEEDANCES`` values, or no spread (all equal).
    """
    exc = np.asarray(exc, dtype=np.float64)
    if exc.size < MIN_EXCEEDANCES:
        raise ValueError(f"a GPD fit needs at least {MIN_EXCEEDANCES} exceedances, got {exc.size}")
    if not np.all(np.isfinite(exc)) or np.any(exc < 0):
        raise ValueError("exceedances must be finite and non-negative")
    if np.ptp(exc) <= 0:
        raise ValueError(f"all {exc.size} exceedances are equal ({exc[0]:.6g}): no tail shape to fit")
    xi, _, sigma = genpareto.fit(exc, floc=0.0)
    ll = float(np.sum(genpareto.logpdf(exc, xi, loc=0.0, scale=sigma)))
    return float(xi), float(sigma), ll


def fit_pot(
    scores: Sequence[float] | np.ndarray, q: float = 0.99, bootstrap: int = 200, seed: int = 0, level: float = 0.95
) -> GPDFit:
    """GPD fit of the exceedances of ``scores`` over their q-quantile, with a bootstrap interval of ξ̂.

    Raises:
        ValueError: ``q`` outside (0, 1), scores all equal, or too few exceedances (names the counts).
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    s = np.asarray(scores, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size == 0 or np.ptp(s) <= 0:
        raise ValueError(f"scores have no spread ({s.size} finite values, all equal): no tail to fit")
    u = float(np.quantile(s, q))
    exc = s[s > u] - u
    if exc.size < MIN_EXCEEDANCES:
        raise ValueError(
            f"only {exc.size} of {s.size} scores exceed the {q}-quantile {u:.6g}; a GPD fit needs at least "
            f"{MIN_EXCEEDANCES}: use more scores or a lower q"
        )
    xi, sigma, ll = fit_exceedances(exc)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(bootstrap):
        sample = rng.choice(exc, exc.size, replace=True)
        if np.ptp(sample) > 0:
            boots.append(genpareto.fit(sample, floc=0.0)[0])
    alpha = (1 - level) / 2
    ci = (float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))) if boots else (xi, xi)
    endpoint = u - sigma / xi if xi < 0 else None
    return GPDFit(q, u, int(s.size), int(exc.size), xi, sigma, ci, endpoint, ll)


def threshold_stability(
    scores: Sequence[float] | np.ndarray,
    qs: Sequence[float] = (0.98, 0.985, 0.99, 0.992, 0.995),
    bootstrap: int = 100,
    seed: int = 0,
) -> list[GPDFit]:
    """ξ̂ (with interval) over several thresholds: a stable ξ̂ supports the GPD tail model."""
    return [fit_pot(scores, q, bootstrap, seed) for q in qs]
