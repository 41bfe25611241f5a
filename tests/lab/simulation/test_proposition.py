"""Whiteley's Proposition 1 in both variants: the negatives drawn from the items other than the anchor, and the
literal one (negatives from π = all items, the anchor included); the bounds' size; the sweep's cells, store and
report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from weince_lab.simulation.search import (
    first_order_constant,
    first_order_parts,
    proposition_bounds,
    proposition_one,
    trivial_bounds,
    whole_universe_cross_entropy,
)
from weince_lab.simulation.sweep_cells import cells, is_complete
from weince_lab.simulation.sweep_reports import _bounds_table, _sign_statement, report_proposition
from weince_lab.simulation.sweep_runner import run_sweep
from weince_lab.simulation.sweep_settings import resolve
from weince_lab.simulation.universe import Universe, kernel_law, make_universe


def _loop_constant(u: Universe, tau: float, include_anchor: bool) -> tuple[float, float]:
    """(J, P) of the first-order constant from its definition, by loops with plain exponentials: q_x uniform over
    the items other than x, or over all N items (the anchor included)."""
    s = (u.vectors @ u.vectors.T).tolist()
    m = u.transition().tolist()
    n = u.size
    jensen = positive = 0.0
    for x in range(n):
        pool = list(range(n)) if include_anchor else [y for y in range(n) if y != x]
        w = [math.exp(s[x][y] / tau) for y in pool]
        zbar = sum(w) / len(pool)
        var = sum(v * v for v in w) / len(pool) - zbar**2
        jensen += var / (2 * zbar**2) / n
        positive += sum(m[x][y] * math.exp(s[x][y] / tau) for y in range(n)) / zbar / n
    return jensen, positive


def test_the_literal_variant_against_an_exact_enumeration_at_k_1() -> None:
    """R_1 and CE with the negative drawn from all N items (the anchor included), by enumerating every
    (x, y⁺, y⁻) of a 6-item universe; the Monte Carlo CE − R_1 within 4 SE of it, and not the anchor-excluded one."""
    u = make_universe(6, 3, kernel_law("vmf", kappa=3.0), seed=4)
    tau, n = 0.25, u.size
    s = (u.vectors @ u.vectors.T).tolist()
    m = u.transition().tolist()
    risk = ce = 0.0
    for x in range(n):
        zbar = sum(math.exp(s[x][y] / tau) for y in range(n)) / n  # π: the anchor's own weight e^{1/τ} included
        for yp in range(n):
            if m[x][yp] == 0:
                continue
            ce += m[x][yp] / n * (-s[x][yp] / tau + math.log(zbar))
            for yn in range(n):
                risk += m[x][yp] / n / n * math.log1p(math.exp((s[x][yn] - s[x][yp]) / tau))
    assert whole_universe_cross_entropy(u, u.vectors, tau, include_anchor=True) == pytest.approx(ce, rel=1e-12)
    assert whole_universe_cross_entropy(u, u.vectors, tau) < ce  # the anchor raises Z̄_x
    est = proposition_one(u, u.vectors, tau, 1, 400_000, torch.Generator().manual_seed(0), include_anchor=True)
    assert abs(est.gap - (ce - risk)) < 4 * est.se
    excluded = proposition_one(u, u.vectors, tau, 1, 400_000, torch.Generator().manual_seed(0))
    assert abs(excluded.gap - (ce - risk)) > 10 * est.se  # the enumeration tells the variants apart
    low, high = trivial_bounds(1, tau)
    assert low <= ce - risk <= high


def test_the_first_order_constant_of_both_variants_against_a_loop_and_monte_carlo() -> None:
    """C = J − P from a loop over the definition, and k·(CE − R_k) at k = 250 by Monte Carlo, in both variants. The
    universe is chosen where the anchor turns C's sign: Jensen's part with the anchor's weight outgrows the
    positive's."""
    u = make_universe(64, 4, kernel_law("vmf", kappa=5.0), seed=1)
    tau, k = 0.1, 250
    found = {}
    for include in (False, True):
        jensen, positive = first_order_parts(u, u.vectors, tau, include)
        ref_j, ref_p = _loop_constant(u, tau, include)
        assert jensen == pytest.approx(ref_j, rel=1e-9) and positive == pytest.approx(ref_p, rel=1e-9)
        c = first_order_constant(u, u.vectors, tau, include)
        assert c == pytest.approx(ref_j - ref_p, rel=1e-9)
        est = proposition_one(u, u.vectors, tau, k, 40_000, torch.Generator().manual_seed(0), include_anchor=include)
        assert abs(k * est.gap - c) < 4 * k * est.se + 0.05 * abs(c)
        found[include] = (c, k * est.gap, k * est.se)
    (c_ex, g_ex, se_ex), (c_lit, g_lit, se_lit) = found[False], found[True]
    assert c_ex < 0 < c_lit  # the sign flips, and the measured k·gap sees it far outside its noise
    assert g_ex < -4 * se_ex and g_lit > 4 * se_lit


