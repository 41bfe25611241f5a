"""The three experiments as functions: each returns its JSON-ready result and a Markdown table.

E1 :func:`run_e1` (the authors' noise-floor setting), E2 :func:`run_e2` (POT ξ̂ and link selection against the
truth), E3 :func:`run_e3` (WEINCE's online λ across tail shape, hardness and winner law). The command
``simcse-simulate`` (``weince_lab.simulate``) parses the options, calls these and writes the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcse_weince.losses import loss_class
from weince_lab.report import table
from weince_lab.simulation.batches import ScoreSetting
from weince_lab.simulation.calibration import link_grid, pot_calibration
from weince_lab.simulation.noise_floor import closed_forms, simulate_noise_floor
from weince_lab.simulation.online_lambda import cell_statistics, knob_sweep, summarise_cell
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw


def run_e1(sample_sizes: Sequence[int], replications: int, seed: int, beta: float) -> tuple[dict, str]:
    cf = closed_forms(beta=beta)
    rows = simulate_noise_floor(tuple(sample_sizes), replications, seed, beta=beta)
    result = {"closed_forms": cf.to_dict(), "rows": [r.to_dict() for r in rows]}
    return result, e1_markdown(result, replications, seed, beta)


def e1_markdown(result: dict, replications: int, seed: int, beta: float) -> str:
    """E1's report from its result (the closed forms and one row per sample size)."""
    cf = result["closed_forms"]
    rows = [
        [f"{r['n']:,}", f"{r['mse_weibit']:.6f} ± {r['mse_weibit_se']:.6f}", f"{r['weibit_c_over_n']:.6f}",
         f"{r['mse_softmax']:.6f} ± {r['mse_softmax_se']:.6f}", f"{r['softmax_floor_plus_godambe']:.6f}"]
        for r in result["rows"]
    ]  # fmt: skip
    lines = [
        f"E1 noise floor: scores (0.15, 0.45, 0.70, 0.90), Weibit winners beta* = {beta}, {replications:,} "
        f"replications, seed {seed}",
        "",
        f"closed forms: true log-odds {cf['true_log_odds']:.6f}; softmax pseudo-true theta "
        f"{cf['softmax_pseudo_true']:.6f}, log-odds {cf['softmax_pseudo_log_odds']:.6f}, bias floor "
        f"{cf['softmax_bias_floor']:.6f}, Godambe (log-odds) {cf['softmax_godambe_log_odds']:.4f}/n; Weibit c = "
        f"{cf['weibit_c']:.6f}",
        "",
        *table(["n", "MSE Weibit (± SE)", "c/n", "MSE softmax (± SE)", "floor + Godambe/n"], rows),
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class E2Config:
    pot_laws: tuple[ShortfallLaw, ...]
    pot_sizes: tuple[int, ...]
    pot_qs: tuple[float, ...]
    pot_replications: int
    bootstrap: int
    lams: tuple[float, ...]
    beta: float
    tau: float
    link_law: ShortfallLaw
    hardness: float
    scales: tuple[tuple[int, int], ...]  # (batches, anchors = candidates)
    link_replications: tuple[int, ...]
    seed: int


def run_e2(cfg: E2Config) -> tuple[dict, str]:
    pot = [
        pot_calibration(law, n, q, cfg.pot_replications, cfg.bootstrap, seed=cfg.seed)
        for law in cfg.pot_laws
        for n in cfg.pot_sizes
        for q in cfg.pot_qs
    ]
    grids = {}
    for (nb, anchors), reps in zip(cfg.scales, cfg.link_replications, strict=True):
        setting = ScoreSetting(cfg.link_law, cfg.hardness, 0.0, anchors, anchors)
        grids[f"{nb}x{anchors}"] = link_grid(cfg.lams, cfg.beta, cfg.tau, setting, nb, reps, cfg.seed)
    result = {"pot": pot, "link": grids}
    return result, e2_markdown(result, cfg)


def e2_markdown(result: dict, cfg: E2Config) -> str:
    """E2's report from its result (the POT cells and the link grids per scale)."""
    pot = [
        [c["law"], f"{c['truth']:.3f}", f"{c['n_scores']:,}", c["q"], c["exceedances"], f"{c['mean']:.3f}",
         f"{c['bias']:+.3f} ± {c['bias_se']:.3f}", f"{c['rmse']:.3f}", f"{100 * c['coverage']:.0f}%",
         f"{c['mean_ci_width']:.3f}"]
        for c in result["pot"]
    ]  # fmt: skip
    link = []
    for scale, grid in result["link"].items():
        for c in grid:
            a, b, g = c["a"], c["b"], c["gain"]
            link.append([
                scale, c["replications"], f"{c['lam']:g}", f"{a['truth']:.2f}", f"{a['mean']:.3f}", f"{a['bias']:+.3f}",
                f"{a['rmse']:.3f}", f"{100 * a['coverage']:.0f}%", f"{b['truth']:.2f}", f"{b['mean']:.3f}",
                f"{b['bias']:+.3f}", f"{b['rmse']:.3f}", f"{100 * b['coverage']:.0f}%", f"{g['true_mean']:.4f}",
                f"{g['heldout_mean']:.4f}", f"{g['rmse']:.4f}", f"{100 * g['coverage']:.0f}%",
            ])  # fmt: skip
    lines = [
        f"E2 POT: xi-hat of fit_pot ({cfg.bootstrap} bootstrap samples, 95% percentile interval), "
        f"{cfg.pot_replications} replications per cell, seed {cfg.seed}",
        "",
        *table(
            [
                "law",
                "true xi",
                "scores",
                "q",
                "exceedances",
                "mean xi-hat",
                "bias (± SE)",
                "RMSE",
                "coverage",
                "CI width",
            ],
            pot,
        ),
        "",
        f"E2 link selection: winners of the blended law (beta* = {cfg.beta}, tau* = {cfg.tau}) over candidates with "
        f"shortfalls {cfg.hardness:g} x {cfg.link_law.describe()}; (a, b) = ((1 - lambda)/tau, lambda*beta) with 95% "
        "sandwich intervals; gain = held-out gain vs the exact true gain",
        "",
        *table(
            [
                "scale",
                "reps",
                "lambda*",
                "a*",
                "a-hat mean",
                "a bias",
                "a RMSE",
                "a cov.",
                "b*",
                "b-hat mean",
                "b bias",
                "b RMSE",
                "b cov.",
                "true gain",
                "held-out gain",
                "gain RMSE",
                "gain cov.",
            ],
            link,
        ),
    ]
    return "\n".join(lines) + "\n"


E3_TAILS = (
    ShortfallLaw("power", alpha=1.5),
    ShortfallLaw("power", alpha=2.5),
    ShortfallLaw("power", alpha=5.0),
    ShortfallLaw("beta", alpha=2.5, beta_d=5.0),
    ShortfallLaw("gumbel", theta=1.0),
)
E3_LAWS = (BlendedLaw.softmax(0.1), BlendedLaw.weibit(3.0))


def run_e3(
    batches: int,
    seed: int,
    tails: Sequence[ShortfallLaw] = E3_TAILS,
    hardness: Sequence[float] = (0.3, 1.0),
    spreads: Sequence[float] = (0.0, 0.5),
    laws: Sequence[BlendedLaw | None] = (*E3_LAWS, None),
    anchors: int = 256,
) -> tuple[dict, str]:
    weince = loss_class("weince")
    loss = {"simcse": weince(temperature=0.05), "ntxent": weince(temperature=0.5, layout="ntxent")}
    cells, sweeps = [], []
    for tail in tails:
        for c in hardness:
            for spread in spreads:
                setting = ScoreSetting(tail, c, spread, anchors, anchors)
                for law in laws:
                    layout = "ntxent" if law is None else "simcse"
                    stats = cell_statistics(setting, law, loss[layout], batches, seed)
                    who = "no winner (NT-Xent)" if law is None else ("softmax" if law.lam == 0 else "Weibit")
                    name = f"{tail.describe()} c={c:g} sd={spread:g} {who}"
                    cells.append({"cell": name, "xi": tail.xi, "hardness": c, "spread": spread, "winners": who})
                    cells[-1] |= summarise_cell(stats, loss[layout].margin)
                    if c == 1.0 and spread == 0.5 and law is not None and law.lam == 0:
                        sweeps.append({"cell": name, "grid": knob_sweep(stats)})
    result = {"cells": cells, "knob_sweeps": sweeps}
    return result, e3_markdown(result, batches, seed, anchors)


def e3_markdown(result: dict, batches: int, seed: int, anchors: int = 256) -> str:
    """E3's report from its result (the cells and the knob sweeps)."""
    cells = [
        [c["cell"], f"{c['xi']:.2f}", f"{c['lambda_mean']:.3f} ± {c['lambda_mean_se']:.3f}",
         f"{c['share_gt_half']:.3f}", f"{c['delta_aic_mean']:.1f}", f"{c['share_delta_aic_gt_margin']:.3f}",
         f"{c['beta_ols_mean']:.2f}", f"{c['beta_hill_mean']:.2f}", f"{c['rho_mean']:.3f}"]
        for c in result["cells"]
    ]  # fmt: skip
    knobs = []
    for sw in result["knob_sweeps"]:
        for q in sorted({r["q"] for r in sw["grid"]}):
            part = [r for r in sw["grid"] if r["q"] == q]
            share = [r["share_gt_half"] for r in part]
            mean = [r["lambda_mean"] for r in part]
            knobs.append([sw["cell"], q, f"{min(share):.3f} - {max(share):.3f}", f"{min(mean):.3f} - {max(mean):.3f}"])
    lines = [
        f"E3 online lambda: WeinceLoss statistics (defaults: beta ols, q 0.2, kappa_rho 10, kappa_aic 1, m 2) on "
        f"{batches} batches of {anchors} anchors per cell, seed {seed}",
        "",
        *table(
            [
                "cell",
                "true xi",
                "mean lambda (± SE)",
                "share lambda > 0.5",
                "mean dAIC",
                "share dAIC > 2",
                "beta-hat ols",
                "beta-hat Hill",
                "mean rho",
            ],
            cells,
        ),
        "",
        "Knob sweep (the authors' grid m x kappa_rho x kappa_aic = 27 settings, per q): range over the 27",
        "",
        *table(["cell", "q", "share lambda > 0.5 (min - max)", "mean lambda (min - max)"], knobs),
    ]
    return "\n".join(lines) + "\n"
