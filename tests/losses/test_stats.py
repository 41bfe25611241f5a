"""Closed-form checks of the pure statistics, and property-based invariants of λ."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.losses.stats import (
    burn_size,
    hill_beta,
    mixing_weight,
    quantile_by_index,
    tail_shortfalls,
    tail_size,
    weibull_gumbel_fits,
)
from tests.losses.reference import reference_weince


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, 1), (5, 5), (9, 9), (20, 20), (63, 32), (320, 32), (330, 33), (1023, 102), (2046, 205)],
)
def test_tail_size(k: int, expected: int) -> None:
    assert tail_size(k, 32, 0.10) == expected


def test_burn_size() -> None:
    assert [burn_size(k) for k in (3, 19, 20, 39, 40, 102)] == [1, 1, 1, 1, 2, 5]


def test_tail_shortfalls_order_and_floor() -> None:
    s = torch.tensor([[0.1, 0.9, float("-inf"), 1.0, -1.0]])
    d = tail_shortfalls(s, 3, 1e-6)
    torch.testing.assert_close(d, torch.tensor([[1e-6, 0.1, 0.9]]))


def test_weibull_fit_recovers_exact_power_law() -> None:
    # δ_k placed exactly on F = c·δ^β: the Weibull line is exact, slope β, and the Gumbel proxy loses.
    k_tail, beta, c = 40, 3.0, 2.0
    levels = torch.arange(1, k_tail + 1, dtype=torch.float64) / (k_tail + 1)
    delta = (levels / c) ** (1 / beta)
    b, g, d_aic = weibull_gumbel_fits(delta[None], burn_size(k_tail))
    assert float(b[0]) == pytest.approx(beta, rel=1e-10)
    assert float(g[0]) < 0
    n = k_tail - burn_size(k_tail)
    assert float(d_aic[0]) > n * math.log(1e-3 / 1e-12)  # SSE_W at its floor, SSE_G clearly not


def _unpenalised_fits(delta: np.ndarray, burn: int) -> tuple[float, float, float, float]:
    """β̂, γ̂, SSE_W, SSE_G of ``docs/algorithm.md`` §3b by ``np.polyfit``, without the wrong-sign penalty."""
    k_tail = delta.shape[0]
    levels = np.arange(1, k_tail + 1)[burn:] / (k_tail + 1)
    x = np.log(delta[burn:])
    out = []
    for y in (np.log(levels), np.log(-np.log(levels))):
        slope, intercept = np.polyfit(x, y, 1)
        out.append((float(slope), float(np.sum((y - intercept - slope * x) ** 2))))
    (beta, sse_w), (gamma, sse_g) = out
    return beta, gamma, sse_w, sse_g


def _dip(k_tail: int, lo: int, hi: int) -> np.ndarray:
    """Shortfalls 0.4 with a dip to 0.1 at positions lo..hi-1: the Weibull slope is negative, the Gumbel
    slope stays negative, and unpenalised the Weibull line fits better (ΔAIC ≈ +18)."""
    delta = np.full(k_tail, 0.4)
    delta[lo:hi] = 0.1
    return delta


def _hump(k_tail: int, lo: int, hi: int) -> np.ndarray:
    """Shortfalls 0.1 with a hump to 0.4 at positions lo..hi-1: the Gumbel slope turns positive, the
    Weibull slope stays positive."""
    delta = np.full(k_tail, 0.1)
    delta[lo:hi] = 0.4
    return delta


WRONG_SIGN_CASES = {
    # name: (shortfalls of one anchor (not a sorted tail: only such a tail has wrong-signed fits),
    #        Weibull slope wrong, Gumbel slope wrong)
    "weibull_wrong": (_dip(20, 5, 16), True, False),
    "gumbel_wrong": (_hump(20, 4, 16), False, True),
    "both_wrong": (np.linspace(1.0, 0.1, 30), True, True),
}


@pytest.mark.parametrize("case", list(WRONG_SIGN_CASES))
def test_wrong_signed_fits_are_penalised(case: str) -> None:
    """Pins the wrong-sign penalty of ``docs/algorithm.md`` §3b: a Weibull fit with β̂ ≤ 0 gets 1e6 added to SSE_W and a
    Gumbel fit with γ̂ ≥ 0 gets 1e6 added to SSE_G, so ``ΔAIC = n·(log SSE_G' − log SSE_W')``.

    The unpenalised fits come from ``np.polyfit``. Each case is chosen so that the penalty moves ΔAIC by
    more than 10: in "weibull_wrong" it flips ΔAIC from about +18 to about −206, and in every case λ (at
    the hardness gate's midpoint, with m halfway between the penalised and the unpenalised ΔAIC) moves by
    more than 0.4. Without the penalty the test fails.
    """
    delta_np, w_wrong, g_wrong = WRONG_SIGN_CASES[case]
    burn = burn_size(delta_np.shape[0])
    n = delta_np.shape[0] - burn
    beta_raw, gamma_raw, sse_w, sse_g = _unpenalised_fits(delta_np, burn)
    assert (beta_raw <= 0) == w_wrong and (gamma_raw >= 0) == g_wrong
    raw = n * (math.log(sse_g) - math.log(sse_w))
    expected = n * (math.log(sse_g + 1e6 * g_wrong) - math.log(sse_w + 1e6 * w_wrong))
    assert abs(expected - raw) > 10, "the case would not show the penalty"

    b, g, d_aic = weibull_gumbel_fits(torch.from_numpy(delta_np)[None], burn)
    assert float(b[0]) == pytest.approx(beta_raw, rel=1e-9)
    assert float(g[0]) == pytest.approx(gamma_raw, rel=1e-9)
    assert float(d_aic[0]) == pytest.approx(expected, rel=1e-6, abs=1e-6), f"unpenalised ΔAIC would be {raw:.4g}"
    if case == "weibull_wrong":
        assert raw > 2 and float(d_aic[0]) < -2, "the penalty must flip the sign of ΔAIC"

    margin = (raw + expected) / 2
    rho = torch.tensor([0.3], dtype=torch.float64)
    lam = float(mixing_weight(rho, rho[0], d_aic, 10.0, 1.0, margin)[0])
    lam_unpenalised = 0.5 / (1 + math.exp(-(raw - margin)))
    assert lam == pytest.approx(0.5 / (1 + math.exp(-(expected - margin))), rel=1e-6, abs=1e-9)
    assert abs(lam - lam_unpenalised) > 0.4, (lam, lam_unpenalised)


@pytest.mark.parametrize(
    "b",
    [
        32,  # k_tail = 31, n = 30
        64,  # k_tail = 32, n = 31: the default tail (its float64 mean of ties is 1 ulp off)
    ],
)
def test_all_tied_tail_has_no_shape_evidence(b: int) -> None:
    """Pins the penalty where it acts inside the loss: an anchor whose negatives are all masked has a tail
    of ties (δ = 2 for every point); the fitted slopes are 0 (x is constant), so both fits are penalised
    and ΔAIC = n·log((SSE_G + 1e6)/(SSE_W + 1e6)) ≈ 0 instead of n·log(SSE_G/SSE_W) ≈ +25. With q = 1
    (ρ_0 = max ρ = 2) the anchor's hardness gate is 1/2, so λ = σ(−m)/2 ≈ 0.06 instead of about 1/2.
    """
    g = torch.Generator().manual_seed(0)
    a = torch.randn(b, 16, generator=g)
    p = a + 0.5 * torch.randn(b, 16, generator=g)
    mask = torch.zeros(b, b, dtype=torch.bool)
    mask[0] = True  # every negative of anchor 0 (the positive itself is never masked)
    loss_fn = WeinceLoss(q=1.0)
    assert torch.isfinite(loss_fn(a, p, negative_mask=mask))
    st_ = loss_fn.last_statistics
    k_tail = tail_size(b - 1, 32, 0.10)
    burn = burn_size(k_tail)
    n = k_tail - burn
    levels = np.arange(1, k_tail + 1)[burn:] / (k_tail + 1)
    tss_w = float(np.sum((np.log(levels) - np.log(levels).mean()) ** 2))
    y_g = np.log(-np.log(levels))
    tss_g = float(np.sum((y_g - y_g.mean()) ** 2))
    assert n * math.log(tss_g / tss_w) > 20  # what ΔAIC would be without the penalty
    expected = n * math.log((tss_g + 1e6) / (tss_w + 1e6))
    assert float(st_.rho[0]) == 2.0 and float(st_.rho0) == 2.0
    assert float(st_.beta_ols[0]) == 0.0, "the slope of a constant x must be 0"
    assert float(st_.delta_aic[0]) == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert float(st_.lam[0]) == pytest.approx(0.5 / (1 + math.exp(-(expected - 2.0))), rel=1e-5)


def test_hill_hand_example_and_ties() -> None:
    d = torch.tensor([[1.0, 2.0, 4.0], [0.5, 0.5, 0.5]], dtype=torch.float64)
    out = hill_beta(d)
    assert float(out[0]) == pytest.approx(2 / (3 * math.log(2)))
    assert math.isinf(float(out[1]))


def test_hill_recovers_index_on_sample() -> None:
    gen = np.random.default_rng(0)
    beta = 2.5
    sample = np.sort(gen.uniform(size=200_000) ** (1 / beta))[:2001]  # P(δ ≤ x) = x^β
    est = float(hill_beta(torch.from_numpy(sample)[None])[0])
    assert est == pytest.approx(beta, rel=0.08)


def test_mixing_weight_closed_form() -> None:
    lam = mixing_weight(torch.tensor([0.1, 0.2]), torch.tensor(0.2), torch.tensor([4.0, 2.0]), 10.0, 1.0, 2.0)
    expected0 = 1 / (1 + math.exp(-10 * math.log(2))) * 1 / (1 + math.exp(-2))
    assert float(lam[0]) == pytest.approx(expected0, rel=1e-6)
    assert float(lam[1]) == pytest.approx(0.25, rel=1e-6)


def test_quantile_by_index() -> None:
    v = torch.tensor([5.0, 1.0, 3.0, 2.0, 4.0])
    assert float(quantile_by_index(v, 0.2)) == 2.0  # round(0.2·4) = 1 -> second smallest
    assert float(quantile_by_index(v, 0.0)) == 1.0
    assert float(quantile_by_index(v, 1.0)) == 5.0


embeddings = st.integers(min_value=2, max_value=40).flatmap(
    lambda b: st.tuples(
        st.just(b), st.integers(0, 10_000), st.floats(0.0, 2.0), st.sampled_from(["unit", "ols", "hill"])
    )
)


@settings(max_examples=40, deadline=None)
@given(embeddings, st.sampled_from(["simcse", "ntxent"]))
def test_lambda_in_unit_interval_and_loss_finite(case, layout: str) -> None:
    b, seed, noise, mode = case
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 6, generator=g)
    p = a + noise * torch.randn(b, 6, generator=g)
    loss_fn = WeinceLoss(layout=layout, beta_mode=mode, min_tail_points=10)
    value = loss_fn(a, p)
    lam = loss_fn.last_statistics.lam
    assert torch.isfinite(value)
    assert bool(((lam >= 0) & (lam <= 1)).all())
    lo, hi = loss_fn.beta_clamp
    beta = loss_fn.last_statistics.beta
    assert bool(((beta >= lo) & (beta <= hi)).all())


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=12, max_value=48), st.integers(0, 10_000), st.sampled_from(["unit", "ols", "hill"]))
def test_permuting_the_batch_permutes_lambda(b: int, seed: int, mode: str) -> None:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 8, generator=g)
    p = a + 0.7 * torch.randn(b, 8, generator=g)
    perm = torch.randperm(b, generator=g)
    f1, f2 = WeinceLoss(beta_mode=mode, min_tail_points=10), WeinceLoss(beta_mode=mode, min_tail_points=10)
    v1, v2 = f1(a, p), f2(a[perm], p[perm])
    torch.testing.assert_close(f2.last_statistics.lam, f1.last_statistics.lam[perm], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(v1, v2, rtol=1e-5, atol=1e-6)


def _keep_two_negatives(mask: torch.Tensor) -> torch.Tensor:
    """Unmask candidates i+1 and i+2 (mod C) of every row i: each anchor keeps at least 2 valid negatives.

    Otherwise a tail can consist only of masked entries (all δ = 2), where the OLS slope is undefined and
    the reference's ``np.polyfit`` and the vectorised fit legitimately disagree (the package defines it as
    0, so both fits are penalised; that case is pinned by :func:`test_all_tied_tail_has_no_shape_evidence`).
    For b ≥ 3 neither column is the anchor itself nor its positive.
    """
    rows = torch.arange(mask.shape[0])
    mask = mask.clone()
    mask[rows, (rows + 1) % mask.shape[1]] = False
    mask[rows, (rows + 2) % mask.shape[1]] = False
    return mask


knobs = st.fixed_dictionaries(
    {
        "temperature": st.sampled_from([0.05, 0.5]),
        "beta_mode": st.sampled_from(["unit", "ols", "hill"]),
        "min_tail_points": st.sampled_from([1, 10, 32]),
        "tail_frac": st.sampled_from([0.1, 0.5, 1.0]),
        "q": st.sampled_from([0.0, 0.2, 0.5, 1.0]),
        "kappa_rho": st.sampled_from([0.5, 3.0, 10.0, 25.0]),
        "kappa_aic": st.sampled_from([0.05, 0.3, 1.0, 4.0]),
        "margin": st.sampled_from([-5.0, 2.0, 20.0]),
    }
)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=3, max_value=20),
    st.integers(min_value=6, max_value=10),
    st.integers(0, 10_000),
    st.floats(0.1, 2.0),
    st.sampled_from(["simcse", "ntxent"]),
    st.booleans(),
    knobs,
)
def test_loss_and_statistics_equal_the_loop_reference(
    b: int, d: int, seed: int, noise: float, layout: str, masked: bool, kwargs: dict
) -> None:
    """Pins the values, not just the ranges: on random small batches, with random knobs (tail size, q, gate
    slopes, margin, β mode, τ) and random masks, ρ, β, λ, ΔAIC and the loss equal the float64 NumPy loop
    reference of ``docs/algorithm.md``.

    The tolerances cover the float32 scores of the loss against the reference's float64 ones (observed
    errors on 3000 random cases: loss 2e-6 relative, λ 1e-5 absolute). The positives are kept away from
    s = 1 (noise ≥ 0.1): within eps of 1 the clamp ``1 − eps`` itself differs between float32 and float64
    by 0.1 %, which the shortfall logit amplifies by β.
    """
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, d, generator=g)
    p = a + noise * torch.randn(b, d, generator=g)
    mask = None
    if masked:
        n = b if layout == "simcse" else 2 * b
        mask = _keep_two_negatives(torch.rand(n, n, generator=g) < 0.3)
    loss_fn = WeinceLoss(layout=layout, **kwargs)
    value = loss_fn(a, p, negative_mask=mask)
    ref = reference_weince(
        a.numpy(), p.numpy(), layout=layout, negative_mask=None if mask is None else mask.numpy(), **kwargs
    )
    st_ = loss_fn.last_statistics
    np.testing.assert_allclose(st_.rho.numpy(), ref["rho"], rtol=1e-4, err_msg="rho")
    assert float(st_.rho0) == pytest.approx(ref["rho0"], rel=1e-4)
    np.testing.assert_allclose(st_.delta_aic.numpy(), ref["delta_aic"], rtol=1e-3, atol=0.5, err_msg="delta_aic")
    np.testing.assert_allclose(st_.beta.numpy(), ref["beta"], rtol=1e-4, err_msg="beta")
    np.testing.assert_allclose(st_.lam.numpy(), ref["lam"], rtol=0, atol=2e-4, err_msg="lambda")
    assert value.item() == pytest.approx(ref["loss"], rel=1e-4, abs=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=12, max_value=40),
    st.integers(0, 10_000),
    st.sampled_from(["simcse", "ntxent"]),
    st.sampled_from(["unit", "ols", "hill"]),
)
def test_rotation_and_row_scaling_leave_loss_and_lambda_unchanged(b: int, seed: int, layout: str, mode: str) -> None:
    """Pins that everything is a function of the cosines s_ij: a common rotation of all embeddings and an
    independent positive rescaling of every row (factors 1e-2 … 1e2) leave λ, β and the loss unchanged (to
    float32 round-off)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 8, generator=g)
    p = a + 0.7 * torch.randn(b, 8, generator=g)
    rot, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    rot = rot.float()
    scale_a = 10.0 ** (4 * torch.rand(b, 1, generator=g) - 2)
    scale_p = 10.0 ** (4 * torch.rand(b, 1, generator=g) - 2)
    f1 = WeinceLoss(layout=layout, beta_mode=mode, min_tail_points=10)
    f2 = WeinceLoss(layout=layout, beta_mode=mode, min_tail_points=10)
    v1 = f1(a, p)
    v2 = f2((a @ rot.T) * scale_a, (p @ rot.T) * scale_p)
    torch.testing.assert_close(v2, v1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(f2.last_statistics.lam, f1.last_statistics.lam, rtol=0, atol=1e-4)
    torch.testing.assert_close(f2.last_statistics.beta, f1.last_statistics.beta, rtol=1e-4, atol=0)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=2, max_value=40),
    st.integers(0, 10_000),
    st.floats(0.0, 2.0),
    st.integers(min_value=0, max_value=3),
    st.sampled_from(["simcse", "ntxent"]),
    st.sampled_from(["unit", "ols", "hill"]),
    st.booleans(),
)
def test_fixed_lambda_zero_is_infonce_exactly(
    b: int, seed: int, noise: float, duplicates: int, layout: str, mode: str, masked: bool
) -> None:
    """Pins "λ ≡ 0 is exactly InfoNCE" (``docs/algorithm.md`` §2): with ``fixed_lambda=0`` the loss and both
    gradients equal :class:`InfoNCELoss` bit for bit, whatever the β mode, also with exact duplicates (s = 1, where the
    shortfall logit is only finite thanks to the clamp) and with a negative mask."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 6, generator=g)
    a[b - min(duplicates, b - 1) :] = a[0]  # exact duplicate rows of row 0
    p = a + noise * torch.randn(b, 6, generator=g)
    mask = None
    if masked:
        n = b if layout == "simcse" else 2 * b
        mask = torch.rand(n, n, generator=g) < 0.3
    a1, p1 = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    a2, p2 = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    w = WeinceLoss(layout=layout, beta_mode=mode, fixed_lambda=0.0, min_tail_points=10)(a1, p1, negative_mask=mask)
    i = InfoNCELoss(layout=layout)(a2, p2, negative_mask=mask)
    w.backward()
    i.backward()
    assert torch.equal(w, i), (w.item(), i.item())
    assert torch.equal(a1.grad, a2.grad)
    assert torch.equal(p1.grad, p2.grad)
