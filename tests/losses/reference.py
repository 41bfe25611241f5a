"""A per-anchor loop reference of WEINCE written directly from the spec, in plain NumPy (float64).

Deliberately independent of the vectorised code: ``np.polyfit`` for the fits, Python loops over anchors,
``sorted`` for quantiles and the tail.
"""

from __future__ import annotations

import math

import numpy as np


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    slope, intercept = np.polyfit(x, y, 1)
    sse = float(np.sum((y - (intercept + slope * x)) ** 2))
    return float(slope), sse


def reference_weince(
    anchors: np.ndarray,
    positives: np.ndarray,
    *,
    layout: str = "simcse",
    temperature: float = 0.05,
    negative_mask: np.ndarray | None = None,
    beta_mode: str = "ols",
    beta_clamp: tuple[float, float] = (0.5, 16.0),
    min_tail_points: int = 32,
    tail_frac: float = 0.10,
    q: float = 0.2,
    kappa_rho: float = 10.0,
    kappa_aic: float = 1.0,
    margin: float = 2.0,
    eps: float = 1e-6,
    fixed_lambda: float | None = None,
) -> dict[str, np.ndarray | float]:
    a = _normalise(anchors.astype(np.float64))
    p = _normalise(positives.astype(np.float64))
    b = a.shape[0]
    if layout == "simcse":
        sim = a @ p.T
        pos = list(range(b))
        own: list[int | None] = [None] * b
    else:
        z = np.concatenate([a, p])
        sim = z @ z.T
        pos = [i + b for i in range(b)] + list(range(b))
        own = list(range(2 * b))
    n_anchor, n_cand = sim.shape
    mask = np.zeros_like(sim, dtype=bool) if negative_mask is None else negative_mask.astype(bool)

    rho, d_aic, beta_ols, beta_hill, deltas = [], [], [], [], []
    for i in range(n_anchor):
        negs = [j for j in range(n_cand) if j != pos[i] and j != own[i]]
        big_k = len(negs)
        vals = [(-1.0 if mask[i, j] else float(sim[i, j])) for j in negs]
        k_tail = min(max(max(min_tail_points, round(tail_frac * big_k)), 10), big_k)
        top = sorted(vals, reverse=True)[:k_tail]
        delta = np.array([max(1.0 - s, eps) for s in top])  # ascending
        deltas.append(delta)
        rho.append(delta[0])
        burn = max(1, k_tail // 20)
        n = k_tail - burn
        if n < 2:
            d_aic.append(0.0)
            beta_ols.append(1.0)
            beta_hill.append(1.0)
            continue
        levels = np.array([k / (k_tail + 1) for k in range(1, k_tail + 1)])[burn:]
        x = np.log(delta[burn:])
        bw, sse_w = _fit(x, np.log(levels))
        gg, sse_g = _fit(x, np.log(-np.log(levels)))
        sse_w = max(sse_w, 1e-12) + (1e6 if bw <= 0 else 0.0)
        sse_g = max(sse_g, 1e-12) + (1e6 if gg >= 0 else 0.0)
        aic_w = n * math.log(sse_w / n) + 4
        aic_g = n * math.log(sse_g / n) + 4
        d_aic.append(aic_g - aic_w)
        beta_ols.append(bw)
        kk = k_tail - 1
        denom = sum(math.log(delta[kk] / delta[j]) for j in range(kk))
        beta_hill.append(kk / denom if denom > 0 else math.inf)

    rho_sorted = sorted(rho)
    rho0 = rho_sorted[round(q * (len(rho) - 1))]
    degenerate = len(deltas[0]) - max(1, len(deltas[0]) // 20) < 2
    lam, beta = [], []
    for i in range(n_anchor):
        if beta_mode == "unit" or degenerate:
            bi = 1.0
        elif beta_mode == "ols":
            bi = min(max(beta_ols[i], beta_clamp[0]), beta_clamp[1])
        else:
            bi = min(max(beta_hill[i], beta_clamp[0]), beta_clamp[1])
        beta.append(bi)
        if degenerate:
            li = 0.0
        else:
            g1 = 1 / (1 + math.exp(-kappa_rho * (math.log(rho0) - math.log(rho[i]))))
            g2 = 1 / (1 + math.exp(-kappa_aic * (d_aic[i] - margin)))
            li = g1 * g2
        lam.append(fixed_lambda if fixed_lambda is not None else li)

    losses = []
    for i in range(n_anchor):
        cands = [pos[i]] + [j for j in range(n_cand) if j != pos[i] and j != own[i] and not mask[i, j]]
        logits = []
        for j in cands:
            s = float(sim[i, j])
            short = -math.log1p(-min(s, 1 - eps))
            logits.append((1 - lam[i]) * s / temperature + lam[i] * beta[i] * short)
        m = max(logits)
        lse = m + math.log(sum(math.exp(v - m) for v in logits))
        losses.append(lse - logits[0])

    return {
        "lam": np.array(lam),
        "beta": np.array(beta),
        "rho": np.array(rho),
        "delta_aic": np.array(d_aic),
        "beta_ols": np.array(beta_ols),
        "rho0": rho0,
        "loss": float(np.mean(losses)),
    }