def test_the_literal_cross_entropy_shift_is_the_anchors_share_of_z() -> None:
    """CE_literal − CE_excluded = E_x log((N − 1)/N + e^{ŝ_xx/τ}/(N Z̄_x)), exactly."""
    u = make_universe(40, 5, kernel_law("endpoint", beta=3.0), seed=2)
    tau, n = 0.1, u.size
    s = (u.vectors @ u.vectors.T).tolist()
    shift = 0.0
    for x in range(n):
        zbar = sum(math.exp(s[x][y] / tau) for y in range(n) if y != x) / (n - 1)
        shift += math.log((n - 1) / n + math.exp(s[x][x] / tau) / (n * zbar)) / n
    got = whole_universe_cross_entropy(u, u.vectors, tau, True) - whole_universe_cross_entropy(u, u.vectors, tau)
    assert got == pytest.approx(shift, rel=1e-9) and got > 0.1


def test_the_bounds_are_not_of_order_e_to_the_2_over_tau_over_k() -> None:
    """The lower bound is −e^{2/τ}/k only for k ≫ e^{2/τ}, else −(2/τ − log k); the upper one's constant is
    (e^{2/τ} − 1)²/8 ≈ e^{4/τ}/8, vacuous (above 2/τ) exactly for k < τ(e^{2/τ} − 1)²/16."""
    lower, upper = proposition_bounds(1024, 0.1)
    assert lower == pytest.approx(-13.069, abs=1e-3)  # not −e^{20}/1024 ≈ −4.7·10⁵
    assert lower == pytest.approx(-(20 - math.log(1024)), abs=1e-5)
    assert upper == pytest.approx(math.exp(40) / (8 * 1024), rel=1e-8)
    assert proposition_bounds(10**7, 1.0)[0] == pytest.approx(-math.exp(2) / 10**7, rel=1e-5)
    tau = 0.5
    threshold = tau * (math.exp(2 / tau) - 1) ** 2 / 16  # 89.8
    assert proposition_bounds(89, tau)[1] > trivial_bounds(89, tau)[1]
    assert proposition_bounds(90, tau)[1] < trivial_bounds(90, tau)[1] and 89 < threshold < 90
    for k, tau in [(4, 0.05), (1024, 0.1), (16, 0.5)]:  # the lower bound always within the trivial range
        assert trivial_bounds(k, tau)[0] < proposition_bounds(k, tau)[0] < 0


def _group(kernel: str, tau: float, ex: tuple[float, float], lit: tuple[float, float], gap: float) -> dict:
    part = {"gap_at_largest_k": [gap]}
    return {
        "kernel": kernel,
        "tau": tau,
        "excluded": part | {"jensen": [ex[0]], "positive": [ex[1]]},
        "literal": part | {"jensen": [lit[0]], "positive": [lit[1]]},
    }


