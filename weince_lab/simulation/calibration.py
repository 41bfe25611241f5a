r"""E2: the shipped diagnostics against a known truth.

* :func:`pot_calibration` — the peaks-over-threshold ξ̂ of :func:`~simcse_weince.diagnostics.pot.fit_pot` and its
  bootstrap interval, on scores s = 1 − c·D whose GPD shape ξ is known (``ShortfallLaw.xi``), over replications:
  bias E[ξ̂] − ξ, RMSE, and the share of intervals that contain ξ (coverage).
* :func:`link_calibration` — :func:`~simcse_weince.diagnostics.link.select_link` on winners drawn from a blended law
  with known (λ*, β*, τ*), i.e. known (a*, b*) = ((1 − λ*)/τ*, λ*β*): bias, RMSE and interval coverage of â and b̂,
  and the held-out gain against the true gain (the exact KL of the true law from the pseudo-true softmax on the
  held-out scores, :func:`~weince_lab.simulation.winners.true_gain`).

Each replication draws fresh scores from its own seed (``seed + replication``), so every cell is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from simcse_weince.diagnostics.link import select_link
from simcse_weince.diagnostics.pot import fit_pot
from weince_lab.simulation.batches import ScoreSetting, simulate_batch
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw, true_gain


def _summary(estimates: np.ndarray, lower: np.ndarray, upper: np.ndarray, truth: float) -> dict[str, float]:
    err = estimates - truth
    return {
        "truth": float(truth),
        "mean": float(estimates.mean()),
        "bias": float(err.mean()),
        "bias_se": float(err.std(ddof=1) / np.sqrt(err.size)) if err.size > 1 else 0.0,
        "rmse": float(np.sqrt((err**2).mean())),
        "coverage": float(((lower <= truth) & (truth <= upper)).mean()),
        "mean_ci_width": float((upper - lower).mean()),
    }


def pot_calibration(
    law: ShortfallLaw,
    n_scores: int,
    q: float,
    replications: int = 100,
    bootstrap: int = 200,
    hardness: float = 1.0,
    seed: int = 0,
) -> dict:
    """ξ̂ of ``fit_pot`` over ``replications`` samples of ``n_scores`` scores with known ξ."""
    xi, lo, hi, exceed = [], [], [], []
    for r in range(replications):
        g = torch.Generator().manual_seed(seed + r)
        scores = (1.0 - hardness * law.sample((n_scores,), g)).numpy()
        fit = fit_pot(scores, q=q, bootstrap=bootstrap, seed=seed + r)
        xi.append(fit.xi)
        lo.append(fit.xi_ci[0])
        hi.append(fit.xi_ci[1])
        exceed.append(fit.n_exceedances)
    out = {"law": law.describe(), "n_scores": n_scores, "q": q, "replications": replications}
    out |= {"bootstrap": bootstrap, "exceedances": int(np.median(exceed))}
    return out | _summary(np.array(xi), np.array(lo), np.array(hi), law.xi)


def link_calibration(
    law: BlendedLaw,
    setting: ScoreSetting,
    num_batches: int,
    replications: int,
    seed: int = 0,
) -> dict:
    """``select_link`` over ``replications`` simulated runs of ``num_batches`` batches with winners of ``law``."""
    a_true, b_true = law.coefficients
    rows: dict[str, list[float]] = {k: [] for k in ("a", "a_lo", "a_hi", "b", "b_lo", "b_hi", "g", "g_lo", "g_hi")}
    rows |= {"true_gain": [], "converged": []}
    for r in range(replications):
        g = torch.Generator().manual_seed(seed + r)
        batches = [simulate_batch(setting, law, g) for _ in range(num_batches)]
        fit = select_link([b.score_batch() for b in batches])
        truth = true_gain([b.scores for b in batches[1::2]], law)
        for key, value in (("a", fit.a), ("b", fit.b), ("g", fit.heldout_gain)):
            rows[key].append(value)
        for key, ci in (("a", fit.a_ci), ("b", fit.b_ci), ("g", fit.heldout_gain_ci)):
            rows[f"{key}_lo"].append(ci[0])
            rows[f"{key}_hi"].append(ci[1])
        rows["true_gain"].append(truth)
        rows["converged"].append(float(fit.converged))
    v = {k: np.asarray(x) for k, x in rows.items()}
    gain_err = v["g"] - v["true_gain"]
    return {
        "lam": law.lam,
        "beta": law.beta,
        "tau": law.tau,
        "num_batches": num_batches,
        "anchors": setting.anchors,
        "candidates": setting.candidates,
        "replications": replications,
        "converged": float(v["converged"].mean()),
        "a": _summary(v["a"], v["a_lo"], v["a_hi"], a_true),
        "b": _summary(v["b"], v["b_lo"], v["b_hi"], b_true),
        "gain": {
            "true_mean": float(v["true_gain"].mean()),
            "heldout_mean": float(v["g"].mean()),
            "bias": float(gain_err.mean()),
            "rmse": float(np.sqrt((gain_err**2).mean())),
            "coverage": float(((v["g_lo"] <= v["true_gain"]) & (v["true_gain"] <= v["g_hi"])).mean()),
        },
    }


def link_grid(
    lams: Sequence[float],
    beta: float,
    tau: float,
    setting: ScoreSetting,
    num_batches: int,
    replications: int,
    seed: int,
) -> list[dict]:
    """:func:`link_calibration` for each λ* (the same seeds for every λ*: common random numbers)."""
    return [link_calibration(BlendedLaw(lam, beta, tau), setting, num_batches, replications, seed) for lam in lams]
