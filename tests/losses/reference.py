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


# ---- the field's losses -------------------------------------------------------------------------------------
def reference_candidates(a, p, layout: str, negatives=None, mask=None, absent=None):
    """Per anchor, by loops: ``(positive score, [(score, kind) for each negative left])``, ``kind`` one of
    ``"in_batch"`` (another row's positive or hard negative, or another view), ``"own_hard"`` (the anchor's own hard
    negative). NT-Xent: views ``[a; p]``, the positive of view i is i ± N. SimCSE: candidates
    ``[p_1..p_B | n_{1,1}..n_{B,1} | ...]``; an absent hard negative is no one's candidate, ``mask[i][col]`` drops one.
    """
    a, p = np.asarray(a, np.float64), np.asarray(p, np.float64)
    if layout == "ntxent":
        views, n = np.concatenate([a, p]), len(a)
        rows = []
        for i in range(2 * n):
            pos = (i + n) % (2 * n)
            kept = [j for j in range(2 * n) if j not in (i, pos) and not (mask is not None and mask[i][j])]
            rows.append((_cos(views[i], views[pos]), [(_cos(views[i], views[j]), "in_batch") for j in kept]))
        return rows
    b = len(a)
    cands, present, owner = list(p), [True] * b, list(range(b))
    for c, column in enumerate(np.asarray(negatives, np.float64) if negatives is not None else []):
        cands += list(column)
        present += [absent is None or not bool(absent[c][j]) for j in range(b)]
        owner += list(range(b))
    rows = []
    for i in range(b):
        negs = []
        for col in range(len(cands)):
            if col == i or not present[col] or (mask is not None and mask[i][col]):
                continue
            negs.append((_cos(a[i], cands[col]), "own_hard" if col >= b and owner[col] == i else "in_batch"))
        rows.append((_cos(a[i], p[i]), negs))
    return rows


def _lse(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def reference_hardness_infonce(rows, tau: float, mode: str, alpha: float, w: float = 0.0) -> float:
    """sentence-transformers' hardness weighting: ``α·s`` on the logits of the mode's negatives (in_batch_negatives:
    the in-batch ones; hard_negatives: the own hard ones; all_negatives: every one), then cross-entropy."""
    weighted = {"in_batch_negatives": {"in_batch"}, "hard_negatives": {"own_hard"},
                "all_negatives": {"in_batch", "own_hard"}}[mode]  # fmt: skip
    losses = []
    for pos, negs in rows:
        logits = [s / tau + (alpha * s if kind in weighted else 0.0) + (w if kind == "own_hard" else 0.0)
                  for s, kind in negs]  # fmt: skip
        losses.append(_lse([pos / tau, *logits]) - pos / tau)
    return float(np.mean(losses))


def reference_hcl(rows, tau: float, beta: float, tau_plus: float, w: float = 0.0) -> tuple[float, int]:
    """HCL as the authors' ``criterion`` (joshr17/HCL ``image/main.py``) states it, per anchor, in plain
    exponentials: ``imp = neg^β``, ``reweight = Σ imp·neg / mean(imp)``, ``Ng = (−τ⁺·N·pos + reweight)/(1 − τ⁺)``
    floored at ``N·e^{−1/τ}``, loss ``−log(pos/(pos + Ng))``. Also returns how many anchors sat at the floor."""
    losses, floored = [], 0
    for pos_s, negs in rows:
        if not negs:
            losses.append(0.0)
            continue
        pos = math.exp(pos_s / tau)
        neg = [math.exp(s / tau + (w if kind == "own_hard" else 0.0)) for s, kind in negs]
        n = len(neg)
        imp = [math.exp(beta * math.log(x)) for x in neg]
        reweight = sum(i * x for i, x in zip(imp, neg, strict=True)) / (sum(imp) / n)
        ng = (-tau_plus * n * pos + reweight) / (1 - tau_plus)
        floor = n * math.exp(-1 / tau)
        floored += ng < floor
        losses.append(-math.log(pos / (pos + max(ng, floor))))
    return float(np.mean(losses)), floored


def reference_dcl(rows, tau: float, sigma: float | None, w: float = 0.0) -> float:
    """DCL: ``−ω_i·s_ii/τ + log Σ_negatives e^{s_ij/τ}``; DCLW's ``ω_i = 2 − n·e^{s_ii/σ}/Σ_k e^{s_kk/σ}``."""
    pos = [r[0] for r in rows]
    weights = [1.0] * len(rows)
    if sigma is not None:
        total = sum(math.exp(s / sigma) for s in pos)
        weights = [2 - len(rows) * math.exp(s / sigma) / total for s in pos]
    losses = []
    for (s_pos, negs), omega in zip(rows, weights, strict=True):
        logits = [s / tau + (w if kind == "own_hard" else 0.0) for s, kind in negs]
        losses.append(_lse(logits) - omega * s_pos / tau if logits else 0.0)
    return float(np.mean(losses))


def reference_focal_infonce(rows, tau: float, m: float, w: float = 0.0) -> float:
    """Focal-InfoNCE (the authors' ``sp_logits``): the positive's logit ``s²/τ``, a negative's ``(s + m)·s/τ``."""
    losses = []
    for pos, negs in rows:
        logits = [(s + m) * s / tau + (w if kind == "own_hard" else 0.0) for s, kind in negs]
        losses.append(_lse([pos * pos / tau, *logits]) - pos * pos / tau)
    return float(np.mean(losses))


def reference_sigmoid(rows, t: float, b: float, w: float = 0.0) -> float:
    """SigLIP: ``Σ_j log(1 + e^{−y_ij (t·s_ij + b)})`` per anchor, y = +1 at the positive and −1 elsewhere, averaged
    over the anchors."""

    def softplus(x: float) -> float:
        return max(x, 0.0) + math.log1p(math.exp(-abs(x)))

    losses = []
    for pos, negs in rows:
        total = softplus(-(t * pos + b))
        total += sum(softplus(t * s + b + (w if kind == "own_hard" else 0.0)) for s, kind in negs)
        losses.append(total)
    return float(np.mean(losses))
