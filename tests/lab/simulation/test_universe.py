"""The universe: kernels, positive pairs, negatives and the Bayes posterior against direct computations."""

from __future__ import annotations

import math

import pytest
import torch

from weince_lab.simulation.universe import Universe, kernel_law, make_universe, unit_vectors


@pytest.fixture(scope="module")
def small() -> Universe:
    return make_universe(7, 3, kernel_law("blend", kappa=4.0, beta=2.0, lam=0.4), seed=1)


def test_kernels_are_the_links() -> None:
    assert kernel_law("vmf", kappa=8.0).coefficients == (8.0, 0.0)
    assert kernel_law("endpoint", beta=2.5).coefficients == (0.0, 2.5)
    assert kernel_law("blend", kappa=10.0, beta=3.0, lam=0.5).coefficients == (5.0, 1.5)
    for bad in ({"name": "gauss"}, {"name": "vmf", "kappa": 0.0}, {"name": "blend", "lam": 1.0}):
        with pytest.raises(ValueError):
            kernel_law(**bad)


def test_transition_is_the_normalised_density_ratio(small: Universe) -> None:
    """M(x, y) = r(x, y) / Σ_{y' ≠ x} r(x, y'), r = exp((1 − λ)κ s)·(1 − s)^(−λβ), by a loop."""
    m = small.transition()
    s = small.cosines()
    law = small.kernel
    for x in range(small.size):
        r = [
            0.0
            if y == x
            else math.exp((1 - law.lam) * float(s[x, y]) / law.tau) * (1 - float(s[x, y])) ** -(law.lam * law.beta)
            for y in range(small.size)
        ]
        total = sum(r)
        assert m[x].tolist() == pytest.approx([v / total for v in r], rel=1e-10)


def test_bayes_posterior_equals_the_loop_over_which_candidate_is_the_positive(small: Universe) -> None:
    """P(j | x, y_1..m) ∝ M(x, y_j) Π_{l ≠ j} q(y_l), q uniform over the items other than x: computed directly."""
    generator = torch.Generator().manual_seed(0)
    anchors, candidates, _ = small.candidate_sets(40, 5, generator)
    got = small.bayes_log_posterior(anchors, candidates).exp()
    m = small.transition()
    q = 1.0 / (small.size - 1)
    for i in range(40):
        x, ys = int(anchors[i]), candidates[i].tolist()
        joint = [float(m[x, ys[j]]) * q ** (len(ys) - 1) for j in range(len(ys))]
        total = sum(joint)
        assert got[i].tolist() == pytest.approx([v / total for v in joint], rel=1e-9)


def test_pairs_follow_the_kernel_and_negatives_are_uniform_over_the_others(small: Universe) -> None:
    generator = torch.Generator().manual_seed(3)
    anchors, positives = small.sample_pairs(200_000, generator)
    assert not bool((anchors == positives).any())
    m = small.transition()
    for x in range(small.size):
        picked = positives[anchors == x]
        freq = torch.bincount(picked, minlength=small.size).double() / picked.numel()
        se = (m[x] * (1 - m[x]) / picked.numel()).sqrt()
        assert bool(((freq - m[x]).abs() <= 5 * se + 1e-12).all()), x
    negatives = small.sample_negatives(anchors[:50_000], 4, generator)
    assert not bool((negatives == anchors[:50_000, None]).any())
    counts = torch.bincount(negatives[anchors[:50_000] == 0].reshape(-1), minlength=small.size).double()
    assert counts[0] == 0
    share = counts[1:] / counts[1:].sum()
    assert bool(((share - 1 / 6).abs() < 0.01).all())


def test_candidate_sets_hold_the_positive_at_its_position(small: Universe) -> None:
    a = small.candidate_sets(500, 6, torch.Generator().manual_seed(9))
    b = small.candidate_sets(500, 6, torch.Generator().manual_seed(9))
    anchors, candidates, where = a
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))  # seeded
    assert candidates.shape == (500, 6) and int(where.min()) == 0 and int(where.max()) == 5
    assert not bool((candidates == anchors[:, None]).any())  # neither positive nor negatives is the anchor
    # The positive (at `where`) follows M: its mean latent cosine is above the negatives'.
    s = small.cosines()[anchors[:, None], candidates]
    pos = s[torch.arange(500), where]
    assert float(pos.mean()) > float(s.mean()) + 0.05


def test_universe_checks_its_vectors() -> None:
    with pytest.raises(ValueError, match="unit rows"):
        Universe(torch.ones(5, 3, dtype=torch.float64), kernel_law("vmf"))
    with pytest.raises(ValueError, match=">= 3 items"):
        Universe(unit_vectors(2, 3, torch.Generator().manual_seed(0)), kernel_law("vmf"))
