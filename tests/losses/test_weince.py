"""WEINCE against closed forms, cross-entropy, and the per-anchor loop reference of ``docs/algorithm.md``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import expit

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from tests.losses.reference import reference_weince


def _pair(b: int, d: int, noise: float = 0.5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, d, generator=g)
    return a, a + noise * torch.randn(b, d, generator=g)


def _ntxent_reference_logits(a: torch.Tensor, p: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    z = F.normalize(torch.cat([a, p]).float(), dim=-1)
    n = a.shape[0]
    logits = (z @ z.T) / tau
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return logits, target


@pytest.mark.parametrize("beta_mode", ["unit", "ols", "hill"])
def test_lambda_zero_is_cross_entropy_simcse(beta_mode: str) -> None:
    a, p = _pair(48, 16)
    loss = WeinceLoss(temperature=0.05, beta_mode=beta_mode, fixed_lambda=0.0)(a, p)
    s = F.normalize(a, dim=-1) @ F.normalize(p, dim=-1).T
    expected = F.cross_entropy(s / 0.05, torch.arange(48))
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(InfoNCELoss(0.05)(a, p), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("beta_mode", ["unit", "ols", "hill"])
def test_lambda_zero_is_cross_entropy_ntxent(beta_mode: str) -> None:
    a, p = _pair(40, 16)
    loss = WeinceLoss(temperature=0.5, layout="ntxent", beta_mode=beta_mode, fixed_lambda=0.0)(a, p)
    logits, target = _ntxent_reference_logits(a, p, 0.5)
    expected = F.cross_entropy(logits, target)
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(InfoNCELoss(0.5, layout="ntxent")(a, p), expected, rtol=0, atol=1e-6)


def test_infonce_closed_forms() -> None:
    # All embeddings identical: every logit equals 1/τ, the loss is log(#candidates).
    x = torch.ones(8, 4)
    assert InfoNCELoss(0.1)(x, x).item() == pytest.approx(np.log(8), abs=1e-5)
    assert InfoNCELoss(0.1, layout="ntxent")(x, x).item() == pytest.approx(np.log(15), abs=1e-5)
    # Orthonormal embeddings, anchor = positive: s_ii = 1, s_ij = 0.
    e = torch.eye(6)
    tau = 0.2
    closed = -1 / tau + np.log(np.exp(1 / tau) + 5)
    assert InfoNCELoss(tau)(e, e).item() == pytest.approx(closed, rel=1e-6)


@pytest.mark.parametrize("layout", ["simcse", "ntxent"])
@pytest.mark.parametrize("beta_mode", ["unit", "ols", "hill"])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_loop_reference(layout: str, beta_mode: str, masked: bool) -> None:
    b, tau = 50, 0.1
    a, p = _pair(b, 12, noise=0.8, seed=3)
    kwargs = {"min_tail_points": 12, "tail_frac": 0.2, "beta_mode": beta_mode, "temperature": tau}
    mask = None
    if masked:
        rows = b if layout == "simcse" else 2 * b
        mask = torch.rand(rows, b if layout == "simcse" else 2 * b, generator=torch.Generator().manual_seed(1)) < 0.3
    loss_fn = WeinceLoss(layout=layout, **kwargs)
    value = loss_fn(a, p, negative_mask=mask)
    ref = reference_weince(
        a.numpy(), p.numpy(), layout=layout, negative_mask=None if mask is None else mask.numpy(), **kwargs
    )
    st = loss_fn.last_statistics
    assert st is not None
    close = {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(st.rho.numpy(), ref["rho"], **close)
    np.testing.assert_allclose(st.delta_aic.numpy(), ref["delta_aic"], **close)
    np.testing.assert_allclose(st.beta_ols.numpy(), ref["beta_ols"], **close)
    np.testing.assert_allclose(st.beta.numpy(), ref["beta"], **close)
    np.testing.assert_allclose(st.lam.numpy(), ref["lam"], **close)
    assert float(st.rho0) == pytest.approx(ref["rho0"], rel=1e-5)
    assert value.item() == pytest.approx(ref["loss"], rel=1e-5, abs=1e-5)
    # The statistics must be informative for this comparison to mean anything.
    assert 0.05 < float(st.lam.mean()) < 0.95


# Gate settings of the reference comparison below. "defaults" are the loss's; the other two make the two
# gate slopes differ by two orders of magnitude (and move m, q and the tail) so that each knob is visible.
GATE_SETTINGS: dict[str, dict[str, float]] = {
    "defaults": {},
    "soft_shape_gate": {"kappa_rho": 3.0, "kappa_aic": 0.05, "margin": 60.0},
    "sharp_hardness_gate": {
        "kappa_rho": 25.0,
        "kappa_aic": 0.2,
        "margin": 20.0,
        "q": 0.5,
        "min_tail_points": 12,
        "tail_frac": 0.2,
    },
}
DEFAULT_KAPPAS = (10.0, 1.0)


def _reference_lambda(ref: dict, kappa_rho: float, kappa_aic: float, margin: float) -> np.ndarray:
    """λ of ``docs/algorithm.md`` §3d recomputed from the reference's ρ, ρ_0 and ΔAIC with the given gate slopes."""
    hard = expit(kappa_rho * (np.log(ref["rho0"]) - np.log(ref["rho"])))
    shape = expit(kappa_aic * (ref["delta_aic"] - margin))
    return hard * shape


