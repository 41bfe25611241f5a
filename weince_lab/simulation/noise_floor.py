r"""E1: the WEINCE authors' synthetic noise-floor experiment, with its closed forms.

Setting (the ``synthetic/`` folder of the authors' repository): four candidates with scores
s = (0.15, 0.45, 0.70, 0.90) and endpoint features x_j = −log(1 − s_j); winners drawn n times from the Weibit
law p*_j ∝ (1 − s_j)^(−β*) = softmax(β* x)_j, β* = 0.8. The target is the log-odds of the top candidate (s = 0.90)
against the reference (s = 0.15), Λ* = log(p*_top/p*_ref) = β*·(x_top − x_ref).

Both estimators are the one-parameter multinomial-logit MLE q(t) = softmax(t·f) on the counts c of n winners,
whose score equation is moment matching, Σ_j (c_j/n) f_j = E_{q(t)}[f] (inverted for every replication at once
by :func:`invert_softmax_mean`):

* **Weibit** (correctly specified), f = x: β̂, Λ̂_W = β̂ (x_top − x_ref). Its MSE is the Cramér–Rao rate
  c/n with c = (x_top − x_ref)² / Var_{p*}(x) (the Fisher information of β per draw is Var_{p*}(x)).
* **Softmax** (misspecified), f = s: θ̂, Λ̂_S = θ̂ (s_top − s_ref). θ̂ converges to the pseudo-true θ°, the root
  of E_{p*}[s] = E_{softmax(θ° s)}[s], so its MSE has the **bias floor** (θ°(s_top − s_ref) − Λ*)² > 0 that no n
  removes; around it the Godambe (sandwich) variance n·Var(θ̂) → B/A², A = Var_{q°}(s), B = E_{p*}[(s − μ)²]
  with μ = E_{q°}[s] = E_{p*}[s], i.e. MSE_S ≈ floor + (s_top − s_ref)² B/(A² n).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

SCORES = (0.15, 0.45, 0.70, 0.90)
BETA_STAR = 0.8
SAMPLE_SIZES = (100, 200, 500, 1000, 2000, 5000, 10000)
REFERENCE = 0  # the candidate with s = 0.15
BRACKET = (-100.0, 100.0)
CLIP = 1e-10


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (stable: the maximum subtracted)."""
    w = np.exp(z - z.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def softmax_mean(t: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E_{softmax(t f)}[f] and Var_{softmax(t f)}[f] for a vector of t."""
    q = softmax(t[:, None] * f[None, :])
    m = q @ f
    return m, q @ (f * f) - m * m


def invert_softmax_mean(target: np.ndarray, f: np.ndarray, tol: float = 1e-13, max_iter: int = 200) -> np.ndarray:
    """The t with E_{softmax(t f)}[f] = target, for every target at once.

    m(t) = E_{softmax(t f)}[f] is increasing (m' = Var ≥ 0), so the root is kept in a bracket that every step
    shrinks: a Newton step where it stays inside the bracket, a bisection step elsewhere (safeguarded Newton).
    Targets are clipped to [min f + 1e-10, max f − 1e-10], the bracket is [−100, 100].
    """
    f = np.asarray(f, dtype=np.float64)
    target = np.clip(np.asarray(target, dtype=np.float64), f.min() + CLIP, f.max() - CLIP)
    lo = np.full(target.shape, BRACKET[0])
    hi = np.full(target.shape, BRACKET[1])
    t = np.zeros(target.shape)
    for _ in range(max_iter):
        m, v = softmax_mean(t, f)
        below = m < target
        lo, hi = np.where(below, t, lo), np.where(below, hi, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = t + (target - m) / v
        inside = np.isfinite(newton) & (newton > lo) & (newton < hi)
        t_new = np.where(inside, newton, (lo + hi) / 2)
        if np.all(np.abs(t_new - t) <= tol * np.maximum(1.0, np.abs(t))):
            return t_new
        t = t_new
    return t


@dataclass(frozen=True)
class ClosedForms:
    true_log_odds: float
    softmax_pseudo_true: float  # θ°
    softmax_pseudo_log_odds: float
    softmax_bias_floor: float
    softmax_godambe: float  # B / A², n·Var(θ̂)
    softmax_godambe_log_odds: float  # (s_top − s_ref)² B / A²
    weibit_fisher: float  # Var_{p*}(x), per draw
    weibit_c: float  # MSE_W ≈ c / n

    def to_dict(self) -> dict:
        return asdict(self)


def weibit_probs(scores: np.ndarray, beta: float) -> np.ndarray:
    return softmax(-beta * np.log1p(-scores))


def closed_forms(scores: tuple[float, ...] = SCORES, beta: float = BETA_STAR) -> ClosedForms:
    """Every exact quantity of the setting (see the module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    x = -np.log1p(-s)
    top = int(s.argmax())
    p = weibit_probs(s, beta)
    true_lo = beta * (x[top] - x[REFERENCE])
    theta = float(invert_softmax_mean(np.array([p @ s]), s)[0])
    q = softmax(theta * s)
    mu = q @ s
    a_var = q @ (s - mu) ** 2
    b_var = p @ (s - mu) ** 2
    gap_s, gap_x = s[top] - s[REFERENCE], x[top] - x[REFERENCE]
    pseudo = theta * gap_s
    fisher = p @ (x - p @ x) ** 2
    return ClosedForms(
        true_log_odds=float(true_lo),
        softmax_pseudo_true=theta,
        softmax_pseudo_log_odds=float(pseudo),
        softmax_bias_floor=float((pseudo - true_lo) ** 2),
        softmax_godambe=float(b_var / a_var**2),
        softmax_godambe_log_odds=float(gap_s**2 * b_var / a_var**2),
        weibit_fisher=float(fisher),
        weibit_c=float(gap_x**2 / fisher),
    )


@dataclass(frozen=True)
class NoiseFloorRow:
    n: int
    mse_weibit: float
    mse_weibit_se: float
    mse_softmax: float
    mse_softmax_se: float
    weibit_c_over_n: float
    softmax_floor_plus_godambe: float

    def to_dict(self) -> dict:
        return asdict(self)


def simulate_noise_floor(
    sample_sizes: tuple[int, ...] = SAMPLE_SIZES,
    replications: int = 12_000,
    seed: int = 0,
    scores: tuple[float, ...] = SCORES,
    beta: float = BETA_STAR,
) -> list[NoiseFloorRow]:
    """Monte-Carlo MSE of both log-odds estimators per n (SE = sd of the squared errors / √replications)."""
    s = np.asarray(scores, dtype=np.float64)
    x = -np.log1p(-s)
    top = int(s.argmax())
    p = weibit_probs(s, beta)
    cf = closed_forms(scores, beta)
    rng = np.random.default_rng(seed)
    rows = []
    for n in sample_sizes:
        freq = rng.multinomial(n, p, size=replications) / n  # (R, 4)
        beta_hat = invert_softmax_mean(freq @ x, x)
        theta_hat = invert_softmax_mean(freq @ s, s)
        err_w = (beta_hat * (x[top] - x[REFERENCE]) - cf.true_log_odds) ** 2
        err_s = (theta_hat * (s[top] - s[REFERENCE]) - cf.true_log_odds) ** 2
        root = np.sqrt(replications)
        rows.append(
            NoiseFloorRow(
                n=int(n),
                mse_weibit=float(err_w.mean()),
                mse_weibit_se=float(err_w.std(ddof=1) / root),
                mse_softmax=float(err_s.mean()),
                mse_softmax_se=float(err_s.std(ddof=1) / root),
                weibit_c_over_n=cf.weibit_c / n,
                softmax_floor_plus_godambe=cf.softmax_bias_floor + cf.softmax_godambe_log_odds / n,
            )
        )
    return rows
