"""SimCSE's supervised layout (``docs/algorithm.md`` §1): anchors against the positives and hard negatives of every row,
B×(1+k)B scores, and SimCSE's ``hard_negative_weight`` on each anchor's own hard negatives.

Both losses are checked against loop references written from the papers (:mod:`tests.losses.reference`):
InfoNCE against SimCSE's supervised formula, WEINCE against the per-anchor statistics of ``docs/algorithm.md``
§3 in this layout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from simcse_weince.losses import InfoNCELoss, WeinceLoss, score_matrix
from tests.losses.reference import reference_simcse_supervised, reference_weince

B, D, TAU = 24, 12, 0.1  # k = 2 gives K = 3·24 − 1 = 71 negatives per anchor: the tail fits run


def _triplets(k: int, b: int = B, d: int = D, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Anchors, positives near them, and k columns of hard negatives (nearer than random, farther than the
    positives): (B, D), (B, D), (k, B, D)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, d, generator=g)
    p = a + 0.5 * torch.randn(b, d, generator=g)
    n = a[None] + 0.8 * torch.randn(k, b, d, generator=g)
    return a, p, n


def _random_mask(k: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(B, (1 + k) * B, generator=torch.Generator().manual_seed(seed)) < 0.2


def _hand_supervised_loss(
    a: torch.Tensor,
    p: torch.Tensor,
    n: torch.Tensor,
    lam: torch.Tensor,
    beta: torch.Tensor,
    w: float,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Spec §1/§2 in plain float64 torch with λ, β given as (B,) constants: blocks [s(a, p) | s(a, n_1) | …],
    blended logits, + w on the diagonal of each negative block, cross-entropy to the diagonal of the first."""
    an, pn, nn_ = F.normalize(a.double(), dim=-1), F.normalize(p.double(), dim=-1), F.normalize(n.double(), dim=-1)
    s = torch.cat([an @ pn.T, *(an @ col.T for col in nn_)], dim=1)  # (B, (1+k)B)
    lam_c, beta_c = lam.double()[:, None], beta.double()[:, None]
    logits = (1 - lam_c) * s / TAU + lam_c * (-beta_c * torch.log1p(-s.clamp(max=1 - eps)))
    b = a.shape[0]
    weight = torch.cat([torch.zeros(b, b), *(w * torch.eye(b) for _ in range(n.shape[0]))], dim=1)
    return F.cross_entropy(logits + weight.double(), torch.arange(b))


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("w", [0.0, 1.0])
def test_infonce_is_simcse_supervised_loss(k: int, w: float) -> None:
    a, p, n = _triplets(k)
    value = InfoNCELoss(TAU, hard_negative_weight=w)(a, p, negatives=n)
    ref = reference_simcse_supervised(a.numpy(), p.numpy(), n.numpy(), temperature=TAU, hard_negative_weight=w)
    assert value.item() == pytest.approx(ref, rel=1e-6, abs=1e-6)
    # the weight is visible on these data (so a weight ignored or misplaced would fail)
    other = reference_simcse_supervised(a.numpy(), p.numpy(), n.numpy(), temperature=TAU, hard_negative_weight=1 - w)
    assert abs(other - ref) > 0.05


