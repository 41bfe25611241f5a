"""The field's losses beside WEINCE (hardness-weighted InfoNCE, HCL, DCL, Focal-InfoNCE, SigLIP's sigmoid): each
against a per-anchor loop reference written from its paper or its authors' formula (``reference.py``), in the
SimCSE, supervised (hard negatives, some absent, a masked negative per row) and NT-Xent layouts, with SimCSE's
hard-negative weight; the values at which a loss is InfoNCE; gradients by finite differences; the knobs' checks."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from simcse_weince.losses import LOSSES, InfoNCELoss, make_loss, score_matrix
from tests.losses.reference import (
    reference_candidates,
    reference_dcl,
    reference_focal_infonce,
    reference_hardness_infonce,
    reference_hcl,
    reference_sigmoid,
)

TAU = 0.1
LAYOUTS = ["simcse", "supervised", "ntxent"]


def _case(layout: str, seed: int = 0) -> tuple[dict, list]:
    """(loss inputs, reference rows): 6 rows of 6 dimensions; supervised: 2 hard-negative columns, 3 absent; a
    masked negative in every row (the hardest candidate that is not the positive)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(6, 6, generator=g)
    p = a + 0.7 * torch.randn(6, 6, generator=g)
    inputs: dict = dict(anchors=a, positives=p)
    negatives = absent = None
    if layout == "supervised":
        negatives = a[None] + 0.9 * torch.randn(2, 6, 6, generator=g)
        absent = torch.zeros(2, 6, dtype=torch.bool)
        absent[0, 1] = absent[1, 4] = absent[1, 0] = True
        inputs |= dict(negatives=negatives, absent_negatives=absent)
    lay = score_matrix(a, p, "ntxent" if layout == "ntxent" else "simcse", negatives=negatives, absent_negatives=absent)
    hardest = lay.scores.masked_fill(~lay.negatives, -math.inf).argmax(dim=1)
    mask = torch.zeros_like(lay.scores, dtype=torch.bool).scatter_(1, hardest[:, None], True)
    inputs["negative_mask"] = mask
    ref_layout = "ntxent" if layout == "ntxent" else "simcse"
    return inputs, reference_candidates(a, p, ref_layout, negatives, mask.tolist(), absent)


def _loss(name: str, layout: str, **knobs):
    w = 0.7 if layout == "supervised" else 0.0
    return make_loss(name, temperature=knobs.pop("temperature", TAU), layout="ntxent" if layout == "ntxent" else
                     "simcse", hard_negative_weight=w, **knobs), w  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", ["in_batch_negatives", "hard_negatives", "all_negatives"])