def _intermediate(x: np.ndarray, lo: float = 0.1, hi: float = 0.9) -> float:
    return float(np.mean((x > lo) & (x < hi)))


@pytest.mark.parametrize("setting", list(GATE_SETTINGS))
@pytest.mark.parametrize(
    ("layout", "b", "d", "seed", "beta_mode"),
    [("simcse", 64, 16, 0, "ols"), ("simcse", 64, 8, 1, "hill"), ("ntxent", 40, 8, 2, "unit")],
)
def test_matches_loop_reference_gate_settings(
    setting: str, layout: str, b: int, d: int, seed: int, beta_mode: str
) -> None:
    """Pins λ_i = σ(κ_ρ(log ρ_0 − log ρ_i))·σ(κ_aic(ΔAIC_i − m)) with each knob in its own place.

    Several data sets, the default tail and gates, and gate slopes κ_ρ and κ_aic far apart. The test first
    checks on the reference's own statistics that the data can tell the knobs apart: λ is intermediate for
    many anchors, and swapping κ_ρ and κ_aic, replacing either by 1, or ignoring the configured values
    (the defaults 10 and 1) each moves some λ_i by more than 0.1. Then λ, β, ρ, ΔAIC and the loss must
    equal the reference.
    """
    cfg = GATE_SETTINGS[setting]
    kappa_rho = cfg.get("kappa_rho", DEFAULT_KAPPAS[0])
    kappa_aic = cfg.get("kappa_aic", DEFAULT_KAPPAS[1])
    margin = cfg.get("margin", 2.0)
    kwargs = {"temperature": 0.1, "beta_mode": beta_mode, **cfg}
    a, p = _pair(b, d, noise=0.5 if layout == "simcse" else 0.8, seed=seed)
    ref = reference_weince(a.numpy(), p.numpy(), layout=layout, **kwargs)

    # Non-vacuity, on the reference alone.
    np.testing.assert_allclose(_reference_lambda(ref, kappa_rho, kappa_aic, margin), ref["lam"], rtol=1e-12)
    assert _intermediate(ref["lam"], 0.05, 0.95) >= 0.1, "λ is saturated: the comparison would be vacuous"
    hard = expit(kappa_rho * (np.log(ref["rho0"]) - np.log(ref["rho"])))
    assert _intermediate(hard) >= 0.1, "the hardness gate is saturated for almost every anchor"
    if setting != "defaults":  # at the defaults the shape gate is ~1 (ΔAIC ≫ m): κ_aic = 1 is invisible there
        shape = expit(kappa_aic * (ref["delta_aic"] - margin))
        assert _intermediate(shape) >= 0.1, "the shape gate is saturated for almost every anchor"
    wrong = {(kappa_aic, kappa_rho), (kappa_rho, 1.0), (1.0, kappa_aic), DEFAULT_KAPPAS} - {(kappa_rho, kappa_aic)}
    for kr, ka in wrong:
        moved = np.abs(_reference_lambda(ref, kr, ka, margin) - ref["lam"]).max()
        assert moved > 0.1, f"κ_ρ={kr}, κ_aic={ka} would give nearly the same λ (max change {moved:.3g})"

    loss_fn = WeinceLoss(layout=layout, **kwargs)
    value = loss_fn(a, p)
    st = loss_fn.last_statistics
    assert st is not None
    close = {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(st.rho.numpy(), ref["rho"], **close, err_msg="rho")
    assert float(st.rho0) == pytest.approx(ref["rho0"], rel=1e-5)
    np.testing.assert_allclose(st.delta_aic.numpy(), ref["delta_aic"], **close, err_msg="delta_aic")
    np.testing.assert_allclose(st.beta.numpy(), ref["beta"], **close, err_msg="beta")
    np.testing.assert_allclose(st.lam.numpy(), ref["lam"], **close, err_msg="lambda")
    assert value.item() == pytest.approx(ref["loss"], rel=1e-5, abs=1e-5)


def test_reference_with_heavy_mask_uses_minus_one() -> None:
    # Mask all but 3 negatives of every anchor: the tail must be filled with s = -1 (δ = 2).
    b = 30
    a, p = _pair(b, 8, seed=5)
    mask = torch.ones(b, b, dtype=torch.bool)
    mask[:, :4] = False
    loss_fn = WeinceLoss(min_tail_points=10, beta_mode="hill")
    value = loss_fn(a, p, negative_mask=mask)
    ref = reference_weince(a.numpy(), p.numpy(), negative_mask=mask.numpy(), min_tail_points=10, beta_mode="hill")
    assert value.item() == pytest.approx(ref["loss"], rel=1e-5)
    np.testing.assert_allclose(loss_fn.last_statistics.lam.numpy(), ref["lam"], rtol=1e-5, atol=1e-6)


def _hand_weince_loss(
    a: torch.Tensor,
    p: torch.Tensor,
    lam: torch.Tensor,
    beta: torch.Tensor,
    *,
    layout: str,
    temperature: float,
    eps: float = 1e-6,
) -> torch.Tensor:
    """The loss of ``docs/algorithm.md`` §2 written out in plain torch, with λ and β given as (A,) constants.

    ``ℓ = (1 − λ)·s/τ + λ·(−β·log(1 − min(s, 1 − eps)))`` and the cross-entropy as ``logsumexp − ℓ_pos``;
    nothing from the package is used, so autograd of this is the gradient with λ and β held fixed.
    """
    an = a / a.norm(dim=1, keepdim=True)
    pn = p / p.norm(dim=1, keepdim=True)
    b = a.shape[0]
    if layout == "simcse":
        s = an @ pn.T
        target = torch.arange(b)
        own = torch.zeros(b, b, dtype=torch.bool)
    else:
        z = torch.cat([an, pn])
        s = z @ z.T
        target = torch.cat([torch.arange(b, 2 * b), torch.arange(b)])
        own = torch.eye(2 * b, dtype=torch.bool)
    lam_c, beta_c = lam[:, None], beta[:, None]
    logits = (1 - lam_c) * s / temperature + lam_c * (-beta_c * torch.log1p(-torch.clamp(s, max=1 - eps)))
    logits = logits.masked_fill(own, float("-inf"))
    rows = torch.arange(s.shape[0])
    return (torch.logsumexp(logits, dim=1) - logits[rows, target]).mean()


@pytest.mark.parametrize(
    ("layout", "beta_mode", "gates"),
    [
        ("simcse", "ols", {}),
        ("simcse", "hill", {"kappa_rho": 3.0, "kappa_aic": 0.05, "margin": 60.0}),
        ("ntxent", "ols", {"kappa_rho": 3.0, "kappa_aic": 0.05, "margin": 60.0}),
    ],
)
def test_no_gradient_through_lambda_and_beta(layout: str, beta_mode: str, gates: dict) -> None:
    """Pins the paper's stop-gradient: the gradient w.r.t. the embeddings is that of the blended logits with
    λ_i and β_i held constant.

    λ and β come from the NumPy loop reference (not from the loss), the logits and the cross-entropy are
    built by hand in :func:`_hand_weince_loss`; the data make λ intermediate and β unclamped for many
    anchors, so a λ or β that carried gradient would change the result.
    """
    b = 48 if layout == "simcse" else 32
    a, p = _pair(b, 16, noise=0.3)
    kwargs = {"temperature": 0.1, "beta_mode": beta_mode, **gates}
    ref = reference_weince(a.numpy(), p.numpy(), layout=layout, **kwargs)
    lam = torch.tensor(ref["lam"], dtype=torch.float32)
    beta = torch.tensor(ref["beta"], dtype=torch.float32)
    # Informative data: a gradient through λ or β would not vanish.
    assert float(((lam > 0.05) & (lam < 0.95)).float().mean()) >= 0.25, lam
    assert float(((beta > 0.5) & (beta < 16.0)).float().mean()) >= 0.5, beta

    a1, p1 = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    loss_fn = WeinceLoss(layout=layout, **kwargs)
    value = loss_fn(a1, p1)
    value.backward()
    a2, p2 = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    manual = _hand_weince_loss(a2, p2, lam, beta, layout=layout, temperature=0.1)
    manual.backward()
    torch.testing.assert_close(value.detach(), manual.detach(), rtol=1e-5, atol=1e-6)
    close = {"rtol": 1e-4, "atol": 1e-6}
    torch.testing.assert_close(
        a1.grad, a2.grad, **close, msg=lambda m: f"gradient w.r.t. the anchors is not the constant-λ, β one: {m}"
    )
    torch.testing.assert_close(
        p1.grad, p2.grad, **close, msg=lambda m: f"gradient w.r.t. the positives is not the constant-λ, β one: {m}"
    )
    st = loss_fn.last_statistics
    for name in ("lam", "beta", "rho", "delta_aic", "rho0"):
        t = getattr(st, name)
        assert not t.requires_grad and t.grad_fn is None, name
    # ... and it differs from the InfoNCE gradient (λ is not zero here), so the check can fail.
    a3 = a.clone().requires_grad_(True)
    InfoNCELoss(0.1, layout=layout)(a3, p).backward()
    assert not torch.allclose(a3.grad, a1.grad, rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("layout", ["simcse", "ntxent"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_finite_with_exact_duplicates(layout: str, dtype: torch.dtype) -> None:
    base = torch.randn(16, 8)
    a = torch.cat([base, base[:4]]).to(dtype)  # duplicate rows, and positives identical: s = 1 exactly
    a.requires_grad_(True)
    p = a.detach().clone().requires_grad_(True)
    loss_fn = WeinceLoss(layout=layout, beta_mode="hill", min_tail_points=10)
    value = loss_fn(a, p)
    value.backward()
    assert value.dtype == torch.float32
    assert torch.isfinite(value)
    assert torch.isfinite(a.grad.float()).all() and torch.isfinite(p.grad.float()).all()
    assert a.grad.dtype == dtype


@pytest.mark.parametrize("layout", ["simcse", "ntxent"])
def test_batch_of_two_falls_back_to_infonce(layout: str) -> None:
    a, p = _pair(2, 8)
    a.requires_grad_(True)
    loss_fn = WeinceLoss(layout=layout)
    value = loss_fn(a, p)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(a.grad).all()
    assert float(loss_fn.last_statistics.lam.abs().max()) == 0.0
    assert value.item() == pytest.approx(InfoNCELoss(layout=layout)(a, p).item(), abs=1e-6)


def test_batch_of_one_raises() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        WeinceLoss()(torch.randn(1, 4), torch.randn(1, 4))
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        WeinceLoss()(torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="negative_mask"):
        WeinceLoss()(torch.randn(3, 4), torch.randn(3, 4), negative_mask=torch.zeros(3, 2, dtype=torch.bool))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"beta_mode": "mle"}, "beta_mode"),
        ({"beta_clamp": (2.0, 1.0)}, "beta_clamp"),
        ({"beta_clamp": (0.0, 1.0)}, "beta_clamp"),
        ({"min_tail_points": 0}, "min_tail_points"),
        ({"tail_frac": 1.5}, "tail_frac"),
        ({"burn": -1}, "burn"),
        ({"q": 1.2}, "q must"),
        ({"kappa_rho": -1.0}, "kappa_rho"),
        ({"kappa_aic": 0.0}, "kappa_aic"),
        ({"eps": 0.0}, "eps"),
        ({"fixed_lambda": 2.0}, "fixed_lambda"),
        ({"layout": "nce"}, "layout"),
    ],
)
def test_constructor_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WeinceLoss(**kwargs)


