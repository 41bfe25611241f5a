"""Search metrics against the truth: the KL gap, top-1, geometry and Whiteley's Proposition 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from simcse_weince.losses.infonce import InfoNCELoss
from simcse_weince.losses.stats import anchor_statistics
from simcse_weince.losses.weince import WeinceLoss
from weince_lab.simulation.learning import build_loss
from weince_lab.simulation.search import (
    first_order_constant,
    geometry,
    kl_rows,
    learned_link,
    loglog_slope,
    model_log_posterior,
    proposition_bounds,
    proposition_one,
    search_gap,
    top1_agreement,
    universe_gap,
    whole_universe_cross_entropy,
)
from weince_lab.simulation.universe import Universe, kernel_law, make_universe


def _universe(kernel: str, items: int = 48, dim: int = 4, seed: int = 0) -> Universe:
    return make_universe(items, dim, kernel_law(kernel, kappa=10.0, beta=3.0, lam=0.5), seed)


def _rotation(dim: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(dim, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


@pytest.mark.parametrize("kernel", ["vmf", "endpoint", "blend"])
def test_the_gap_is_zero_at_the_truth_with_the_true_link(kernel: str) -> None:
    """The true vectors scored by the kernel's own link (the oracle loss; InfoNCE at τ = 1/κ for vMF): KL = 0."""
    u = _universe(kernel)
    loss = build_loss("oracle", 0.3, u.kernel)
    table = u.vectors @ _rotation(4, 1)  # any rotation of the truth is the truth
    assert universe_gap(u, table, loss) == pytest.approx(0.0, abs=1e-10)
    gap = search_gap(u, table, loss, 8, 512, torch.Generator().manual_seed(0))
    assert gap.mean == pytest.approx(0.0, abs=1e-10) and gap.se == pytest.approx(0.0, abs=1e-10)
    if kernel == "vmf":
        assert universe_gap(u, table, InfoNCELoss(0.1)) == pytest.approx(0.0, abs=1e-10)


def test_the_gap_is_positive_otherwise() -> None:
    u = _universe("vmf")
    wrong_tau = universe_gap(u, u.vectors, InfoNCELoss(0.2))
    noisy = u.vectors + 0.2 * torch.randn(
        u.vectors.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    noisy = noisy / noisy.norm(dim=1, keepdim=True)
    wrong_table = universe_gap(u, noisy, InfoNCELoss(0.1))
    assert wrong_tau > 1e-3 and wrong_table > 1e-3
    assert search_gap(u, noisy, InfoNCELoss(0.1), 8, 512, torch.Generator().manual_seed(0)).mean > 1e-3
    # The endpoint kernel is no softmax at any τ: InfoNCE's floor at the true vectors is positive.
    e = _universe("endpoint")
    assert min(universe_gap(e, e.vectors, InfoNCELoss(t)) for t in (0.05, 0.1, 0.2, 0.4, 0.8)) > 1e-2


def test_kl_rows_is_zero_exactly_at_equality_and_positive_elsewhere() -> None:
    logits = torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    p = logits.log_softmax(1)
    assert torch.equal(kl_rows(p, p), torch.zeros(6, dtype=torch.float64))
    q = (logits + 0.1 * torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))).log_softmax(
        1
    )
    direct = [
        sum(math.exp(a) * (a - b) for a, b in zip(pr, qr, strict=True))
        for pr, qr in zip(p.tolist(), q.tolist(), strict=True)
    ]
    assert kl_rows(p, q).tolist() == pytest.approx(direct, rel=1e-10)
    assert bool((kl_rows(p, q) > 0).all())
    # An impossible candidate (p = 0, e.g. the anchor itself) adds nothing, even where q is also 0.
    p0 = p.clone()
    p0[:, 0] = -math.inf
    p0 = p0.log_softmax(1)
    q0 = p0.clone()
    assert torch.equal(kl_rows(p0, q0), torch.zeros(6, dtype=torch.float64))


def test_model_posterior_is_the_losses_own_law() -> None:
    scores = torch.rand(16, 40, generator=torch.Generator().manual_seed(0)) * 1.6 - 0.8
    soft = model_log_posterior(InfoNCELoss(0.1), scores)
    assert torch.allclose(soft, (scores.double() / 0.1).log_softmax(1), atol=1e-6)
    # WEINCE at λ ≡ 0 is InfoNCE; at a free λ it uses the loss's statistics over every candidate.
    assert torch.allclose(model_log_posterior(WeinceLoss(0.1, fixed_lambda=0.0), scores), soft, atol=1e-5)
    loss = WeinceLoss(0.1)
    got = model_log_posterior(loss, scores)
    assert loss.last_statistics is None  # the posterior does not run the loss's forward
    # The statistics straight from the raw scores, every one of the 40 candidates a tail candidate (no positive
    # removed: the search does not know it): ρ_i is one minus the row's largest score.
    st = anchor_statistics(scores, 40, loss.config)
    assert torch.allclose(st.rho, 1 - scores.max(dim=1).values)
    lam, beta = st.lam.double()[:, None], st.beta.double()[:, None]
    ref = ((1 - lam) * scores.double() / 0.1 - lam * beta * torch.log1p(-scores.double())).log_softmax(1)
    assert torch.allclose(got, ref, atol=1e-5)
    assert float(st.lam.max()) > 0  # the blend is on: the check above is not InfoNCE's


