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

from weince_lab.report import table
from weince_lab.simulation.learning import build_loss
from weince_lab.simulation.search import (
    loglog_slope,
    mean_interval,
    proposition_bounds,
    shortfall_statistics,
    trivial_bounds,
)
from weince_lab.simulation.sweep_cells import cell_key, cells, check_steps, encoder_split, universe_of
from weince_lab.simulation.sweep_settings import VARIANTS, SweepSettings
from weince_lab.simulation.universe import kernel_law


def ci(values: Sequence[float], fmt: str = ".4f") -> str:
    """``mean [low, high]``, the 95% t interval over the values."""
    mean, low, high = mean_interval(values)
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def select(records: list[dict], **match: object) -> list[dict]:
    """The records whose cell has every value of ``match``, in seed order (whatever order the cells finished in: a
    report reads "seed 0" as the first)."""
    found = [r for r in records if all(r["cell"][k] == v for k, v in match.items())]
    return sorted(found, key=lambda r: r["cell"]["seed"])


def machine() -> str:
    """The machine the cells ran on, for the reports' first line."""
    return f"{os.cpu_count()} CPU cores, torch {torch.__version__}, 1 thread per cell"


VARIANT_NAMES = {"excluded": "anchor excluded", "literal": "literal (anchor included)"}


def _figures(record: dict, variant: str) -> dict:
    """One variant's figures of a proposition record (the anchor-excluded ones are the record's top level)."""
    return record if variant == "excluded" else record[variant]


def _sign_statement(groups: list[dict], variants: list[str]) -> list[str]:
    """Which part of C sets its sign, per variant, counted over the (kernel, τ) groups (means over seeds)."""
    lines, share = [], {}
    for v in variants:
        parts = [(g["kernel"], g["tau"], np.mean(g[v]["jensen"]), np.mean(g[v]["positive"])) for g in groups]
        negative = [(k, t) for k, t, j, p in parts if p > j]
        share[v] = len(negative) / len(parts)
        others = ", ".join(f"{k} τ {t:g}" for k, t, j, p in parts if p <= j) or "none"
        lines.append(
            f"- {VARIANT_NAMES[v]}: the positive's part exceeds Jensen's, so C < 0, in {len(negative)} of "
            f"{len(parts)} (kernel, τ) groups; Jensen's part wins (C > 0) at: {others}."
        )
    if "excluded" in share and "literal" in share:
        if share["excluded"] > 0.5 >= share["literal"]:
            verdict = (
                "“The sign is mostly the positive's part” holds for the anchor-excluded variant only: with the "
                "anchor among the negatives (Whiteley's literal π), its own weight e^(1/τ) enters the variance and "
                "Jensen's part sets the sign at small τ."
            )
        else:
            verdict = (
                f"The positive's part sets the sign in {share['excluded']:.0%} of the groups with the anchor "
                f"excluded and in {share['literal']:.0%} with it included."
            )
        lines += ["", verdict]
    return lines


