"""PNG plots of the diagnostics (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def headless_pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_tail(scores: np.ndarray, fit, path: Path) -> Path:
    """Histogram of the exceedances over the threshold with the fitted GPD density (and endpoint)."""
    from scipy.stats import genpareto

    plt = headless_pyplot()
    exc = scores[scores > fit.threshold] - fit.threshold
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(exc, bins=40, density=True, alpha=0.6, label=f"{exc.size} exceedances over u={fit.threshold:.4f}")
    grid = np.linspace(0, exc.max() * 1.02, 300)
    ax.plot(
        grid,
        genpareto.pdf(grid, fit.xi, loc=0, scale=fit.sigma),
        "r-",
        label=f"GPD ξ̂={fit.xi:.3f} [{fit.xi_ci[0]:.3f}, {fit.xi_ci[1]:.3f}], σ̂={fit.sigma:.4f}",
    )
    if fit.endpoint is not None:
        ax.axvline(fit.endpoint - fit.threshold, color="k", ls="--", label=f"endpoint {fit.endpoint:.4f}")
    ax.set_xlabel("score − u")
    ax.set_ylabel("density")
    ax.set_title(f"Negative-score tail (q = {fit.q})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def error_bars(estimates: Sequence[float] | np.ndarray, intervals: Sequence[Sequence[float]]) -> np.ndarray:
    """Matplotlib's ``yerr`` (2, n) of intervals ``[lo, hi]`` around ``estimates``: the distances to each end,
    clipped at 0. An estimate on an edge of its interval (a zero-width interval, or ξ̂ = −1 with the end equal up to
    rounding) gives a bar of length 0, never the tiny negative length that matplotlib refuses."""
    est = np.asarray(estimates, dtype=np.float64)
    ends = np.asarray(intervals, dtype=np.float64).reshape(-1, 2)
    return np.clip(np.stack([est - ends[:, 0], ends[:, 1] - est]), 0.0, None)


def plot_stability(fits: Sequence, path: Path) -> Path:
    plt = headless_pyplot()
    qs = [f.q for f in fits]
    xi = np.array([f.xi for f in fits])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(qs, xi, yerr=error_bars(xi, [f.xi_ci for f in fits]), fmt="o-", capsize=4)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("threshold quantile q")
    ax.set_ylabel("GPD shape ξ̂ (95% bootstrap interval)")
    ax.set_title("Threshold stability (ξ < 0: Weibull domain, finite endpoint)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_lambda(lam: np.ndarray, path: Path, title: str = "Per-anchor WEINCE weight λ") -> Path:
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(lam, bins=40, range=(0, 1))
    ax.axvline(float(np.mean(lam)), color="r", ls="--", label=f"mean {np.mean(lam):.3f}")
    ax.set_xlabel("λ")
    ax.set_ylabel("anchors")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_link(link, path: Path) -> Path:
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    vals = [link.heldout_ll_softmax, link.heldout_ll_family]
    family = f"WEINCE family\na={link.a:.2f}, b={link.b:.2f}"
    ax.bar(["softmax link", family], vals, color=["grey", "tab:blue"])
    ax.set_ylabel("held-out mean log-likelihood (nats / anchor)")
    ax.set_title(f"Link selection: gain {link.heldout_gain:+.3f} nats / anchor")
    lo = min(vals)
    ax.set_ylim(lo - 0.1 * abs(lo) - 0.05, max(vals) + 0.05 * abs(lo) + 0.05)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
