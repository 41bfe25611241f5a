"""Peaks over threshold: a generalised Pareto fit of the upper tail of similarity scores (``docs/algorithm.md`` §4).

For exceedances ``y = s − u > 0`` over the q-quantile ``u`` of the scores, the GPD has survival function
``P(Y > y) = (1 + ξ y / σ)^(−1/ξ)``. ξ < 0 is the Weibull domain of attraction — a finite upper endpoint,
estimated as ``u − σ/ξ`` — which is the geometry WEINCE's shortfall logit assumes (scores capped at 1).
The fit is maximum likelihood with location 0, vectorised over samples (:func:`fit_exceedances_many`) so that
the seeded percentile bootstrap of ξ̂ costs about one ``scipy.stats.genpareto.fit``.

Profile likelihood (Grimshaw 1993): with θ = ξ/σ, for fixed θ the likelihood is maximised by
ξ(θ) = (1/n) Σ log(1 + θ y_i) and σ = ξ(θ)/θ, which leaves
ℓ(θ) = −n log(ξ(θ)/θ) − n (1 + ξ(θ)) over θ > −1/max(y) (θ → 0: the exponential law). ℓ is unbounded as
θ → −1/max(y), where ξ(θ) → −∞ (the known non-regularity for ξ < −1), so the maximum is sought where
ξ(θ) ≥ −1: a grid in t = θ·max(y), then golden-section refinement around the best grid point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

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
    xi, sigma, ll = fit_exceedances_many(exc[None, :])
    return float(xi[0]), float(sigma[0]), float(ll[0])


# the t = θ·max(y) grid of the profile likelihood: (−1, 0) densely near −1, then (0, 1e5] logarithmically
_T_GRID = np.concatenate([-(1 - np.logspace(-7, 0, 60, endpoint=False)), np.logspace(-6, 5, 80)])
_GOLDEN = (np.sqrt(5) - 1) / 2
_CHUNK_ELEMENTS = 20_000_000


def _profile(y: np.ndarray, ymax: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Profile log-likelihood ℓ and ξ(θ) at t = θ·max(y); y (R, n), t (R, G) -> (R, G) each."""
    theta = t / ymax[:, None]
    xi = np.log1p(theta[:, :, None] * y[:, None, :]).mean(axis=2)
    n = y.shape[1]
    ll = -n * np.log(xi / theta) - n * (1 + xi)
    return np.where(xi >= -1, ll, -np.inf), xi


def fit_exceedances_many(samples: np.ndarray, refine_steps: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximum-likelihood (ξ̂, σ̂, log-likelihood) of each row of positive exceedances (R, n), vectorised.

    Agrees with ``scipy.stats.genpareto.fit(row, floc=0)`` to ~1e-4 in ξ̂ at an equal or higher likelihood
    for ξ > −1 (tested); the search stops at ξ = −1, where the likelihood becomes unbounded and scipy goes beyond.
    Rows are processed in chunks to bound memory (a single row of n exceedances needs ~140·n floats).
    """
    y = np.asarray(samples, dtype=np.float64)
    if y.shape[0] == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    rows = max(1, _CHUNK_ELEMENTS // (y.shape[1] * _T_GRID.size))
    parts = [_fit_chunk(y[i : i + rows], refine_steps) for i in range(0, y.shape[0], rows)]
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def _fit_chunk(y: np.ndarray, refine_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ymax = y.max(axis=1)
    ll, _ = _profile(y, ymax, np.broadcast_to(_T_GRID, (y.shape[0], _T_GRID.size)))
    k = ll.argmax(axis=1)
    lo = _T_GRID[np.clip(k - 1, 0, _T_GRID.size - 1)]
    hi = _T_GRID[np.clip(k + 1, 0, _T_GRID.size - 1)]
    for _ in range(refine_steps):  # golden section on [lo, hi], every row at once
        c, d = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
        fc = _profile(y, ymax, c[:, None])[0][:, 0]
        fd = _profile(y, ymax, d[:, None])[0][:, 0]
        left = fc > fd
        hi, lo = np.where(left, d, hi), np.where(left, lo, c)
    # The best of the bracket's midpoint, its ends and the best grid point: at the ξ = −1 boundary the bracket closes
    # on the edge of the feasible set and its midpoint can fall just outside (ℓ = −inf).
    cand = np.stack([(lo + hi) / 2, lo, hi, _T_GRID[k]], axis=1)  # (R, 4)
    ll, xi = _profile(y, ymax, cand)
    best = ll.argmax(axis=1)
    rows = np.arange(y.shape[0])
    t, ll, xi = cand[rows, best], ll[rows, best], xi[rows, best]
    return xi, xi / (t / ymax), ll


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
    samples = rng.choice(exc, (bootstrap, exc.size), replace=True)
    samples = samples[np.ptp(samples, axis=1) > 0]
    boots = fit_exceedances_many(samples)[0] if len(samples) else []
    ci = percentile_interval(boots, xi, level)
    endpoint = u - sigma / xi if xi < 0 else None
    return GPDFit(q, u, int(s.size), int(exc.size), xi, sigma, ci, endpoint, ll)


def percentile_interval(
    boots: Sequence[float] | np.ndarray, estimate: float, level: float = 0.95
) -> tuple[float, float]:
    """The ``level`` percentile bootstrap interval ``[Q(α), Q(1 − α)]``, α = (1 − level)/2, widened to contain
    ``estimate``; ``(estimate, estimate)`` without bootstrap values.

    A percentile interval need not contain its estimate: the bootstrap law of ξ̂ is skewed near the ξ = −1 edge of
    the likelihood, and there the estimate and every bootstrap fit sit on the edge and differ by rounding only
    (ξ̂ = −1 with Q(α) = −1 + 1e-15). Reporting ``[min(Q(α), ξ̂), max(Q(1 − α), ξ̂)]`` keeps ``lo ≤ ξ̂ ≤ hi``, which
    every reader (and every error-bar plot) assumes; where the widening is more than rounding it is visible as an
    end equal to the estimate.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = np.asarray(boots, dtype=np.float64)
    if values.size == 0:
        return float(estimate), float(estimate)
    alpha = (1 - level) / 2
    lo, hi = float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))
    return min(lo, float(estimate)), max(hi, float(estimate))


def threshold_stability(
    scores: Sequence[float] | np.ndarray,
    qs: Sequence[float] = (0.98, 0.985, 0.99, 0.992, 0.995),
    bootstrap: int = 100,
    seed: int = 0,
) -> list[GPDFit]:
    """ξ̂ (with interval) over several thresholds: a stable ξ̂ supports the GPD tail model."""
    return [fit_pot(scores, q, bootstrap, seed) for q in qs]
