"""Per-anchor loop references written directly from the papers, in plain NumPy (float64).

* :func:`reference_weince`: WEINCE from ``docs/algorithm.md``, in the SimCSE, supervised (hard negatives) and NT-Xent
  layouts;
* :func:`reference_simcse_supervised`: SimCSE's supervised loss (Gao et al. 2021, eq. 5, with the
  ``hard_negative_weight`` of its code).

Deliberately independent of the vectorised code: ``np.polyfit`` for the fits, Python loops over anchors
and candidates, ``sorted`` for quantiles and the tail.
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


def _cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(u, v) / max(np.linalg.norm(u) * np.linalg.norm(v), 1e-12))


def reference_simcse_supervised(
    anchors: np.ndarray,
    positives: np.ndarray,
    negatives: np.ndarray,
    *,
    temperature: float = 0.05,
    hard_negative_weight: float = 0.0,
) -> float:
    """SimCSE's supervised loss: for anchor h_i the logits are ``[cos(h_i, h⁺_j)/τ for all j]`` followed, for
    each negative column c, by ``[cos(h_i, h⁻_{j,c})/τ + w·[j == i] for all j]``; the loss is the mean
    cross-entropy of index i.

    Args:
        anchors, positives: (B, D).
        negatives: (k, B, D), one block per negative column (k = 1 is SimCSE's triplet recipe).
    """
    b = anchors.shape[0]
    losses = []
    for i in range(b):
        logits = [_cos(anchors[i], positives[j]) / temperature for j in range(b)]
        for column in negatives:
            logits += [
                _cos(anchors[i], column[j]) / temperature + (hard_negative_weight if j == i else 0.0) for j in range(b)
            ]
        m = max(logits)
        lse = m + math.log(sum(math.exp(v - m) for v in logits))
        losses.append(lse - logits[i])
    return float(np.mean(losses))


def reference_weince(
    anchors: np.ndarray,
    positives: np.ndarray,
    *,
    negatives: np.ndarray | None = None,
    hard_negative_weight: float = 0.0,
    layout: str = "simcse",
    temperature: float = 0.05,
    negative_mask: np.ndarray | None = None,
    absent: np.ndarray | None = None,
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
    """WEINCE of ``docs/algorithm.md`` §1–§3 by loops over anchors.

    With ``negatives`` (k, B, D) the layout is the supervised one: candidates ``[positives; negatives[0];
    …; negatives[k−1]]``, the positive of anchor i is column i, its negatives all other (1+k)B − 1 columns,
    and ``hard_negative_weight`` is added to the final (blended) logit of columns c·B + i only. ``absent``
    (k, B) bool drops column (c+1)·B + i from every anchor's candidates where ``absent[c, i]`` (a row without
    that hard negative): it is in neither the statistics (nor K) nor the softmax.
    """
    a = _normalise(anchors.astype(np.float64))
    p = _normalise(positives.astype(np.float64))
    b = a.shape[0]
    hard: list[set[int]] = [set() for _ in range(2 * b)]  # own hard-negative columns per anchor (supervised)
    if negatives is not None:
        assert layout == "simcse"
        cands = np.concatenate([p, *(_normalise(n.astype(np.float64)) for n in negatives)])
        sim = a @ cands.T
        pos = list(range(b))
        own: list[int | None] = [None] * b
        hard = [{(c + 1) * b + i for c in range(len(negatives))} for i in range(b)]
    elif layout == "simcse":
        sim = a @ p.T
        pos = list(range(b))
        own = [None] * b
    else:
        z = np.concatenate([a, p])
        sim = z @ z.T
        pos = [i + b for i in range(b)] + list(range(b))
        own = list(range(2 * b))
    n_anchor, n_cand = sim.shape
    mask = np.zeros_like(sim, dtype=bool) if negative_mask is None else negative_mask.astype(bool)
    gone = set() if absent is None else {(c + 1) * b + i for c, i in zip(*np.nonzero(absent), strict=True)}

    rho, d_aic, beta_ols, beta_hill, deltas = [], [], [], [], []
    for i in range(n_anchor):
        negs = [j for j in range(n_cand) if j != pos[i] and j != own[i] and j not in gone]
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
        cands = [pos[i]] + [
            j for j in range(n_cand) if j != pos[i] and j != own[i] and not mask[i, j] and j not in gone
        ]
        logits = []
        for j in cands:
            s = float(sim[i, j])
            short = -math.log1p(-min(s, 1 - eps))
            weight = hard_negative_weight if j in hard[i] else 0.0  # after the blend; never in the statistics
            logits.append((1 - lam[i]) * s / temperature + lam[i] * beta[i] * short + weight)
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