def test_the_sign_statement_is_qualified_by_variant() -> None:
    groups = [
        _group("vmf", 0.1, (13.0, 27.0), (37.0, 18.0), -0.0135),
        _group("vmf", 0.5, (0.3, 3.3), (0.3, 3.2), -0.003),
        _group("endpoint", 0.05, (62.0, 75.0), (180.0, 17.0), -0.01),
    ]
    text = "\n".join(_sign_statement(groups, ["excluded", "literal"]))
    assert "in 3 of 3 (kernel, τ) groups; Jensen's part wins (C > 0) at: none." in text
    assert "in 1 of 3 (kernel, τ) groups; Jensen's part wins (C > 0) at: vmf τ 0.1, endpoint τ 0.05." in text
    assert "holds for the anchor-excluded variant only" in text
    both = "\n".join(_sign_statement(groups[1:2], ["excluded", "literal"]))
    assert "holds for the anchor-excluded variant only" not in both and "100% of the groups" in both


def test_the_bounds_table_says_where_the_bounds_are_vacuous() -> None:
    settings = {"ks": [64, 1024], "taus": [0.1, 0.5]}
    groups = [_group("vmf", 0.1, (1, 2), (2, 1), -0.0135), _group("vmf", 0.5, (1, 2), (1, 2), -0.00292)]
    records = [
        {"cell": {"tau": tau, "seed": 0}, "rows": [{"inside": True}], "literal": {"rows": [{"inside": False}]}}
        for tau in (0.1, 0.5)
    ]
    lines, found = _bounds_table(settings, records, groups, ["excluded", "literal"])
    by_tau = {r["tau"]: r for r in found}
    assert by_tau[0.1]["verdict"].startswith("vacuous") and not by_tau[0.5]["verdict"].startswith("vacuous")
    assert by_tau[0.1]["lower_over_gap"][0] == pytest.approx(13.069 / 0.0135, rel=1e-3)  # about 10³, not 3·10⁷
    assert by_tau[0.5]["upper_over_gap"][0] == pytest.approx(proposition_bounds(1024, 0.5)[1] / 0.00292)
    assert "τ 0.1: 1/2; τ 0.5: 1/2." in lines[-1] and "At τ ∈ {0.1} that check is vacuous" in lines[-1]


def test_a_store_made_before_the_variants_resumes_and_computes_the_literal_figures(tmp_path: Path) -> None:
    """Cells stored without the variants (as the stored sweep was) run again; the anchor-excluded figures keep
    their keys and values, the literal ones are added; a changed --variants is a cell of its own."""
    given = {"kernels": ["vmf"], "ks": [16, 64], "samples": 2000, "seeds": [0], "taus": [0.5]}
    settings = resolve("proposition", given, quick=True)
    assert [c["variants"] for c in cells(settings)] == [["excluded", "literal"]]
    (first,) = run_sweep(settings, tmp_path, 1, progress=lambda _: None)
    assert is_complete("proposition", first) and first["literal"]["rows"][0]["k"] == 16
    old = {k: v for k, v in first.items() if k not in ("literal", "first_order_parts")}
    old["cell"] = {k: v for k, v in first["cell"].items() if k != "variants"}
    assert not is_complete("proposition", old)
    (tmp_path / "proposition.cells.jsonl").write_text(json.dumps(old) + "\n")
    saved = json.loads((tmp_path / "proposition.settings.json").read_text())
    saved.pop("variants")
    (tmp_path / "proposition.settings.json").write_text(json.dumps(saved))
    said: list[str] = []
    (again,) = run_sweep(settings, tmp_path, 1, progress=said.append)
    assert said[0] == "1 stored cells lack figures the sweep now computes: they run again"
    assert again["rows"] == first["rows"] and again["literal"]["rows"] == first["literal"]["rows"]
    assert len((tmp_path / "proposition.cells.jsonl").read_text().splitlines()) == 1  # the outdated line dropped
    literal = resolve("proposition", given | {"variants": ["literal"]}, quick=True)
    (only,) = run_sweep(literal, tmp_path, 1, progress=lambda _: None)
    assert "rows" not in only and only["literal"]["rows"] == first["literal"]["rows"]
    summary, text = report_proposition(literal, [only])
    assert "literal (anchor included)" in text and "anchor excluded [95% CI]" not in text
    assert "excluded" not in summary["groups"][0] and "Whiteley lower" in text
