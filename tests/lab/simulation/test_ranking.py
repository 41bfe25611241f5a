"""Ranking beside KL (issue 41): recall@k of the Bayes top-1, the universe KL under a given link and the best-link
KL, WEINCE's statistics at the true vectors, the reports' paired disagreement sentence, and the cell store rerunning
records made before these figures existed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from weince_lab.simulation.cell_store import CellStore
from weince_lab.simulation.learning import build_loss
from weince_lab.simulation.search import (
    learned_link,
    link_universe_gap,
    recall_at,
    shortfall_statistics,
    top1_agreement,
    universe_gap,
)
from weince_lab.simulation.sweep_cells import RANKING_FIELDS, cell_key, cells, is_complete
from weince_lab.simulation.sweep_reports import disagreement, paired_figures
from weince_lab.simulation.sweep_settings import resolve
from weince_lab.simulation.universe import Universe, kernel_law, make_universe


def _universe(kernel: str, items: int = 60, dim: int = 4, seed: int = 0) -> Universe:
    return make_universe(items, dim, kernel_law(kernel, kappa=10.0, beta=3.0, lam=0.5), seed)


def _noisy(u: Universe, sigma: float, seed: int) -> torch.Tensor:
    noise = torch.randn(u.vectors.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.normalize(u.vectors + sigma * noise, dim=1)


# ---- recall@k ----------------------------------------------------------------------------------------------------
def _recall_loop(u: Universe, table: torch.Tensor, k: int) -> float:
    """From the definition, one item at a time: is the Bayes top-1 among the k largest learned cosines?"""
    latent, learned = u.cosines().tolist(), (table @ table.T).tolist()
    hits = 0
    for x in range(u.size):
        others = [y for y in range(u.size) if y != x]
        bayes = max(others, key=lambda y: latent[x][y])
        ranked = sorted(others, key=lambda y: -learned[x][y])
        hits += bayes in ranked[:k]
    return hits / u.size


@pytest.mark.parametrize("sigma", [0.2, 0.6])
def test_recall_against_a_loop_reference_and_its_bounds(sigma: float) -> None:
    u = _universe("endpoint")
    table = _noisy(u, sigma, seed=1)
    for k in (1, 3, 10):
        assert recall_at(u, table, k) == pytest.approx(_recall_loop(u, table, k), abs=1e-12)
    assert recall_at(u, table, 1) == top1_agreement(u, table)  # k = 1 is top-1 agreement
    assert top1_agreement(u, table) <= recall_at(u, table, 3) <= recall_at(u, table, 10) <= 1.0
    assert recall_at(u, table, 10) > top1_agreement(u, table)  # a noisy table misses some top-1s by a few ranks
    assert recall_at(u, table, u.size - 1) == 1.0 == recall_at(u, table, 10 * u.size)
    assert recall_at(u, u.vectors, 1) == 1.0


def test_recall_refuses_k_below_one() -> None:
    u = _universe("vmf", items=10)
    with pytest.raises(ValueError, match="recall@k needs k >= 1, got 0"):
        recall_at(u, u.vectors, 0)


# ---- KL under a link, best-link KL ------------------------------------------------------------------------------
def _link_kl_loop(u: Universe, table: torch.Tensor, a: float, b: float) -> float:
    """(1/N) Σ_x Σ_{y≠x} M(x, y) log(M(x, y) / Q(x, y)), Q ∝ exp(a s + b (−log(1 − s))), one anchor at a time."""
    m, s = u.transition().tolist(), (table @ table.T).tolist()
    total = 0.0
    for x in range(u.size):
        others = [y for y in range(u.size) if y != x]
        logits = {y: a * s[x][y] - b * math.log(1 - min(s[x][y], 1 - 1e-6)) for y in others}
        top = max(logits.values())
        log_z = top + math.log(sum(math.exp(v - top) for v in logits.values()))
        total += sum(m[x][y] * (math.log(m[x][y]) - (logits[y] - log_z)) for y in others if m[x][y] > 0)
    return total / u.size


@pytest.mark.parametrize("kernel", ["vmf", "endpoint", "blend"])
def test_the_true_table_under_the_true_link_has_zero_kl(kernel: str) -> None:
    u = _universe(kernel)
    a, b = u.kernel.coefficients
    assert abs(link_universe_gap(u, u.vectors, a, b)) < 1e-12
    assert link_universe_gap(u, u.vectors, a + 2.0, b) > 1e-3  # another link is not the truth's


@pytest.mark.parametrize(("a", "b"), [(4.0, 0.0), (0.0, 3.0), (7.5, -0.4)])
def test_link_kl_against_a_loop_reference(a: float, b: float) -> None:
    u = _universe("blend", items=30)
    table = _noisy(u, 0.5, seed=2)
    assert link_universe_gap(u, table, a, b) == pytest.approx(_link_kl_loop(u, table, a, b), rel=1e-9)


def test_the_softmax_link_is_infonces_own_kl() -> None:
    """b = 0, a = 1/τ is InfoNCE's law of the positive: the KL under the loss's own link."""
    u = _universe("vmf")
    table = _noisy(u, 0.4, seed=3)
    assert link_universe_gap(u, table, 1 / 0.2, 0.0) == pytest.approx(
        universe_gap(u, table, build_loss("infonce", 0.2, u.kernel)), rel=1e-5
    )


def test_the_best_link_of_the_true_vectors_is_near_the_truth() -> None:
    """Refitting the link on the true table's cosines (over fresh problems) recovers the kernel's link, so the
    best-link KL is near 0, far below the KL under a mis-set softmax link."""
    u = _universe("endpoint", items=200, dim=6)
    fit = learned_link(u, u.vectors, 32, 8, 200, torch.Generator().manual_seed(0))
    best = link_universe_gap(u, u.vectors, fit.a, fit.b)
    assert 0 <= best < 0.02
    assert best < 0.1 * universe_gap(u, u.vectors, build_loss("infonce", 0.1, u.kernel))


# ---- WEINCE's statistics at the true vectors -----------------------------------------------------------------------
def test_shortfall_statistics_read_the_universe_as_the_kl_scores_it() -> None:
    """At the stored sweeps' size (N = 512, d = 8) β̂ over the N − 1 items is ≈ 3.0 (the coincidence with β* of
    issue 41, item 9), above the training batches' β̂; at d = 16 it is far from 3."""
    law = kernel_law("endpoint", beta=3.0)
    loss = build_loss("weince", 0.2, law)
    found = {}
    for dim in (8, 16):
        u = make_universe(512, dim, law, seed=10_007)
        found[dim] = shortfall_statistics(u, u.vectors, loss, 64, 256, 3, torch.Generator().manual_seed(0))
    assert found[8]["universe_beta"] == pytest.approx(3.0, abs=0.1)
    assert found[8]["batch_beta"] < found[8]["universe_beta"] and found[8]["batch_rho0"] > found[8]["universe_rho0"]
    assert found[16]["universe_beta"] > 4.5


