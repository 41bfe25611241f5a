"""The decision rule's measurement: the rule on hand-made fits, the problems' layout, the binomial interval's closed
forms, the truth read from sweep records, the rule against known kernels, and seeded reproducibility."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from simcse_weince.diagnostics.link import LinkFit
from weince_lab.simulation.decision_rule import (
    DecisionRuleConfig,
    Size,
    best_infonce_tau,
    cell_groups,
    clopper_pearson,
    diagnostic_batches,
    rates,
    rule_fires,
    rule_run,
    sweep_truth,
)
from weince_lab.simulation.universe import kernel_law, make_universe

BASE_FIT = LinkFit(
    a=8.0, b=0.5, a_ci=(7.0, 9.0), b_ci=(0.1, 0.9), a_se=0.5, b_se=0.2, level=0.95, softmax_a=9.0, train_gain=0.01,
    heldout_gain=0.01, heldout_gain_se=0.004, heldout_gain_ci=(0.002, 0.018), heldout_ll_family=-2.0,
    heldout_ll_softmax=-2.01, n_anchors=512, n_train_anchors=256, n_heldout_anchors=256, converged=True,
)  # fmt: skip


def test_the_rule_needs_a_positive_b_and_a_gain_interval_above_zero() -> None:
    assert rule_fires(BASE_FIT)
    assert not rule_fires(dataclasses.replace(BASE_FIT, heldout_gain_ci=(-0.001, 0.018)))  # gain not shown
    assert not rule_fires(dataclasses.replace(BASE_FIT, b=-0.2))  # a gain, but b̂ ≤ 0 (the "text signature" side)
    assert not rule_fires(dataclasses.replace(BASE_FIT, b=0.0))
    assert not rule_fires(dataclasses.replace(BASE_FIT, heldout_gain_ci=(0.0, 0.018)))  # the bound itself is not > 0


def test_clopper_pearson_meets_its_closed_forms() -> None:
    """k = 0: [0, 1 − (α/2)^(1/n)]; k = n: [(α/2)^(1/n), 1]; and the interval of n − k mirrors that of k."""
    for n in (1, 10, 102):
        assert clopper_pearson(0, n) == pytest.approx((0.0, 1 - 0.025 ** (1 / n)), rel=1e-9)
        assert clopper_pearson(n, n) == pytest.approx((0.025 ** (1 / n), 1.0), rel=1e-9)
    low, high = clopper_pearson(21, 100)
    mirror_low, mirror_high = clopper_pearson(79, 100)
    assert (low, high) == pytest.approx((1 - mirror_high, 1 - mirror_low), rel=1e-9)
    assert low < 0.21 < high and high - low < 0.2
    for bad in ((3, 2), (-1, 4), (0, 0)):
        with pytest.raises(ValueError):
            clopper_pearson(*bad)


def test_sizes_parse_and_need_two_batches() -> None:
    assert Size.parse("32x256") == Size(32, 256) and str(Size(4, 128)) == "4x128"
    for bad in ("1x128", "4x1", "4by128", "x128"):
        with pytest.raises(ValueError):
            Size.parse(bad)


def test_diagnostic_batches_are_the_simcse_layout_with_the_anchor_item_left_out() -> None:
    """B × B cosines of anchors against the batch's positives, winner on the diagonal, the anchor's own item
    excluded where it is another anchor's positive; the same seed gives the same batches."""
    universe = make_universe(24, 3, kernel_law("vmf", kappa=5.0), seed=3)
    table = torch.randn(24, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    unit = torch.nn.functional.normalize(table, dim=1)
    batches = diagnostic_batches(universe, table, Size(3, 16), torch.Generator().manual_seed(7))
    generator = torch.Generator().manual_seed(7)  # replay the draws
    assert len(batches) == 3
    for batch in batches:
        anchors, positives = universe.sample_pairs(16, generator)
        assert torch.equal(batch.winner, torch.arange(16))
        torch.testing.assert_close(batch.scores, unit[anchors] @ unit[positives].T)
        assert torch.equal(batch.excluded, anchors[:, None] == positives[None, :])
        assert not bool(batch.excluded.diagonal().any())
    assert any(bool(b.excluded.any()) for b in batches)  # 24 items, 16 pairs a batch: an anchor's item recurs
    again = diagnostic_batches(universe, table, Size(3, 16), torch.Generator().manual_seed(7))
    assert all(torch.equal(a.scores, b.scores) for a, b in zip(batches, again, strict=True))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The link fits are many small float64 products: on a shared CPU extra threads only wait for each other (ten
    times slower at 2 threads on 2 busy cores), so these tests run one, as the command's cells do."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def universes() -> dict:
    """The sweep's size (512 items, d = 8), one universe per kernel."""
    return {k: make_universe(512, 8, kernel_law(k), seed=10_007) for k in ("vmf", "endpoint")}


def test_a_softmax_truth_rarely_fires_and_an_endpoint_truth_fires_at_8x256(universes: dict) -> None:
    """At the true cosines, winners of the vMF kernel (the softmax link, b* = 0) leave b̂ > 0 with a gain in at
    most 1 of 10 runs; those of the endpoint kernel (b* = 3) in at least 9 of 10."""
    fired = {}
    for kernel, universe in universes.items():
        generator = torch.Generator().manual_seed(11)
        fired[kernel] = sum(rule_run(universe, universe.vectors, Size(8, 256), generator)["fires"] for _ in range(10))
    assert fired["vmf"] <= 1
    assert fired["endpoint"] >= 9


def test_a_run_is_reproduced_by_its_seed(universes: dict) -> None:
    universe = universes["endpoint"]
    first = rule_run(universe, universe.vectors, Size(2, 64), torch.Generator().manual_seed(5))
    assert first == rule_run(universe, universe.vectors, Size(2, 64), torch.Generator().manual_seed(5))
    assert first != rule_run(universe, universe.vectors, Size(2, 64), torch.Generator().manual_seed(6))


def _record(kernel: str, loss: str, tau: float, seed: int, gap: float, pairs: int = 100) -> dict:
    return {"cell": {"kernel": kernel, "loss": loss, "tau": tau, "pairs": pairs, "seed": seed}, "universe_gap": gap}


def test_the_truth_is_the_paired_interval_below_zero() -> None:
    records = [
        *(_record("vmf", "infonce", 0.1, s, g) for s, g in enumerate((0.30, 0.32, 0.31))),
        *(_record("vmf", "weince", 0.1, s, g) for s, g in enumerate((0.20, 0.23, 0.21))),  # −0.1 ± little: helps
        *(_record("vmf", "infonce", 0.5, s, g) for s, g in enumerate((0.20, 0.25, 0.22))),
        *(_record("vmf", "weince", 0.5, s, g) for s, g in enumerate((0.10, 0.40, 0.20))),  # straddles 0
        _record("vmf", "weince", 0.5, 3, 0.0),  # no InfoNCE partner: not paired
        _record("vmf", "infonce", 0.1, 0, 9.0, pairs=10),  # another training-set size
    ]
    helps = sweep_truth(records, "vmf", 0.1, 100)
    assert helps.seeds == (0, 1, 2) and helps.diffs == pytest.approx((-0.10, -0.09, -0.10))
    assert helps.helps and helps.high < 0
    unclear = sweep_truth(records, "vmf", 0.5, 100)
    assert unclear.seeds == (0, 1, 2) and unclear.low < 0 < unclear.high and not unclear.helps
    assert best_infonce_tau(records, "vmf", 100) == 0.5  # mean 0.223 < 0.31
    with pytest.raises(ValueError):
        sweep_truth(records, "endpoint", 0.1, 100)
    with pytest.raises(ValueError):
        best_infonce_tau(records, "blend", 100)


def test_right_is_firing_exactly_where_weince_helps() -> None:
    runs = [{"fires": f, "seed": s, "b": 0.1, "gain": 0.0, "converged": True} for s, f in enumerate([1, 0, 0, 1, 0])]
    runs = [r | {"fires": bool(r["fires"])} for r in runs]
    helps, hurts, unknown = rates(runs, True), rates(runs, False), rates(runs, None)
    assert (helps["fires"], helps["right"], hurts["right"]) == (2, 2, 3)
    assert helps["fires_ci"] == pytest.approx(clopper_pearson(2, 5)) and hurts["right_ci"] == clopper_pearson(3, 5)
    assert "right" not in unknown and unknown["fires_share"] == pytest.approx(0.4)
    assert list(helps["fires_share_per_seed"].values()) == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_cells_run_main_first_and_an_off_tau_equal_to_the_best_is_not_repeated(tmp_path) -> None:
    cfg = DecisionRuleConfig(tmp_path, (Size(2, 8),), 1, off_taus=(0.5, 0.2), true_cosines=True)
    groups = cell_groups(cfg, ["vmf", "endpoint"], {"vmf": 0.1, "endpoint": 0.2})
    assert groups == [
        [("vmf", 0.1), ("endpoint", 0.2), ("vmf", 0.5), ("endpoint", 0.5)],
        [("vmf", 0.2)],
        [("vmf", None), ("endpoint", None)],
    ]
    assert cell_groups(dataclasses.replace(cfg, off_taus=(), true_cosines=False), ["vmf"], {"vmf": 0.1}) == [
        [("vmf", 0.1)]
    ]