@pytest.mark.parametrize("beta_mode", ["ols", "unit"])
@pytest.mark.parametrize("w", [0.0, 1.0])
@pytest.mark.parametrize("masked", [False, True])
def test_weince_matches_loop_reference_supervised(beta_mode: str, w: float, masked: bool) -> None:
    k = 2
    a, p, n = _triplets(k)
    mask = _random_mask(k) if masked else None
    kwargs = {"temperature": TAU, "beta_mode": beta_mode}
    loss_fn = WeinceLoss(hard_negative_weight=w, **kwargs)
    value = loss_fn(a, p, negative_mask=mask, negatives=n)
    ref = reference_weince(
        a.numpy(),
        p.numpy(),
        negatives=n.numpy(),
        hard_negative_weight=w,
        negative_mask=None if mask is None else mask.numpy(),
        **kwargs,
    )
    st = loss_fn.last_statistics
    close = {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(st.rho.numpy(), ref["rho"], **close, err_msg="rho")
    np.testing.assert_allclose(st.delta_aic.numpy(), ref["delta_aic"], **close, err_msg="delta_aic")
    np.testing.assert_allclose(st.beta_ols.numpy(), ref["beta_ols"], **close, err_msg="beta_ols")
    np.testing.assert_allclose(st.beta.numpy(), ref["beta"], **close, err_msg="beta")
    np.testing.assert_allclose(st.lam.numpy(), ref["lam"], **close, err_msg="lambda")
    assert float(st.rho0) == pytest.approx(ref["rho0"], rel=1e-5)
    assert value.item() == pytest.approx(ref["loss"], rel=1e-5, abs=1e-5)
    # Non-vacuity: λ is informative (neither all 0 nor all 1), and the weight moves the loss.
    assert 0.05 < float(st.lam.mean()) < 0.95 and int(((st.lam > 0.1) & (st.lam < 0.9)).sum()) >= 2, st.lam
    unweighted = reference_weince(
        a.numpy(), p.numpy(), negatives=n.numpy(), negative_mask=None if mask is None else mask.numpy(), **kwargs
    )
    if w:
        assert ref["loss"] - unweighted["loss"] > 0.05


def test_statistics_use_the_unweighted_scores() -> None:
    a, p, n = _triplets(2)
    plain, weighted = WeinceLoss(TAU), WeinceLoss(TAU, hard_negative_weight=3.0)
    plain(a, p, negatives=n)
    weighted(a, p, negatives=n)
    for name, value in plain.last_statistics._asdict().items():
        torch.testing.assert_close(getattr(weighted.last_statistics, name), value, rtol=0, atol=0, msg=name)
    # The own hard negatives are among the hardest: a weight in the statistics would have moved ρ.
    lay = score_matrix(a, p, negatives=n)
    own_best = lay.scores.masked_fill(~lay.hard_negative_mask, -2).amax(dim=1)
    hardest = lay.scores.masked_fill(lay.positive_mask, -2).amax(dim=1)
    assert bool((own_best == hardest).float().mean() > 0.5)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("w", [0.0, 1.0])
def test_fixed_lambda_zero_is_infonce(k: int, w: float) -> None:
    a, p, n = _triplets(k)
    mask = _random_mask(k)
    weince = WeinceLoss(TAU, fixed_lambda=0.0, hard_negative_weight=w)(a, p, negative_mask=mask, negatives=n)
    infonce = InfoNCELoss(TAU, hard_negative_weight=w)(a, p, negative_mask=mask, negatives=n)
    torch.testing.assert_close(weince, infonce, rtol=0, atol=1e-6)


@pytest.mark.parametrize("w", [0.0, 1.0])
@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_gradients_are_the_hand_written_ones(name: str, w: float) -> None:
    """Gradients w.r.t. anchors, positives and every negative column equal autograd of the hand-written
    float64 loss with λ and β held at the reference's values (the paper's stop-gradient)."""
    k = 2
    a, p, n = _triplets(k)
    if name == "infonce":
        loss_fn = InfoNCELoss(TAU, hard_negative_weight=w)
        lam, beta = torch.zeros(B), torch.ones(B)
    else:
        loss_fn = WeinceLoss(TAU, beta_mode="ols", hard_negative_weight=w)
        ref = reference_weince(a.numpy(), p.numpy(), negatives=n.numpy(), temperature=TAU, beta_mode="ols")
        lam, beta = torch.tensor(ref["lam"]), torch.tensor(ref["beta"])
        assert float(((lam > 0.05) & (lam < 0.95)).float().mean()) >= 0.15
    got = [t.clone().requires_grad_(True) for t in (a, p, n)]
    loss_fn(got[0], got[1], negatives=got[2]).backward()
    want = [t.clone().double().requires_grad_(True) for t in (a, p, n)]
    _hand_supervised_loss(*want, lam, beta, w).backward()
    for g, h, what in zip(got, want, ("anchors", "positives", "negatives"), strict=True):
        torch.testing.assert_close(g.grad, h.grad.float(), rtol=1e-4, atol=1e-6, msg=lambda m, x=what: f"{x}: {m}")
    assert float(got[2].grad.abs().sum()) > 0


def test_layout_bookkeeping() -> None:
    k = 2
    a, p, n = _triplets(k, b=5, d=4)
    lay = score_matrix(a.bfloat16(), p.bfloat16(), negatives=list(n.bfloat16()))
    assert lay.scores.shape == (5, 15) and lay.scores.dtype == torch.float32
    assert lay.num_negatives == 14
    torch.testing.assert_close(lay.positive_index, torch.arange(5))
    expected = torch.zeros(5, 15, dtype=torch.bool)
    for i in range(5):
        expected[i, 5 + i] = expected[i, 10 + i] = True
    assert torch.equal(lay.hard_negative_mask, expected)
    cols = torch.cat([F.normalize(x.float(), dim=-1) for x in (p, *n)])
    torch.testing.assert_close(score_matrix(a, p, negatives=n).scores, F.normalize(a, dim=-1) @ cols.T)
    # no hard negatives anywhere else
    assert not score_matrix(a, p).hard_negative_mask.any()
    assert not score_matrix(a, p, layout="ntxent").hard_negative_mask


@pytest.mark.parametrize("loss_fn", [InfoNCELoss(TAU, hard_negative_weight=1.0), WeinceLoss(TAU)])
def test_negatives_forms_agree_and_k_zero_is_simcse(loss_fn) -> None:
    a, p, n = _triplets(2)
    as_tensor = loss_fn(a, p, negatives=n)
    torch.testing.assert_close(loss_fn(a, p, negatives=list(n)), as_tensor, rtol=0, atol=0)
    torch.testing.assert_close(loss_fn(a, p, negatives=tuple(n.unbind(0))), as_tensor, rtol=0, atol=0)
    pairs = loss_fn(a, p)
    torch.testing.assert_close(loss_fn(a, p, negatives=[]), pairs, rtol=0, atol=0)
    torch.testing.assert_close(loss_fn(a, p, negatives=n[:0]), pairs, rtol=0, atol=0)


def test_autocast_bf16_gives_the_float32_loss() -> None:
    a, p, n = _triplets(2)
    loss_fn = WeinceLoss(TAU, hard_negative_weight=1.0)
    exact = loss_fn(a, p, negatives=n)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = loss_fn(a, p, negatives=n)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, exact, rtol=1e-5, atol=1e-6)