def _bounds_table(
    settings: dict, records: list[dict], groups: list[dict], variants: list[str]
) -> tuple[list[str], list[dict]]:
    """Whiteley's bounds at the largest k against the measured gaps and the trivial range: where they say nothing."""
    k = settings["ks"][-1]
    rows, found, inside = [], [], {}
    for tau in settings["taus"]:
        checked = [row["inside"] for r in select(records, tau=tau) for v in variants for row in _figures(r, v)["rows"]]
        inside[tau] = (sum(checked), len(checked))
        lower, upper = proposition_bounds(k, tau)
        low0, up0 = trivial_bounds(k, tau)
        gaps = [abs(np.mean(g[v]["gap_at_largest_k"])) for g in groups if g["tau"] == tau for v in variants]
        small, large = min(gaps), max(gaps)
        if upper > up0 and k < math.exp(2 / tau):
            verdict = "vacuous: upper above 2/τ, lower ≈ −(2/τ − log k), not O(1/k)"
        elif upper > up0:
            verdict = "upper vacuous (above 2/τ); lower O(1/k)"
        else:
            verdict = "both O(1/k), within the trivial range"
        rows.append([
            f"{tau:g}", f"{math.exp(2 / tau):.3g}", f"{lower:.3g}", f"{low0:.3g}", f"{upper:.3g}", f"{up0:.3g}",
            f"{small:.2e} – {large:.2e}", f"{-lower / large:.3g} – {-lower / small:.3g}",
            f"{upper / large:.3g} – {upper / small:.3g}", verdict,
        ])  # fmt: skip
        found.append(
            {"tau": tau, "k": k, "lower": lower, "upper": upper, "trivial_lower": low0, "trivial_upper": up0,
             "abs_gap_range": [small, large], "lower_over_gap": [-lower / large, -lower / small],
             "upper_over_gap": [upper / large, upper / small], "verdict": verdict}
        )  # fmt: skip
    lines = [
        "", f"Whiteley's bounds at k = {k} against the measured |CE − R_k| (means over seeds; the range over the "
        f"kernels and variants) and the trivial range −2/τ − log(1 + 1/k) ≤ CE − R_k ≤ 2/τ that the weights' range "
        f"[e^(−1/τ), e^(1/τ)] alone gives. The lower bound −log(1 + e^(2/τ)/k) is ≈ −e^(2/τ)/k only for k ≫ "
        f"e^(2/τ), else ≈ −(2/τ − log k); the upper bound's constant is (e^(2/τ) − 1)²/8 ≈ e^(4/τ)/8, not e^(2/τ). "
        f"Looseness = |bound| / |gap|:", "",
        *table(["τ", "e^(2/τ)", "Whiteley lower", "trivial lower", "Whiteley upper", "trivial upper", "\\|gap\\|",
                "lower looseness", "upper looseness", "verdict"], rows),
    ]  # fmt: skip
    vacuous = [f"{r['tau']:g}" for r in found if r["verdict"].startswith("vacuous")]
    lines += ["", "Inside the bounds (all k, seeds and variants): " + "; ".join(
        f"τ {tau:g}: {n}/{m}" for tau, (n, m) in inside.items()
    ) + "."]  # fmt: skip
    if vacuous:
        lines[-1] += (
            f" At τ ∈ {{{', '.join(vacuous)}}} that check is vacuous: the upper bound exceeds the trivial 2/τ and the "
            "lower bound is within log k of the trivial −2/τ, so any gap the weights allow would pass."
        )
    return lines, found