def test_layouts_agree_where_they_should() -> None:
    """Relation tested: NT-Xent with the same-view block masked equals symmetric SimCSE.

    If every anchor-anchor and positive-positive pair is removed from the NT-Xent negatives, an anchor row
    of NT-Xent is exactly the SimCSE row of (anchors, positives) and a positive row is the SimCSE row of
    (positives, anchors). So ``NTXent(a, p, same-view masked) = (SimCSE(a, p) + SimCSE(p, a)) / 2``, for
    InfoNCE and for WEINCE at any fixed λ with unit β (the logits are the same elementwise function).
    The hardness ρ of each row also agrees (masked negatives count as s = −1 and never win).
    """
    n = 24
    a, p = _pair(n, 10, seed=7)
    same_view = torch.zeros(2 * n, 2 * n, dtype=torch.bool)
    same_view[:n, :n] = True
    same_view[n:, n:] = True
    for make in (
        lambda lay: InfoNCELoss(0.1, layout=lay),
        lambda lay: WeinceLoss(0.1, layout=lay, beta_mode="unit", fixed_lambda=0.4),
    ):
        nt = make("ntxent")(a, p, negative_mask=same_view)
        sym = 0.5 * (make("simcse")(a, p) + make("simcse")(p, a))
        torch.testing.assert_close(nt, sym, rtol=1e-6, atol=1e-6)
    nt_loss, fwd, bwd = WeinceLoss(layout="ntxent"), WeinceLoss(), WeinceLoss()
    nt_loss(a, p, negative_mask=same_view)
    fwd(a, p)
    bwd(p, a)
    torch.testing.assert_close(
        nt_loss.last_statistics.rho, torch.cat([fwd.last_statistics.rho, bwd.last_statistics.rho])
    )


def test_diagnostics_are_tensors_and_consistent() -> None:
    a, p = _pair(64, 16, noise=0.4)
    loss_fn = WeinceLoss()
    loss_fn(a, p)
    d = loss_fn.last_diagnostics
    lam = loss_fn.last_statistics.lam
    assert all(isinstance(v, torch.Tensor) and v.ndim == 0 for v in d.values())
    assert float(d["lambda_mean"]) == pytest.approx(float(lam.mean()))
    assert float(d["lambda_frac_gt_half"]) == pytest.approx(float((lam > 0.5).float().mean()))
    assert float(d["lambda_q10"]) <= float(d["lambda_median"]) <= float(d["lambda_q90"])


def test_config_dict_and_citation() -> None:
    loss_fn = WeinceLoss(beta_mode="hill", q=0.3)
    cfg = loss_fn.get_config_dict()
    assert cfg["beta_mode"] == "hill" and cfg["q"] == 0.3 and cfg["temperature"] == 0.05
    assert WeinceLoss(**cfg).get_config_dict() == cfg
    assert "2606.00262" in loss_fn.citation
    assert "oord" in InfoNCELoss().citation