def test_bad_inputs_raise() -> None:
    a, p, n = _triplets(2, b=4, d=3)
    with pytest.raises(ValueError, match="'ntxent'"):
        InfoNCELoss(layout="ntxent")(a, p, negatives=n)
    with pytest.raises(ValueError, match="'ntxent'"):
        WeinceLoss(layout="ntxent")(a, p, negatives=[])
    with pytest.raises(ValueError, match="negative column 1"):
        InfoNCELoss()(a, p, negatives=[n[0], n[1, :3]])
    with pytest.raises(ValueError, match=r"\(k, B, D\)"):
        InfoNCELoss()(a, p, negatives=n[0])
    with pytest.raises(ValueError, match=r"negative_mask must have shape \(4, 12\).*2 negative column"):
        InfoNCELoss()(a, p, negative_mask=torch.zeros(4, 4, dtype=torch.bool), negatives=n)
    with pytest.raises(ValueError, match="floating point"):
        InfoNCELoss()(a, p, negatives=[torch.ones(4, 3, dtype=torch.long)])
    bad = n.clone()
    bad[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="negatives contain NaN or Inf"):
        WeinceLoss()(a, p, negatives=bad)


@pytest.mark.parametrize("value", [math.nan, math.inf, "one", None])
def test_hard_negative_weight_validation(value) -> None:
    for make in (InfoNCELoss, WeinceLoss):
        with pytest.raises(ValueError, match="hard_negative_weight must be a finite number"):
            make(hard_negative_weight=value)


