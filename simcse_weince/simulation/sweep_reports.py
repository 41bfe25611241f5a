"""The reports of the Ground truth II sweeps: a summary (JSON) and Markdown tables per sweep, from the cells'
records; means over seeds with 95% t intervals, and the arms against InfoNCE paired by seed.

Every comparison of an arm with InfoNCE gives four paired differences (:data:`PAIRED`): the universe KL under the
loss's own link, top-1 agreement and recall@10 with the Bayes retriever, and the best-link KL (the link refitted on
the trained table). Where KL and ranking point opposite ways, both intervals excluding 0, the report says so in
words (:func:`disagreement`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from simcse_weince.simulation.search import loglog_slope, mean_interval
from simcse_weince.simulation.sweep_settings import SweepSettings
from simcse_weince.simulation.universe import kernel_law


def ci(values: Sequence[float], fmt: str = ".4f") -> str:
    """``mean [low, high]``, the 95% t interval over the values."""
    mean, low, high = mean_interval(values)
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def select(records: list[dict], **match: object) -> list[dict]:
    """The records whose cell has every value of ``match``."""
    return [r for r in records if all(r["cell"][k] == v for k, v in match.items())]


def machine() -> str:
    """The machine the cells ran on, for the reports' first line."""
    return f"{os.cpu_count()} CPU cores, torch {torch.__version__}, 1 thread per cell"