# ---- the reports' disagreement sentence ----------------------------------------------------------------------------
def _records(kl: list[float], top1: list[float]) -> list[dict]:
    """InfoNCE at 0 on every figure; the arm at the given KL and top-1 differences (recall and best-link at 0)."""
    out = []
    for seed, (d_kl, d_top) in enumerate(zip(kl, top1, strict=True)):
        base = {"universe_gap": 1.0, "top1": 0.5, "recall10": 0.9, "best_link_gap": 0.7}
        arm = base | {"universe_gap": 1.0 + d_kl, "top1": 0.5 + d_top}
        out += [{"cell": {"loss": "infonce", "seed": seed}, **base}, {"cell": {"loss": "weince", "seed": seed}, **arm}]
    return out


def test_disagreement_is_said_only_when_both_intervals_exclude_zero_and_point_opposite_ways() -> None:
    lower_kl_worse_rank = paired_figures(_records([-0.11, -0.12, -0.10], [-0.06, -0.07, -0.05]), "weince")
    assert lower_kl_worse_rank["universe_gap"] == pytest.approx([-0.11, -0.12, -0.10])
    words = disagreement("endpoint, τ = 0.2", lower_kl_worse_rank)
    assert words is not None and words.startswith("endpoint, τ = 0.2: the KL puts the arm closer to")
    assert "ranks worse (top-1 -0.060 [" in words and "recall@10" not in words
    higher_kl_better_rank = paired_figures(_records([0.11, 0.12, 0.10], [0.06, 0.07, 0.05]), "weince")
    assert "farther from" in disagreement("x", higher_kl_better_rank) and "ranks better" in disagreement(
        "x", higher_kl_better_rank
    )
    assert disagreement("x", paired_figures(_records([-0.11, -0.12, -0.10], [0.06, 0.07, 0.05]), "weince")) is None
    assert disagreement("x", paired_figures(_records([-0.11, 0.12, -0.10], [-0.06, -0.07, -0.05]), "weince")) is None
    assert disagreement("x", paired_figures(_records([-0.11, -0.12, -0.10], [-0.06, 0.07, -0.05]), "weince")) is None


# ---- the store reruns outdated records ---------------------------------------------------------------------------
def test_a_record_without_the_ranking_fields_is_not_done_and_its_line_is_dropped(tmp_path: Path) -> None:
    settings = resolve("temperature", {"kernels": ["vmf"], "losses": ["infonce"], "seeds": [0]}, quick=True)
    first, second = cells(settings)[:2]
    current = {"cell": first, "universe_gap": 1.0, **dict.fromkeys(RANKING_FIELDS, 0.5), "convergence": {}}
    outdated = {"cell": second, "universe_gap": 1.0, "top1": 0.5}  # stored before recall10 and best-link KL
    assert is_complete("temperature", current) and not is_complete("temperature", outdated)
    assert not is_complete("encoder", {"heldout": {"top1": 0.5}})
    CellStore(tmp_path, settings).start()  # the settings file
    path = tmp_path / "temperature.cells.jsonl"
    path.write_text(json.dumps(outdated) + "\n" + json.dumps(current) + "\n")
    store = CellStore(tmp_path, settings)
    assert list(store.done) == [cell_key(first)] and store.outdated == 1
    store.start()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [current]
    assert CellStore(tmp_path, settings).outdated == 0