def test_top1_and_geometry_against_the_truth() -> None:
    u = _universe("vmf", items=60)
    rotated = u.vectors @ _rotation(4, 3)
    assert top1_agreement(u, rotated) == 1.0
    geo = geometry(u, rotated)
    assert geo["cosine_corr"] == pytest.approx(1.0, abs=1e-12) and geo["procrustes"] == pytest.approx(0.0, abs=1e-12)
    other = make_universe(60, 4, u.kernel, seed=99).vectors  # unrelated vectors
    assert top1_agreement(u, other) < 0.2
    geo = geometry(u, other)
    assert abs(geo["cosine_corr"]) < 0.2 and geo["procrustes"] > 1.0
    wider = torch.cat([rotated, torch.zeros(60, 2, dtype=torch.float64)], 1)  # a wider table, padded
    assert geometry(u, wider)["procrustes"] == pytest.approx(0.0, abs=1e-12)


def test_proposition_one_against_an_exact_enumeration_at_k_1() -> None:
    """R_1 and CE by enumerating every (x, y⁺, y⁻) of a 6-item universe; the Monte Carlo CE − R_1 within 4 SE."""
    u = make_universe(6, 3, kernel_law("vmf", kappa=3.0), seed=4)
    tau = 0.5
    s = (u.vectors @ u.vectors.T).tolist()
    m = u.transition().tolist()
    n = u.size
    risk = ce = 0.0
    for x in range(n):
        others = [y for y in range(n) if y != x]
        zbar = sum(math.exp(s[x][y] / tau) for y in others) / (n - 1)
        for yp in others:
            ce += m[x][yp] / n * (-s[x][yp] / tau + math.log(zbar))
            for yn in others:
                risk += (
                    m[x][yp]
                    / n
                    / (n - 1)
                    * (-s[x][yp] / tau + math.log(math.exp(s[x][yp] / tau) + math.exp(s[x][yn] / tau)))
                )
    assert whole_universe_cross_entropy(u, u.vectors, tau) == pytest.approx(ce, rel=1e-12)
    est = proposition_one(u, u.vectors, tau, 1, 400_000, torch.Generator().manual_seed(0))
    assert abs(est.gap - (ce - risk)) < 4 * est.se
    assert est.inside


def test_proposition_bounds_in_logs() -> None:
    lower, upper = proposition_bounds(16, 0.5)
    assert lower == pytest.approx(-math.log(1 + math.e**4 / 16)) and upper == pytest.approx((math.e**4 - 1) ** 2 / 128)
    lower, upper = proposition_bounds(1024, 0.05)  # e^{40}: finite, huge
    assert lower == pytest.approx(-(40 - math.log(1024)), rel=1e-9) and upper == pytest.approx(
        math.exp(80) / 8192, rel=1e-9
    )


def test_loglog_slope_recovers_known_rates() -> None:
    ks = np.array([4, 16, 64, 256, 1024])
    assert loglog_slope(ks, 3.0 / ks) == pytest.approx(-1.0)
    assert loglog_slope(ks, -0.7 / np.sqrt(ks)) == pytest.approx(-0.5)
    noisy = 2.0 / ks * np.exp(np.random.default_rng(0).normal(0, 0.05, ks.size))
    assert loglog_slope(ks, noisy) == pytest.approx(-1.0, abs=0.05)


def test_learned_link_reads_the_truths_coefficients_off_the_true_vectors() -> None:
    """On the true cosines, the link fit sees the kernel's own (a*, b*) (Ground truth I's identified link)."""
    u = _universe("blend", items=200, dim=6)
    fit = learned_link(u, u.vectors, 32, 8, 200, torch.Generator().manual_seed(0))
    a_star, b_star = u.kernel.coefficients
    assert fit.a_ci[0] < a_star < fit.a_ci[1] and fit.b_ci[0] < b_star < fit.b_ci[1]
    assert fit.b_ci[0] > 0  # the endpoint term is seen


def test_the_first_order_constant_is_the_limit_of_k_times_the_gap() -> None:
    """k·(CE − R_k) → C: at k = 2000 the Monte Carlo value is C within 4 SE and the O(1/k) remainder."""
    u = make_universe(20, 3, kernel_law("vmf", kappa=3.0), seed=1)
    c = first_order_constant(u, u.vectors, 0.5)
    k = 2000
    est = proposition_one(u, u.vectors, 0.5, k, 60_000, torch.Generator().manual_seed(0))
    assert abs(k * est.gap - c) < 4 * k * est.se + 0.02 * abs(c)
    # The constant from its definition by a loop over anchors, with plain exponentials.
    s = (u.vectors @ u.vectors.T).tolist()
    m = u.transition().tolist()
    total = 0.0
    for x in range(20):
        w = [math.exp(s[x][y] / 0.5) for y in range(20) if y != x]
        zbar = sum(w) / 19
        var = sum(v * v for v in w) / 19 - zbar**2
        positive = sum(m[x][y] * math.exp(s[x][y] / 0.5) for y in range(20) if y != x)
        total += var / (2 * zbar**2) - positive / zbar
    assert c == pytest.approx(total / 20, rel=1e-10)