def report_proposition(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a proposition sweep."""
    s = settings.to_dict()
    summary, lines = {"cells": records, "groups": []}, []
    lines += [
        f"Proposition 1 (fixed embedding = the true vectors): CE − R_k, {s['samples']:,} Monte Carlo samples per k, "
        f"N = {s['items']}, d = {s['dim']}, seeds {s['seeds']} (one universe each); {machine()}",
        "",
        "| kernel | τ | k | CE − R_k: mean over seeds [95% CI] | MC SE (seed 0) | k·gap | Whiteley lower | "
        "Whiteley upper | inside |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    slopes = []
    for kernel in s["kernels"]:
        for tau in s["taus"]:
            group = select(records, kernel=kernel, tau=tau)
            by_k = {k: [r["rows"][i] for r in group] for i, k in enumerate(s["ks"])}
            for k, rows in by_k.items():
                gaps = [r["gap"] for r in rows]
                lines.append(
                    f"| {kernel} | {tau:g} | {k} | {ci(gaps, '.2e')} | {rows[0]['se']:.1e} | "
                    f"{k * float(np.mean(gaps)):.3f} | {rows[0]['lower']:.3g} | {rows[0]['upper']:.3g} | "
                    f"{sum(r['inside'] for r in rows)}/{len(rows)} |"
                )
            per_seed = [r["slope"] for r in group]
            tail = [r["tail_slope"] for r in group]
            constant = [r["first_order_constant"] for r in group]
            last = [r["rows"][-1]["k"] * r["rows"][-1]["gap"] for r in group]
            slopes.append(
                f"| {kernel} | {tau:g} | {ci(per_seed, '+.3f')} | {ci(tail, '+.3f')} | "
                f"{sum(r['sign_changes'] > 0 for r in group)}/{len(group)} | {ci(constant, '+.2f')} | "
                f"{ci(last, '+.2f')} | {math.exp(2 / tau):.3g} |"
            )
            summary["groups"].append(
                {"kernel": kernel, "tau": tau, "slope": list(mean_interval(per_seed)), "per_seed": per_seed,
                 "tail_slope": list(mean_interval(tail)), "first_order_constant": constant, "k_gap_at_largest_k": last}
            )  # fmt: skip
    lines += [
        "", f"Slopes of log |CE − R_k| on log k per seed (all k; the 3 largest k), seeds whose gap changes sign "
        f"across k, the exact first-order constant C = lim k·(CE − R_k) and the measured k·(CE − R_k) at k = "
        f"{s['ks'][-1]}, against the bounds' constant e^(2/τ); mean [95% t interval]:", "",
        "| kernel | τ | slope, all k | slope, 3 largest k | sign change | C exact | k·gap measured | e^(2/τ) |",
        "|---|---|---|---|---|---|---|---|", *slopes,
    ]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


def _against_infonce(settings: dict) -> list[str]:
    """The arms compared with InfoNCE, paired by seed (none when InfoNCE is not in the sweep)."""
    return [x for x in settings["losses"] if x != "infonce"] if "infonce" in settings["losses"] else []


def _paired(records: list[dict], metric: Callable[[dict], float], loss: str, base: str, **match: object) -> list[float]:
    a = {r["cell"]["seed"]: metric(r) for r in select(records, loss=loss, **match)}
    b = {r["cell"]["seed"]: metric(r) for r in select(records, loss=base, **match)}
    return [a[seed] - b[seed] for seed in sorted(a.keys() & b.keys())]


@dataclass(frozen=True)
class Figure:
    """A figure compared paired by seed: its key in a record (or its part), its name, its format, and whether a
    lower value is better."""

    key: str
    name: str
    fmt: str
    lower_is_better: bool


PAIRED: tuple[Figure, ...] = (
    Figure("universe_gap", "universe KL", "+.4f", True),
    Figure("top1", "top-1", "+.3f", False),
    Figure("recall10", "recall@10", "+.3f", False),
    Figure("best_link_gap", "best-link KL", "+.4f", True),
)
PAIRED_HEADER = " | ".join(f.name for f in PAIRED)


def paired_figures(records: list[dict], loss: str, part: str | None = None, **match: object) -> dict[str, list[float]]:
    """``loss`` − InfoNCE per seed for every figure of :data:`PAIRED` (of the records' ``part`` when given: an
    encoder's ``heldout`` items), over the cells of ``match``."""

    def getter(key: str) -> Callable[[dict], float]:
        return (lambda r: r[part][key]) if part else (lambda r: r[key])

    return {f.key: _paired(records, getter(f.key), loss, "infonce", **match) for f in PAIRED}


def paired_columns(diffs: dict[str, list[float]]) -> str:
    """The Markdown cells of :data:`PAIRED`'s differences, ``mean [low, high]``."""
    return " | ".join(ci(diffs[f.key], f.fmt) for f in PAIRED)


def _direction(values: list[float], figure: Figure) -> int:
    """+1 when the interval says the arm is better than InfoNCE on ``figure``, −1 when worse, 0 when it holds 0."""
    _, low, high = mean_interval(values)
    if len(values) < 2 or low <= 0 <= high:
        return 0
    better = high < 0 if figure.lower_is_better else low > 0
    return 1 if better else -1


def disagreement(what: str, diffs: dict[str, list[float]]) -> str | None:
    """A sentence when the universe KL and a ranking figure (top-1 or recall@10) disagree: one says the arm is
    better than InfoNCE, the other worse, both 95% intervals excluding 0. ``None`` when they do not."""
    kl, *ranking = [f for f in PAIRED if f.key in ("universe_gap", "top1", "recall10")]
    verdict = _direction(diffs[kl.key], kl)
    against = [f for f in ranking if verdict and _direction(diffs[f.key], f) == -verdict]
    if not against:
        return None
    said = "closer to" if verdict > 0 else "farther from"
    ranks = "worse" if verdict > 0 else "better"
    figures = ", ".join(f"{f.name} {ci(diffs[f.key], f.fmt)}" for f in against)
    best = next(f for f in PAIRED if f.key == "best_link_gap")
    return (
        f"{what}: the KL puts the arm {said} the Bayes search than InfoNCE ({ci(diffs[kl.key], kl.fmt)}) but it ranks "
        f"{ranks} ({figures}); best-link KL {ci(diffs[best.key], best.fmt)}."
    )


def disagreement_lines(found: list[str]) -> list[str]:
    """The report's section on KL against ranking."""
    lines = [
        "",
        "Where KL and ranking disagree (the KL difference and a top-1 or recall@10 difference point opposite ways, "
        "both 95% intervals excluding 0):",
        "",
    ]
    return lines + ([f"- {x}" for x in found] if found else ["- nowhere in this sweep."])


def excess_slope(ks: Sequence[int], gaps: Sequence[float]) -> float | None:
    """Slope of log(gap(k) − floor) on log k over all but the two largest k, floor = the smaller gap at those two;
    ``None`` where an excess is ≤ 0 or fewer than 2 points remain (the rate is then not readable)."""
    if len(ks) < 4:
        return None
    floor = min(gaps[-2:])
    excess = np.asarray(gaps[:-2]) - floor
    if (excess <= 0).any():
        return None
    return loglog_slope(ks[:-2], excess)


def report_negatives(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a negatives sweep."""
    s = settings.to_dict()
    size = str(max(s["eval_sizes"]))
    tau, n = s["taus"][0], s["pairs"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against k: τ = {tau:g}, {n:,} training pairs, {s['steps']} steps "
        f"of {s['batch']} anchors, Adam lr {s['lr']:g}; N = {s['items']}, d = d′ = {s['dim']}; seeds {s['seeds']}; "
        f"{machine()}. Means over seeds [95% t interval].",
        "",
        f"| kernel | loss | k | universe KL | search KL (m = {size}) | top-1 agreement | recall@10 | best-link KL | "
        "cosine r | Procrustes | λ (training) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    slopes, paired, links, found = [], [], [], []
    summary: dict = {"cells": records, "slopes": [], "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            for k in s["ks"]:
                g = select(records, kernel=kernel, loss=loss, k=k, tau=tau, pairs=n)
                lines.append(
                    f"| {kernel} | {loss} | {k} | {ci([r['universe_gap'] for r in g])} | "
                    f"{ci([r['search_gap'][size]['mean'] for r in g])} | {ci([r['top1'] for r in g], '.3f')} | "
                    f"{ci([r['recall10'] for r in g], '.3f')} | {ci([r['best_link_gap'] for r in g])} | "
                    f"{np.mean([r['cosine_corr'] for r in g]):.3f} | {np.mean([r['procrustes'] for r in g]):.3f} | "
                    f"{np.mean([r['lambda_mean'] for r in g]):.3f} |"
                )
            per_seed, excess = {}, {}
            for seed in s["seeds"]:
                g = sorted(select(records, kernel=kernel, loss=loss, seed=seed), key=lambda r: r["cell"]["k"])
                ks, gaps = [r["cell"]["k"] for r in g], [r["universe_gap"] for r in g]
                per_seed[seed] = loglog_slope(ks, gaps)
                excess[seed] = excess_slope(ks, gaps)
            mean, low, high = mean_interval(list(per_seed.values()))
            readable = [v for v in excess.values() if v is not None]
            ex = ci(readable, "+.2f") if readable else "n/a"
            slopes.append(
                f"| {kernel} | {loss} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] | {ex} | {len(readable)}/{len(excess)} |"
            )
            summary["slopes"].append(
                {"kernel": kernel, "loss": loss, "slope": [mean, low, high], "per_seed": per_seed,
                 "excess_slope_per_seed": excess}
            )  # fmt: skip
            g = select(records, kernel=kernel, loss=loss, k=max(s["ks"]))
            links.append(
                f"| {kernel} | {loss} | {ci([r['link']['a'] for r in g], '.2f')} | "
                f"{ci([r['link']['b'] for r in g], '.2f')} | {ci([r['link']['heldout_gain'] for r in g], '.4f')} |"
            )
        for loss in _against_infonce(s):
            for k in s["ks"]:
                diffs = paired_figures(records, loss, kernel=kernel, k=k)
                paired.append(f"| {kernel} | {loss} − infonce | {k} | {paired_columns(diffs)} |")
                words = disagreement(f"{kernel}, {loss} − infonce, k = {k}", diffs)
                found += [words] if words else []
                summary["paired"].append({"kernel": kernel, "loss": loss, "k": k, **diffs, "disagreement": words})
    lines += [
        "", "Slope of log(universe KL) on log k, fitted per seed, mean [95% t interval]; and the slope of the excess "
        "over the floor, log(KL(k) − floor) on the k below the two largest, floor = the smaller KL at the two "
        "largest k (seeds where every excess is > 0; the interval is over those):", "",
        "| kernel | loss | slope, all k | excess slope | seeds readable |", "|---|---|---|---|---|", *slopes,
        "", "Paired by seed (same universe, pairs, negatives, initial table and evaluation problems):", "",
        f"| kernel | difference | k | {PAIRED_HEADER} |", "|---|---|---|---|---|---|---|", *paired,
        *disagreement_lines(found),
        "", f"Link selection on the learned cosines (true positives as winners; k = {max(s['ks'])}): a = (1 − λ)/τ, "
        "b = λβ, held-out gain of the family over the softmax link (nats / anchor):", "",
        "| kernel | loss | a | b | held-out gain |", "|---|---|---|---|---|", *links,
    ]  # fmt: skip
    truth = [f"{kernel}: (a*, b*) = {kernel_law(kernel, s['kappa'], s['beta'], s['blend_lambda']).coefficients}"
             for kernel in s["kernels"]]  # fmt: skip
    lines += ["", "True coefficients of the kernels' links: " + "; ".join(truth)]
    return summary, "\n".join(lines) + "\n"


def report_temperature(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a temperature sweep."""
    s = settings.to_dict()
    k = s["ks"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against τ: k = {k}, training sets of {s['pairs']} pairs, "
        f"{s['steps']} steps of {s['batch']} anchors; N = {s['items']}, d = {s['dim']}; seeds {s['seeds']}; "
        f"{machine()}. Means over seeds [95% t interval]; sd = the standard deviation across seeds.",
        "",
        "| kernel | loss | τ | "
        + " | ".join(f"universe KL, n = {n:,} (sd)" for n in s["pairs"])
        + " | small − large n | top-1 (largest n) | recall@10 (largest n) | best-link KL (largest n) | λ (training) |",
        "|---|---|---|" + "---|" * len(s["pairs"]) + "---|---|---|---|---|",
    ]
    summary: dict = {"cells": records, "best": [], "paired": []}
    best, paired, found = [], [], []
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            means = {}
            for tau in s["taus"]:
                cols, per_n = [], {}
                for n in s["pairs"]:
                    g = select(records, kernel=kernel, loss=loss, tau=tau, pairs=n)
                    per_n[n] = {r["cell"]["seed"]: r["universe_gap"] for r in g}
                    v = list(per_n[n].values())
                    cols.append(f"{ci(v)} ({np.std(v, ddof=1) if len(v) > 1 else 0:.4f})")
                small, large = min(s["pairs"]), max(s["pairs"])
                spread = [per_n[small][seed] - per_n[large][seed] for seed in per_n[large]]
                g = select(records, kernel=kernel, loss=loss, tau=tau, pairs=large)
                means[tau] = float(np.mean(list(per_n[large].values())))
                lines.append(
                    f"| {kernel} | {loss} | {tau:g} | " + " | ".join(cols) + f" | {ci(spread, '+.4f')} | "
                    f"{ci([r['top1'] for r in g], '.3f')} | {ci([r['recall10'] for r in g], '.3f')} | "
                    f"{ci([r['best_link_gap'] for r in g])} | {np.mean([r['lambda_mean'] for r in g]):.3f} |"
                )
            tau_best = min(means, key=means.get)
            best.append(f"| {kernel} | {loss} | {tau_best:g} | {means[tau_best]:.4f} |")
            summary["best"].append({"kernel": kernel, "loss": loss, "tau": tau_best, "universe_gap": means[tau_best]})
        for loss in _against_infonce(s):
            for tau in s["taus"]:
                for n in s["pairs"]:
                    diffs = paired_figures(records, loss, kernel=kernel, tau=tau, pairs=n)
                    paired.append(f"| {kernel} | {loss} − infonce | {tau:g} | {n:,} | {paired_columns(diffs)} |")
                    words = disagreement(f"{kernel}, {loss} − infonce, τ = {tau:g}, n = {n:,}", diffs)
                    found += [words] if words else []
                    summary["paired"].append(
                        {"kernel": kernel, "loss": loss, "tau": tau, "pairs": n, **diffs, "disagreement": words}
                    )
    lines += [
        "", f"Best τ (lowest mean universe KL at n = {max(s['pairs']):,}):", "", "| kernel | loss | τ | universe KL |",
        "|---|---|---|---|", *best,
        "", "Paired by seed (same universe, pairs, negatives, initial table and evaluation problems), mean [95% t "
        "interval]; KL lower is better, top-1 and recall@10 higher:", "",
        f"| kernel | difference | τ | n | {PAIRED_HEADER} |", "|---|---|---|---|---|---|---|---|", *paired,
        *disagreement_lines(found),
    ]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


def report_encoder(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of an encoder sweep."""
    s = settings.to_dict()
    half = s["items"] // 2
    lines = [
        f"MLP encoder (observations: a random {s['dim']} → {s['obs_width']} projection of the latent vectors plus "
        f"N(0, {s['noise']:g}²) noise; hidden width {s['hidden']}) trained on {half} of {s['items']} items, scored on "
        f"those and on the {s['items'] - half} held-out items; k = {s['ks'][0]}, τ = {s['taus'][0]:g}, "
        f"{s['pairs'][0]:,} pairs, {s['steps']} steps of {s['batch']}; seeds {s['seeds']}; {machine()}. "
        "Means over seeds [95% t interval].",
        "",
        "| kernel | loss | universe KL, trained items | universe KL, held-out items | top-1, trained | "
        "top-1, held-out | recall@10, held-out | best-link KL, held-out | cosine r, held-out | λ (training) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    paired, found, summary = [], [], {"cells": records, "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            g = select(records, kernel=kernel, loss=loss)
            lines.append(
                f"| {kernel} | {loss} | {ci([r['train']['universe_gap'] for r in g])} | "
                f"{ci([r['heldout']['universe_gap'] for r in g])} | {ci([r['train']['top1'] for r in g], '.3f')} | "
                f"{ci([r['heldout']['top1'] for r in g], '.3f')} | "
                f"{ci([r['heldout']['recall10'] for r in g], '.3f')} | "
                f"{ci([r['heldout']['best_link_gap'] for r in g])} | "
                f"{np.mean([r['heldout']['cosine_corr'] for r in g]):.3f} | "
                f"{np.mean([r['lambda_mean'] for r in g]):.3f} |"
            )
        for loss in _against_infonce(s):
            diffs = paired_figures(records, loss, "heldout", kernel=kernel)
            paired.append(f"| {kernel} | {loss} − infonce | {paired_columns(diffs)} |")
            words = disagreement(f"{kernel}, {loss} − infonce, held-out items", diffs)
            found += [words] if words else []
            summary["paired"].append({"kernel": kernel, "loss": loss, "heldout": diffs, "disagreement": words})
    lines += ["", "Held-out items, paired by seed, mean [95% t interval]; KL lower is better, top-1 and recall@10 "
              "higher:", "", f"| kernel | difference | {PAIRED_HEADER} |", "|---|---|---|---|---|---|", *paired,
              *disagreement_lines(found)]  # fmt: skip
    return summary, "\n".join(lines) + "\n"


REPORTS = {
    "proposition": report_proposition,
    "negatives": report_negatives,
    "temperature": report_temperature,
    "encoder": report_encoder,
}