def test_hardness_infonce_is_the_loop(layout: str, mode: str) -> None:
    if layout == "ntxent" and mode == "hard_negatives":
        with pytest.raises(ValueError, match="'ntxent' layout has none"):
            _loss("hardness_infonce", layout, hardness_mode=mode)
        return
    inputs, rows = _case(layout)
    loss, w = _loss("hardness_infonce", layout, hardness_mode=mode, hardness_strength=5.0)
    expected = reference_hardness_infonce(rows, TAU, mode, 5.0, w)
    assert float(loss(**inputs)) == pytest.approx(expected, rel=1e-5)
    plain = reference_hardness_infonce(rows, TAU, mode, 0.0, w)
    if layout == "supervised" or mode != "hard_negatives":
        assert abs(expected - plain) > 1e-3  # the weighting acts: the comparison can fail


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("beta", "tau_plus"), [(1.0, 0.1), (0.5, 0.0), (2.0, 0.3), (1.0, 0.95)])
def test_hcl_is_the_authors_formula(layout: str, beta: float, tau_plus: float) -> None:
    inputs, rows = _case(layout)
    loss, w = _loss("hcl", layout, hcl_beta=beta, hcl_tau_plus=tau_plus)
    expected, floored = reference_hcl(rows, TAU, beta, tau_plus, w)
    assert float(loss(**inputs)) == pytest.approx(expected, rel=1e-5)
    if layout == "supervised" and tau_plus == 0.1:  # the debiased sum falls below the floor for some anchors
        assert 0 < floored < len(rows)
    if tau_plus == 0.95:  # a larger prior floors more anchors; none without debiasing
        assert floored >= reference_hcl(rows, TAU, beta, 0.1, w)[1] > 0
    if tau_plus == 0.0:
        assert floored == 0


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sigma", [None, 0.5])
def test_dcl_is_the_loop(layout: str, sigma: float | None) -> None:
    inputs, rows = _case(layout)
    loss, w = _loss("dcl", layout, dcl_sigma=sigma)
    assert float(loss(**inputs)) == pytest.approx(reference_dcl(rows, TAU, sigma, w), rel=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_focal_infonce_is_the_authors_logits(layout: str) -> None:
    inputs, rows = _case(layout)
    loss, w = _loss("focal_infonce", layout, focal_margin=0.3)
    assert float(loss(**inputs)) == pytest.approx(reference_focal_infonce(rows, TAU, 0.3, w), rel=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sigmoid_is_the_loop_and_starts_at_t_and_b(layout: str) -> None:
    inputs, rows = _case(layout)
    loss, w = _loss("sigmoid", layout, sigmoid_bias=-3.0)
    assert loss.learned_values() == pytest.approx({"sigmoid_t": 1 / TAU, "sigmoid_b": -3.0})
    assert float(loss(**inputs).detach()) == pytest.approx(reference_sigmoid(rows, 1 / TAU, -3.0, w), rel=1e-5)
    with torch.no_grad():
        loss.log_t.fill_(math.log(4.0))
        loss.b.fill_(1.5)
    assert float(loss(**inputs).detach()) == pytest.approx(reference_sigmoid(rows, 4.0, 1.5, w), rel=1e-5)
    assert float(loss.last_diagnostics["sigmoid_t"]) == pytest.approx(4.0)
    scores = torch.tensor([[0.2, -0.5]])
    torch.testing.assert_close(loss.search_logits(scores), 4.0 * scores + 1.5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_at_their_infonce_values_they_are_infonce(layout: str) -> None:
    """Hardness α = 0, HCL β = 0 and τ⁺ = 0: InfoNCE, loss and gradients (HCL's log-space sums to rounding)."""
    inputs, _ = _case(layout)
    w = 0.7 if layout == "supervised" else 0.0
    kind = "ntxent" if layout == "ntxent" else "simcse"

    def value_and_grad(loss):
        leaf = inputs["anchors"].clone().requires_grad_(True)
        value = loss(**(inputs | {"anchors": leaf}))
        value.backward()
        return value.detach(), leaf.grad

    ref = value_and_grad(InfoNCELoss(TAU, layout=kind, hard_negative_weight=w))
    hardness = value_and_grad(_loss("hardness_infonce", layout, hardness_mode="all_negatives", hardness_strength=0)[0])
    assert torch.equal(hardness[0], ref[0]) and torch.equal(hardness[1], ref[1])
    hcl = value_and_grad(_loss("hcl", layout, hcl_beta=0.0, hcl_tau_plus=0.0)[0])
    torch.testing.assert_close(hcl[0], ref[0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(hcl[1], ref[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hardness_weights_are_stop_gradient(layout: str) -> None:
    """The gradient is InfoNCE's on logits whose added α·s is a constant (sentence-transformers' ``detach``):
    not the finite differences of the loss, which would move the weights too."""
    inputs, _ = _case(layout)
    loss, w = _loss("hardness_infonce", layout, hardness_mode="all_negatives", hardness_strength=5.0)
    lay = score_matrix(**inputs, layout="ntxent" if layout == "ntxent" else "simcse")
    scores = lay.scores.detach().requires_grad_(True)
    loss.loss_from_scores(dataclasses.replace(lay, scores=scores)).backward()
    constant = scores.detach().clone().requires_grad_(True)
    logits = constant / TAU + 5.0 * scores.detach() * lay.negatives
    if lay.hard_negative_mask is not None:
        logits = logits + w * lay.hard_negative_mask
    target = torch.nn.functional.cross_entropy(logits.masked_fill(lay.excluded, -math.inf), lay.positive_index)
    target.backward()
    torch.testing.assert_close(scores.grad, constant.grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["hcl", "dcl", "focal_infonce", "sigmoid"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradients_are_the_finite_differences(name: str, layout: str) -> None:
    """torch's gradcheck on float64 scores (the score matrix of the supervised case has masked, absent and hard
    negatives); the sigmoid loss's t and b too, HCL at a τ⁺ where some anchors sit at the floor."""
    inputs, _ = _case(layout)
    knobs = {"hcl": dict(hcl_tau_plus=0.6), "dcl": dict(dcl_sigma=0.5), "sigmoid": dict(sigmoid_bias=-1.0)}
    loss, _ = _loss(name, layout, **knobs.get(name, {}))
    loss = loss.double()
    kind = "ntxent" if layout == "ntxent" else "simcse"
    lay = score_matrix(**{k: v for k, v in inputs.items() if k != "negative_mask"}, layout=kind,
                       negative_mask=inputs["negative_mask"])  # fmt: skip
    scores = lay.scores.detach().double().requires_grad_(True)
    params = tuple(loss.parameters())

    def f(s, *_params):
        return loss.loss_from_scores(dataclasses.replace(lay, scores=s))

    assert torch.autograd.gradcheck(f, (scores, *params), eps=1e-6, atol=1e-6)


def test_rows_without_negatives_add_zero() -> None:
    """Every negative masked: InfoNCE's loss is 0 there, and so is every field loss's (no NaN, no −∞)."""
    a = torch.randn(3, 4)
    mask = ~torch.eye(3, dtype=torch.bool)
    for name in ("hardness_infonce", "hcl", "dcl", "focal_infonce"):
        leaf = a.clone().requires_grad_(True)
        value = make_loss(name, temperature=TAU)(leaf, leaf + 0.1, negative_mask=mask)
        value.backward()
        assert float(value) == 0.0 and torch.isfinite(leaf.grad).all(), name


@pytest.mark.parametrize(
    ("name", "knobs", "field"),
    [
        ("hardness_infonce", dict(hardness_strength=-1.0), "hardness_strength"),
        ("hardness_infonce", dict(hardness_mode="hard"), "hardness_mode"),
        ("hcl", dict(hcl_beta=-0.5), "hcl_beta"),
        ("hcl", dict(hcl_tau_plus=1.0), "hcl_tau_plus"),
        ("dcl", dict(dcl_sigma=0.0), "dcl_sigma"),
        ("focal_infonce", dict(focal_margin=math.nan), "focal_margin"),
        ("sigmoid", dict(sigmoid_bias=math.inf), "sigmoid_bias"),
        ("sigmoid", dict(temperature=0.0), "temperature"),
    ],
)
def test_knobs_are_checked_in_one_line(name: str, knobs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field} must be") as err:
        LOSSES[name].Config(**knobs)
    assert "\n" not in str(err.value)
    from simcse_weince.training.arguments import LossArguments

    with pytest.raises(ValueError, match=f"^{field} must be"):
        LossArguments(loss="infonce", **knobs)  # every loss's knobs are checked, whichever loss runs