def report_proposition(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a proposition sweep, its variants side by side."""
    s = settings.to_dict()
    variants = [v for v in VARIANTS if v in s["variants"]]
    summary: dict = {"cells": records, "groups": []}
    head = [
        h for v in variants for h in (f"CE − R_k, {VARIANT_NAMES[v]} [95% CI]", "MC SE (seed 0)", "k·gap", "inside")
    ]
    lines = [
        f"Proposition 1 (fixed embedding = the true vectors): CE − R_k, {s['samples']:,} Monte Carlo samples per k, "
        f"N = {s['items']}, d = {s['dim']}, seeds {s['seeds']} (one universe each); {machine()}. Variants: the k "
        "negatives uniform over the items other than the anchor (anchor excluded), or over all N items, the anchor "
        "included, as Whiteley's π (literal). Both variants share each k's anchors and positives.",
    ]
    rows, constants, shifts = [], [], []
    for kernel in s["kernels"]:
        for tau in s["taus"]:
            group = select(records, kernel=kernel, tau=tau)
            figures = {v: [_figures(r, v) for r in group] for v in variants}
            for i, k in enumerate(s["ks"]):
                cols = []
                for v in variants:
                    at_k = [f["rows"][i] for f in figures[v]]
                    gaps = [r["gap"] for r in at_k]
                    cols += [ci(gaps, ".2e"), f"{at_k[0]['se']:.1e}", f"{k * float(np.mean(gaps)):.3f}",
                             f"{sum(r['inside'] for r in at_k)}/{len(at_k)}"]  # fmt: skip
                first = figures[variants[0]][0]["rows"][i]
                rows.append([kernel, f"{tau:g}", k, *cols, f"{first['lower']:.3g}", f"{first['upper']:.3g}"])
            entry: dict = {"kernel": kernel, "tau": tau}
            for v in variants:
                f = figures[v]
                found = {
                    "cross_entropy": [x["cross_entropy"] for x in f],
                    "slope": list(mean_interval([x["slope"] for x in f])),
                    "per_seed": [x["slope"] for x in f],
                    "tail_slope": list(mean_interval([x["tail_slope"] for x in f])),
                    "sign_changes": [x["sign_changes"] for x in f],
                    "first_order_constant": [x["first_order_constant"] for x in f],
                    "jensen": [x["first_order_parts"]["jensen"] for x in f],
                    "positive": [x["first_order_parts"]["positive"] for x in f],
                    "k_gap_at_largest_k": [x["rows"][-1]["k"] * x["rows"][-1]["gap"] for x in f],
                    "gap_at_largest_k": [x["rows"][-1]["gap"] for x in f],
                }
                entry[v] = found
                if v == "excluded":  # the keys the summary had before the variants
                    entry |= {n: found[n] for n in ("slope", "per_seed", "tail_slope", "first_order_constant")}
                    entry["k_gap_at_largest_k"] = found["k_gap_at_largest_k"]
                constants.append([
                    kernel, f"{tau:g}", VARIANT_NAMES[v], ci(found["cross_entropy"], "+.3f"),
                    ci(found["per_seed"], "+.3f"), ci([x["tail_slope"] for x in f], "+.3f"),
                    f"{sum(n > 0 for n in found['sign_changes'])}/{len(f)}", ci(found["first_order_constant"], "+.2f"),
                    f"{np.mean(found['jensen']):.2f}", f"{np.mean(found['positive']):.2f}",
                    ci(found["k_gap_at_largest_k"], "+.2f"),
                ])  # fmt: skip
            if len(variants) == 2:
                shift = [b - a for a, b in zip(*(entry[v]["cross_entropy"] for v in variants), strict=True)]
                entry["cross_entropy_shift"] = shift
                c = [np.mean(entry[v]["first_order_constant"]) for v in variants]
                shifts.append([kernel, f"{tau:g}", ci(shift, "+.3f"), f"{c[0]:+.2f}", f"{c[1]:+.2f}"])
            summary["groups"].append(entry)
    lines += ["", *table(["kernel", "τ", "k", *head, "Whiteley lower", "Whiteley upper"], rows)]
    lines += [
        "", f"Per variant: the whole-universe CE, the slopes of log |CE − R_k| on log k per seed (all k; the 3 largest "
        f"k), seeds whose gap changes sign across k, the exact first-order constant C = lim k·(CE − R_k) = J − P "
        f"(J Jensen's part, E Var_q(w)/2Z̄²; P the positive's, E E_M w/Z̄) and the measured k·(CE − R_k) at k = "
        f"{s['ks'][-1]}; mean [95% t interval] over seeds:", "",
        *table(["kernel", "τ", "variant", "CE", "slope, all k", "slope, 3 largest k", "sign change", "C exact", "J",
                "P", "k·gap measured"], constants),
    ]  # fmt: skip
    if shifts:
        lines += [
            "", "The anchor among the negatives (literal − anchor excluded): the CE shift, paired by seed, and C in "
            "both variants:", "", *table(["kernel", "τ", "CE shift", "C, anchor excluded", "C, literal"], shifts),
        ]  # fmt: skip
    lines += ["", "Which part sets the sign of C:", "", *_sign_statement(summary["groups"], variants)]
    bounds, summary["bounds"] = _bounds_table(s, records, summary["groups"], variants)
    lines += bounds
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
PAIRED_HEADER = [f.name for f in PAIRED]


def paired_figures(records: list[dict], loss: str, part: str | None = None, **match: object) -> dict[str, list[float]]:
    """``loss`` − InfoNCE per seed for every figure of :data:`PAIRED` (of the records' ``part`` when given: an
    encoder's ``heldout`` items), over the cells of ``match``."""

    def getter(key: str) -> Callable[[dict], float]:
        return (lambda r: r[part][key]) if part else (lambda r: r[key])

    return {f.key: _paired(records, getter(f.key), loss, "infonce", **match) for f in PAIRED}


def paired_columns(diffs: dict[str, list[float]]) -> list[str]:
    """The table cells of :data:`PAIRED`'s differences, ``mean [low, high]``."""
    return [ci(diffs[f.key], f.fmt) for f in PAIRED]


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


SHORTFALL_BATCHES = 10


def true_vector_statistics(settings: SweepSettings) -> tuple[dict, list[str]]:
    """WEINCE's β̂, ρ_0 and λ at the true vectors of the sweep's universes (their own shortfalls), over the N − 1
    other items (what the universe KL scores WEINCE with) and over training batches of k negatives (what training
    reads), per seed; the record and the report's section. A universe's vectors do not depend on its kernel (one
    seed, one set of vectors), so neither do these. Empty when WEINCE is not in the sweep."""
    s = settings.to_dict()
    if "weince" not in s["losses"]:
        return {}, []
    kernel = s["kernels"][0]
    law = kernel_law(kernel, s["kappa"], s["beta"], s["blend_lambda"])
    per_seed = []
    for seed in s["seeds"]:
        universe = universe_of(settings, kernel, seed)
        generator = torch.Generator().manual_seed(seed * 1_000_003 + 7)
        loss = build_loss("weince", s["taus"][0], law)  # β, ρ_0 and λ do not read τ
        stats = shortfall_statistics(
            universe, universe.vectors, loss, max(s["ks"]), s["batch"], SHORTFALL_BATCHES, generator
        )
        per_seed.append({"seed": seed, **stats})
    cols = [ci([x[name] for x in per_seed], ".3f") for name in _SHORTFALL_COLUMNS]
    lines = [
        "", f"WEINCE's statistics at the true vectors (the universe's own shortfalls, d = {s['dim']}; the same for "
        f"every kernel): over the N − 1 = {s['items'] - 1} other items of every anchor, as the universe KL scores "
        f"WEINCE, and over {SHORTFALL_BATCHES} training batches of {s['batch']} anchors × k = {max(s['ks'])} uniform "
        "negatives, as training reads them; β̂ the loss's own (β mode ols, clamped), mean over seeds [95% t "
        f"interval]; the endpoint and blend kernels' β* = {s['beta']:g}:", "",
        *table(["d", "β̂, N − 1 items", "ρ_0, N − 1 items", "λ, N − 1 items", "β̂, k negatives", "ρ_0, k negatives",
                "λ, k negatives"], [[s["dim"], *cols]]),
    ]  # fmt: skip
    return {"dim": s["dim"], "beta_star": s["beta"], "per_seed": per_seed}, lines


_SHORTFALL_COLUMNS = (
    "universe_beta", "universe_rho0", "universe_lambda", "batch_beta", "batch_rho0", "batch_lambda",
)  # fmt: skip


def _decay(settings: dict) -> str:
    """The settings' final decay of the rate, as a report's header says it (nothing at a constant rate)."""
    anneal = settings.get("anneal", 0)
    return f", the rate decaying linearly to 0 over the last {anneal:,}" if anneal else ""


def _runs(check: dict) -> str:
    """How the check's two runs relate: one run going on at a constant rate, or two ending each in its own decay."""
    anneal = check.get("anneal", 0)
    if not anneal:
        return "of the same run"
    return (
        f"of two runs that share their first {check['steps'] - anneal:,} steps and each decay the rate linearly to 0 "
        f"over their own last {anneal:,}"
    )


def convergence_section(records: list[dict], fields: Sequence[str]) -> tuple[dict, list[str]]:
    """What a sweep's cells show of their convergence (:func:`~weince_lab.simulation.sweep_cells.convergence`): the
    summary and the report's lines. ``fields`` are the cell's fields holding ``cell`` keys that name an arm. Cells
    stored before the check carry none: the section then says they are not checked.

    Each check is one run continued to 1.5× its steps; a cell is converged when its universe KL moved by at most
    the tolerance. The arms with an unconverged cell are tabled (their cells, how many converged, the mean and the
    largest move), so that no ranking is read off them unmarked.
    """
    checks_of = [(r, c) for r in records for c in _checks(r)]
    if not checks_of:
        words = (
            "**Convergence: not checked.** These cells were trained before the check existed (each cell's run "
            "continued to 1.5× its steps, its universe KL compared); cells trained now carry it. Nothing ranked here "
            "is shown converged."
        )
        return {"checked": False}, ["", words]
    first = checks_of[0][1]
    converged = sum(c["converged"] for _, c in checks_of)
    summary = {"checked": True, "checks": len(checks_of), "converged": converged, "tolerance": first["tolerance"],
               "steps": first["steps"], "check_steps": first["check_steps"],
               **({"anneal": first["anneal"]} if first.get("anneal") else {})}  # fmt: skip
    stopped = any("stopped" in r for r, _ in checks_of)
    at = "universe KL at the step early stopping chose over" if stopped else "universe KL at"
    then = "and over" if stopped else "and at"
    lines = [
        "",
        f"**Convergence** ({at} {first['steps']:,} {then} {first['check_steps']:,} steps {_runs(first)}; "
        f"converged when it moved by at most {first['tolerance']:g} nats): {converged} of {len(checks_of)} checks "
        + ("passed." if converged == len(checks_of) else "passed; the arms with a cell that did not:"),
    ]
    groups: dict[tuple, list[dict]] = {}
    for record, check in checks_of:
        arm = (*(record["cell"].get(f) for f in fields if f != "seed"), check.get("part", ""))
        groups.setdefault(arm, []).append(check)
    rows = []
    for arm, group in groups.items():
        if all(c["converged"] for c in group):
            continue
        moved = [c["moved"] for c in group]
        rows.append([*(str(v) for v in arm if v != ""), f"{sum(c['converged'] for c in group)}/{len(group)}",
                     f"{np.mean(moved):+.4f}", f"{max(moved, key=abs):+.4f}"])  # fmt: skip
    if rows:
        names = [f for f in fields if f != "seed"] + (["part"] if checks_of[0][1].get("part") else [])
        lines += ["", *table([*names, "converged", "mean move", "largest move"], rows)]
    summary["unconverged_arms"] = len(rows)
    return summary, lines


def in_sweep_order(settings: SweepSettings, records: list[dict]) -> list[dict]:
    """``records`` in the order of the sweep's cells (the store holds them in the order they finished)."""
    rank = {cell_key(c): i for i, c in enumerate(cells(settings))}
    return sorted(records, key=lambda r: rank.get(cell_key(r["cell"]), len(rank)))


def _checks(record: dict) -> list[dict]:
    """A cell's convergence checks: one for a table; the trained and the held-out items' for an encoder."""
    found = record.get("convergence")
    if found is None:
        return []
    if "converged" in found:
        return [found]
    return [{**c, "part": part} for part, c in found.items()]


def report_negatives(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a negatives sweep."""
    s = settings.to_dict()
    size = str(max(s["eval_sizes"]))
    tau, n = s["taus"][0], s["pairs"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against k: τ = {tau:g}, {n:,} training pairs, {s['steps']} steps "
        f"of {s['batch']} anchors, Adam lr {s['lr']:g}{_decay(s)}; N = {s['items']}, d = d′ = {s['dim']}; "
        f"seeds {s['seeds']}; {machine()}. Means over seeds [95% t interval].",
    ]
    rows, slopes, paired, links, found = [], [], [], [], []
    summary: dict = {"cells": records, "slopes": [], "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            for k in s["ks"]:
                g = select(records, kernel=kernel, loss=loss, k=k, tau=tau, pairs=n)
                rows.append([
                    kernel, loss, k, ci([r["universe_gap"] for r in g]), ci([r["search_gap"][size]["mean"] for r in g]),
                    ci([r["top1"] for r in g], ".3f"), ci([r["recall10"] for r in g], ".3f"),
                    ci([r["best_link_gap"] for r in g]), f"{np.mean([r['cosine_corr'] for r in g]):.3f}",
                    f"{np.mean([r['procrustes'] for r in g]):.3f}", f"{np.mean([r['lambda_mean'] for r in g]):.3f}",
                ])  # fmt: skip
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
                [kernel, loss, f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]", ex, f"{len(readable)}/{len(excess)}"]
            )
            summary["slopes"].append(
                {"kernel": kernel, "loss": loss, "slope": [mean, low, high], "per_seed": per_seed,
                 "excess_slope_per_seed": excess}
            )  # fmt: skip
            g = select(records, kernel=kernel, loss=loss, k=max(s["ks"]))
            links.append([
                kernel, loss, ci([r["link"]["a"] for r in g], ".2f"), ci([r["link"]["b"] for r in g], ".2f"),
                ci([r["link"]["heldout_gain"] for r in g], ".4f"),
            ])  # fmt: skip
        for loss in _against_infonce(s):
            for k in s["ks"]:
                diffs = paired_figures(records, loss, kernel=kernel, k=k)
                paired.append([kernel, f"{loss} − infonce", k, *paired_columns(diffs)])
                words = disagreement(f"{kernel}, {loss} − infonce, k = {k}", diffs)
                found += [words] if words else []
                summary["paired"].append({"kernel": kernel, "loss": loss, "k": k, **diffs, "disagreement": words})
    lines += [
        "", *table(["kernel", "loss", "k", "universe KL", f"search KL (m = {size})", "top-1 agreement", "recall@10",
                    "best-link KL", "cosine r", "Procrustes", "λ (training)"], rows),
        "", "Slope of log(universe KL) on log k, fitted per seed, mean [95% t interval]; and the slope of the excess "
        "over the floor, log(KL(k) − floor) on the k below the two largest, floor = the smaller KL at the two "
        "largest k (seeds where every excess is > 0; the interval is over those):", "",
        *table(["kernel", "loss", "slope, all k", "excess slope", "seeds readable"], slopes),
        "", "Paired by seed (same universe, pairs, negatives, initial table and evaluation problems):", "",
        *table(["kernel", "difference", "k", *PAIRED_HEADER], paired),
        *disagreement_lines(found),
        "", f"Link selection on the learned cosines (true positives as winners; k = {max(s['ks'])}): a = (1 − λ)/τ, "
        "b = λβ, held-out gain of the family over the softmax link (nats / anchor):", "",
        *table(["kernel", "loss", "a", "b", "held-out gain"], links),
    ]  # fmt: skip
    truth = [f"{kernel}: (a*, b*) = {kernel_law(kernel, s['kappa'], s['beta'], s['blend_lambda']).coefficients}"
             for kernel in s["kernels"]]  # fmt: skip
    lines += ["", "True coefficients of the kernels' links: " + "; ".join(truth)]
    ordered = in_sweep_order(settings, records)
    summary["convergence"], checked = convergence_section(ordered, ("kernel", "loss", "k", "seed"))
    summary["true_vector_statistics"], more = true_vector_statistics(settings)
    return summary, "\n".join(lines + checked + more) + "\n"


def report_temperature(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of a temperature sweep."""
    s = settings.to_dict()
    k = s["ks"][0]
    lines = [
        f"Trained tables, gap to the Bayes search against τ: k = {k}, training sets of {s['pairs']} pairs, "
        f"{s['steps']} steps of {s['batch']} anchors{_decay(s)}; N = {s['items']}, d = {s['dim']}; seeds {s['seeds']}; "
        f"{machine()}. Means over seeds [95% t interval]; sd = the standard deviation across seeds.",
    ]
    header = ["kernel", "loss", "τ", *(f"universe KL, n = {n:,} (sd)" for n in s["pairs"]), "small − large n",
              "top-1 (largest n)", "recall@10 (largest n)", "best-link KL (largest n)", "λ (training)"]  # fmt: skip
    summary: dict = {"cells": records, "best": [], "paired": []}
    rows, best, paired, found = [], [], [], []
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
                rows.append([
                    kernel, loss, f"{tau:g}", *cols, ci(spread, "+.4f"), ci([r["top1"] for r in g], ".3f"),
                    ci([r["recall10"] for r in g], ".3f"), ci([r["best_link_gap"] for r in g]),
                    f"{np.mean([r['lambda_mean'] for r in g]):.3f}",
                ])  # fmt: skip
            tau_best = min(means, key=means.get)
            best.append([kernel, loss, f"{tau_best:g}", f"{means[tau_best]:.4f}"])
            summary["best"].append({"kernel": kernel, "loss": loss, "tau": tau_best, "universe_gap": means[tau_best]})
        for loss in _against_infonce(s):
            for tau in s["taus"]:
                for n in s["pairs"]:
                    diffs = paired_figures(records, loss, kernel=kernel, tau=tau, pairs=n)
                    paired.append([kernel, f"{loss} − infonce", f"{tau:g}", f"{n:,}", *paired_columns(diffs)])
                    words = disagreement(f"{kernel}, {loss} − infonce, τ = {tau:g}, n = {n:,}", diffs)
                    found += [words] if words else []
                    summary["paired"].append(
                        {"kernel": kernel, "loss": loss, "tau": tau, "pairs": n, **diffs, "disagreement": words}
                    )
    lines += [
        "", *table(header, rows),
        "", f"Best τ (lowest mean universe KL at n = {max(s['pairs']):,}):", "",
        *table(["kernel", "loss", "τ", "universe KL"], best),
        "", "Paired by seed (same universe, pairs, negatives, initial table and evaluation problems), mean [95% t "
        "interval]; KL lower is better, top-1 and recall@10 higher:", "",
        *table(["kernel", "difference", "τ", "n", *PAIRED_HEADER], paired),
        *disagreement_lines(found),
    ]  # fmt: skip
    ordered = in_sweep_order(settings, records)
    summary["convergence"], checked = convergence_section(ordered, ("kernel", "loss", "tau", "pairs", "seed"))
    summary["true_vector_statistics"], more = true_vector_statistics(settings)
    return summary, "\n".join(lines + checked + more) + "\n"


def report_encoder(settings: SweepSettings, records: list[dict]) -> tuple[dict, str]:
    """The summary (JSON) and the Markdown tables of an encoder sweep."""
    s = settings.to_dict()
    half, validation, held = encoder_split(s["items"], settings.early_stop)
    stopping = (
        f"; early stopping: the universe KL of {validation} other items (validation) read every {settings.early_stop} "
        "steps, the encoder scored at the step where it is lowest (its check: the same choice over the 1.5× run)"
        if settings.early_stop
        else ""
    )
    lines = [
        f"MLP encoder (observations: a random {s['dim']} → {s['obs_width']} projection of the latent vectors plus "
        f"N(0, {s['noise']:g}²) noise; hidden width {s['hidden']}) trained on {half} of {s['items']} items, scored on "
        f"those and on the {held} held-out items; k = {s['ks'][0]}, τ = {s['taus'][0]:g}, "
        f"{s['pairs'][0]:,} pairs, {s['steps']} steps of {s['batch']}{_decay(s)}{stopping}; seeds {s['seeds']}; "
        f"{machine()}. Means over seeds [95% t interval].",
    ]
    rows, paired, found, counts, summary = [], [], [], [], {"cells": records, "paired": []}
    for kernel in s["kernels"]:
        for loss in s["losses"]:
            g = select(records, kernel=kernel, loss=loss)
            rows.append([
                kernel, loss, ci([r["train"]["universe_gap"] for r in g]),
                ci([r["heldout"]["universe_gap"] for r in g]),
                ci([r["train"]["top1"] for r in g], ".3f"), ci([r["heldout"]["top1"] for r in g], ".3f"),
                ci([r["heldout"]["recall10"] for r in g], ".3f"), ci([r["heldout"]["best_link_gap"] for r in g]),
                f"{np.mean([r['heldout']['cosine_corr'] for r in g]):.3f}",
                f"{np.mean([r['lambda_mean'] for r in g]):.3f}",
                *([", ".join(str(r["stopped"]["steps"]) for r in g)] if settings.early_stop else []),
            ])  # fmt: skip
        for loss in _against_infonce(s):
            diffs = paired_figures(records, loss, "heldout", kernel=kernel)
            paired.append([kernel, f"{loss} − infonce", *paired_columns(diffs)])
            words = disagreement(f"{kernel}, {loss} − infonce, held-out items", diffs)
            found += [words] if words else []
            summary["paired"].append({"kernel": kernel, "loss": loss, "heldout": diffs, "disagreement": words})
            per_seed = [round(d * held) for d in diffs["top1"]]
            counts.append([kernel, f"{loss} − infonce", ", ".join(f"{c:+d}" for c in per_seed)])
            summary["paired"][-1]["heldout_top1_items"] = per_seed
    lines += ["", *table(["kernel", "loss", "universe KL, trained items", "universe KL, held-out items",
                          "top-1, trained", "top-1, held-out", "recall@10, held-out", "best-link KL, held-out",
                          "cosine r, held-out", "λ (training)",
                          *(["stopped at (steps, per seed)"] if settings.early_stop else [])], rows),
              "", "Held-out items, paired by seed, mean [95% t interval]; KL lower is better, top-1 and recall@10 "
              "higher:", "", *table(["kernel", "difference", *PAIRED_HEADER], paired),
              *disagreement_lines(found),
              "", f"Held-out top-1 differences in items (of {held}), per seed {s['seeds']}:", "",
              *table(["kernel", "difference", "items per seed"], counts),
              "", "Draws by seed s (torch generator seeds): universe 10007 + s, held-out split s + 17, observations "
              "3s + 2, encoder weights 2s + 1, training pairs and negatives 2s, link problems 1000003s + 1, search "
              f"problems 1000003s + m. Every loss at one seed shares them (paired). {shared_draws(s['seeds'])} "
              "The vmf oracle (λ* = 0 fixed, τ* = 1/κ) is InfoNCE at τ = 1/κ: where the sweep's τ is 1/κ the two "
              "arms are the same loss and every difference is 0 by construction."]  # fmt: skip
    summary["convergence"], checked = convergence_section(in_sweep_order(settings, records), ("kernel", "loss", "seed"))
    if settings.early_stop:
        checked += ["", _stopping_words(settings, records)]
    return summary, "\n".join(lines + checked) + "\n"


def _stopping_words(settings: SweepSettings, records: list[dict]) -> str:
    """What early stopping's convergence check compares, and how many of its choices lie in the steps the budget's
    run and its check share (there the two are one state and the check passes by construction)."""
    shared = settings.steps - settings.anneal
    same = sum(r["stopped"]["steps"] == r["stopped"]["check_steps"] <= shared for r in records)
    steps = sorted(r["stopped"]["steps"] for r in records)
    return (
        f"With early stopping each check compares the figures at the step chosen over the {settings.steps:,}-step "
        f"run with those at the step chosen over the {check_steps(settings.steps):,}-step run. In {same} of "
        f"{len(records)} cells both chose the same step among the first {shared:,}, which the two runs share: one "
        "state, so the choice does not depend on the budget and the check passes by construction. Chosen steps: "
        f"{steps[0]}–{steps[-1]}, median {np.median(steps):g}. The λ column is the whole run's (its last tenth), "
        "not the chosen step's."
    )


def encoder_generator_seeds(seed: int, size: int) -> dict[str, int]:
    """The torch generator seed of each draw of an encoder cell at ``seed`` (search problems of ``size``
    candidates): :func:`~weince_lab.simulation.sweep_cells.encoder_cell` and its calls into
    :mod:`~weince_lab.simulation.learning`."""
    return {
        "universe": 10_007 + seed, "held-out split": seed + 17, "observations": 3 * seed + 2,
        "encoder weights": 2 * seed + 1, "training data": 2 * seed, "link problems": seed * 1_000_003 + 1,
        "search problems": seed * 1_000_003 + size,
    }  # fmt: skip


def shared_draws(seeds: Sequence[int], size: int = 256) -> str:
    """A sentence naming the generator seeds that serve two draws (of one seed or of two), or saying none do."""
    users: dict[int, list[str]] = {}
    for seed in seeds:
        for role, value in encoder_generator_seeds(seed, size).items():
            users.setdefault(value, []).append(f"{role} of seed {seed}")
    twice = [f"{value} ({' and '.join(names)})" for value, names in users.items() if len(names) > 1]
    if not twice:
        return "No generator seed serves two draws."
    return (
        "No draw is shared across seeds, but these generator seeds serve two draws (the same random stream read in "
        "different roles): " + "; ".join(twice) + "."
    )


REPORTS = {
    "proposition": report_proposition,
    "negatives": report_negatives,
    "temperature": report_temperature,
    "encoder": report_encoder,
}