def test_hard_negative_weight_needs_the_simcse_layout_and_is_in_the_config() -> None:
    with pytest.raises(ValueError, match="hard_negative_weight must be 0 for layout 'ntxent'"):
        WeinceLoss(layout="ntxent", hard_negative_weight=1.0)
    assert InfoNCELoss(layout="ntxent", hard_negative_weight=0).hard_negative_weight == 0.0
    for loss_fn in (InfoNCELoss(hard_negative_weight=1), WeinceLoss(hard_negative_weight=-0.5, beta_mode="unit")):
        cfg = loss_fn.get_config_dict()
        assert cfg["hard_negative_weight"] == loss_fn.hard_negative_weight != 0
        assert type(loss_fn)(**cfg).get_config_dict() == cfg
        assert "hard_negative_weight=" in repr(loss_fn)
    # w = 0 (SimCSE's default) leaves the configuration (and the model cards) of unsupervised runs unchanged
    assert "hard_negative_weight" not in WeinceLoss().get_config_dict()


@pytest.mark.parametrize("w", [0.0, 1.0])
def test_absent_negatives_leave_the_loss(w: float) -> None:
    """Pairs among the triplets (``absent_negatives``): InfoNCE is the closed form over the negatives that exist,
    WEINCE the loop reference without those candidates (in the softmax, the statistics and K)."""
    a, p, n = _triplets(1)
    present = torch.rand(B, generator=torch.Generator().manual_seed(3)) < 0.6
    assert 0 < int(present.sum()) < B
    absent = ~present[None]  # (1, B)
    rows = torch.arange(B)
    value = InfoNCELoss(TAU, hard_negative_weight=w)(a, p, negatives=n, absent_negatives=absent)
    an, cands = F.normalize(a.double(), dim=-1), F.normalize(torch.cat([p, n[0][present]]).double(), dim=-1)
    logits = an @ cands.T / TAU  # (B, B + present): only the negatives that exist
    own = torch.zeros_like(logits)
    own[rows[present], B + torch.arange(int(present.sum()))] = w
    assert value.item() == pytest.approx(F.cross_entropy(logits + own, rows).item(), rel=1e-6)
    for mask in (None, _random_mask(1)):
        loss_fn = WeinceLoss(TAU, hard_negative_weight=w)
        value = loss_fn(a, p, negative_mask=mask, negatives=n, absent_negatives=absent)
        ref = reference_weince(
            a.numpy(), p.numpy(), negatives=n.numpy(), absent=absent.numpy(), hard_negative_weight=w,
            temperature=TAU, negative_mask=None if mask is None else mask.numpy(),
        )  # fmt: skip
        assert value.item() == pytest.approx(ref["loss"], rel=1e-5, abs=1e-5)
        np.testing.assert_allclose(loss_fn.last_statistics.lam.numpy(), ref["lam"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss_fn.last_statistics.beta.numpy(), ref["beta"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b", [16, B])
@pytest.mark.parametrize("loss_fn", [InfoNCELoss(TAU), WeinceLoss(TAU, beta_mode="ols")])
def test_a_batch_whose_negatives_are_all_absent_is_the_pairs_layout(b: int, loss_fn) -> None:
    """Statistics included: with B = 16 the tail (32 points) is larger than the 15 negatives of a pair, so an
    absent negative counted as a masked one (s = −1) would enter it."""
    a, p, n = _triplets(1, b=b)
    pairs = loss_fn(a, p)
    stats = getattr(loss_fn, "last_statistics", None)
    value = loss_fn(a, p, negatives=n, absent_negatives=torch.ones(1, b, dtype=torch.bool))
    assert value.item() == pytest.approx(pairs.item(), rel=1e-6)
    if stats is not None:
        torch.testing.assert_close(loss_fn.last_statistics.beta, stats.beta)
        torch.testing.assert_close(loss_fn.last_statistics.lam, stats.lam)
    with pytest.raises(ValueError, match=r"absent_negatives must be \(k, B\)"):
        loss_fn(a, p, negatives=n, absent_negatives=torch.ones(b, dtype=torch.bool))
