"""PNG plots of the simulation experiments (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simcse_weince.diagnostics.plots import headless_pyplot
from weince_lab.simulation.noise_floor import ClosedForms, NoiseFloorRow
from weince_lab.simulation.sweep_reports import select
from weince_lab.simulation.sweep_settings import SweepSettings


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_noise_floor(rows: Sequence[NoiseFloorRow], cf: ClosedForms, path: Path) -> Path:
    """E1: MSE of both log-odds estimators against n, with c/n and the softmax bias floor."""
    plt = headless_pyplot()
    n = np.array([r.n for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for key, label, color in (("weibit", "Weibit (correct)", "tab:blue"), ("softmax", "softmax", "tab:red")):
        mse = np.array([getattr(r, f"mse_{key}") for r in rows])
        se = np.array([getattr(r, f"mse_{key}_se") for r in rows])
        ax.errorbar(n, mse, yerr=2 * se, marker="o", color=color, label=f"{label} (±2 SE)")
    ax.plot(n, cf.weibit_c / n, "b--", lw=1, label=f"Weibit c/n, c = {cf.weibit_c:.3f}")
    ax.plot(n, cf.softmax_bias_floor + cf.softmax_godambe_log_odds / n, "r:", lw=1, label="floor + Godambe/n")
    ax.axhline(cf.softmax_bias_floor, color="r", ls="--", lw=1, label=f"bias floor {cf.softmax_bias_floor:.4f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (winners)")
    ax.set_ylabel("MSE of the top-vs-reference log-odds")
    ax.set_title("E1: the softmax's noise floor (Weibit winners, β* = 0.8)")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def plot_link_calibration(grids: dict[str, list[dict]], path: Path) -> Path:
    """E2: â, b̂ (mean ± RMSE) and the held-out vs true gain against λ*, one marker per scale."""
    plt = headless_pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for (scale, grid), marker in zip(grids.items(), "os^", strict=False):
        lam = np.array([c["lam"] for c in grid])
        for ax, key in zip(axes[:2], ("a", "b"), strict=True):
            mean = np.array([c[key]["mean"] for c in grid])
            rmse = np.array([c[key]["rmse"] for c in grid])
            ax.errorbar(lam, mean, yerr=rmse, marker=marker, ls="none", capsize=3, label=f"{scale} (mean ± RMSE)")
            ax.plot(lam, [c[key]["truth"] for c in grid], "k-", lw=1)
        heldout = [c["gain"]["heldout_mean"] for c in grid]
        axes[2].plot(lam, heldout, marker=marker, ls="none", label=f"{scale} held-out")
        axes[2].plot(lam, [c["gain"]["true_mean"] for c in grid], "k-", lw=1)
    for ax, title in zip(axes, ("a = (1 − λ)/τ", "b = λβ", "gain over softmax (nats/anchor)"), strict=True):
        ax.set_xlabel("λ* (truth: black line)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def plot_pot_calibration(cells: Sequence[dict], path: Path) -> Path:
    """E2: ξ̂ (mean ± RMSE) per cell against the true ξ, labelled with the interval's coverage."""
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    x = np.arange(len(cells))
    ax.errorbar(x, [c["mean"] for c in cells], yerr=[c["rmse"] for c in cells], marker="o", ls="none", capsize=3)
    ax.plot(x, [c["truth"] for c in cells], "k_", ms=20, label="true ξ")
    for i, c in enumerate(cells):
        ax.annotate(f"{100 * c['coverage']:.0f}%", (i, c["mean"] + c["rmse"]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [f"{c['law']}\nn={c['n_scores']:,} q={c['q']}" for c in cells], fontsize=6, rotation=60)
    ax.set_ylabel("ξ̂ (mean ± RMSE); label: 95% CI coverage")
    ax.set_title("E2: POT ξ̂ against the truth")
    ax.legend()
    return _save(plt, fig, path)


def plot_lambda_cells(cells: Sequence[dict], path: Path) -> Path:
    """E3: mean λ and share λ > 1/2 per cell."""
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.5))
    x = np.arange(len(cells))
    ax.bar(x - 0.2, [c["lambda_mean"] for c in cells], 0.4, label="mean λ")
    ax.bar(x + 0.2, [c["share_gt_half"] for c in cells], 0.4, label="share λ > 0.5")
    ax.axhline(0.2, color="k", ls="--", lw=1, label="q = 0.2")
    ax.set_xticks(x, [c["cell"] for c in cells], fontsize=5, rotation=80)
    ax.set_title("E3: WEINCE's online λ across tail shape, hardness and winner law")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def plot_sweep(settings: SweepSettings, summary: dict, path: Path) -> Path:
    """Ground truth II: one panel per kernel, the gap against k, τ or the arm, per loss."""
    plt = headless_pyplot()
    s, records = settings.to_dict(), summary["cells"]
    fig, axes = plt.subplots(1, len(s["kernels"]), figsize=(4.2 * len(s["kernels"]), 3.6), squeeze=False)
    for ax, kernel in zip(axes[0], s["kernels"], strict=True):
        if s["sweep"] == "proposition":  # the anchor-excluded variant solid, the literal one dashed, one colour per τ
            for i, tau in enumerate(s["taus"]):
                g = select(records, kernel=kernel, tau=tau)
                for variant in s["variants"]:
                    rows = [(r if variant == "excluded" else r[variant])["rows"] for r in g]
                    gaps = np.abs(np.mean([[row["gap"] for row in x] for x in rows], axis=0))
                    style = "o-" if variant == "excluded" else "s--"
                    ax.loglog(s["ks"], gaps, style, color=f"C{i}", label=f"|CE − R_k|, τ = {tau:g}, {variant}")
            ax.loglog(s["ks"], gaps[0] * s["ks"][0] / np.asarray(s["ks"], dtype=float), "k:", label="slope −1")
            ax.set_xlabel("negatives k")
        elif s["sweep"] == "negatives":
            for loss in s["losses"]:
                m = [
                    np.mean([r["universe_gap"] for r in select(records, kernel=kernel, loss=loss, k=k)])
                    for k in s["ks"]
                ]
                ax.loglog(s["ks"], m, "o-", label=loss)
            ax.set_xlabel("negatives k")
            ax.set_ylabel("universe KL to the Bayes search")
        elif s["sweep"] == "encoder":
            for i, part in enumerate(("train", "heldout")):
                m = [
                    np.mean([r[part]["universe_gap"] for r in select(records, kernel=kernel, loss=x)])
                    for x in s["losses"]
                ]
                ax.bar(np.arange(len(m)) + 0.4 * i, m, width=0.4, label="trained items" if i == 0 else "held-out items")
            ax.set_xticks(np.arange(len(s["losses"])) + 0.2, s["losses"])
            ax.set_ylabel("universe KL to the Bayes search")
        else:
            for loss in s["losses"]:
                for n in s["pairs"]:
                    m = [
                        np.mean([r["universe_gap"] for r in select(records, kernel=kernel, loss=loss, tau=t, pairs=n)])
                        for t in s["taus"]
                    ]
                    ax.loglog(s["taus"], m, "o-", label=f"{loss}, n = {n:,}")
            ax.set_xlabel("temperature τ")
            ax.set_ylabel("universe KL to the Bayes search")
        ax.set_title(kernel)
        ax.legend(fontsize=7)
    return _save(plt, fig, path)
