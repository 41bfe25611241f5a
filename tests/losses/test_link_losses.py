"""The link losses (``docs/algorithm.md`` §6): the learned link, InfoNCE with a learned τ, the profiled link and
temperature-free InfoNCE.

Checked against InfoNCE at the start (bit for bit), a float64 loop over anchors and candidates (artanh), the
link fit of :mod:`simcse_weince.diagnostics.link` (the gradient in (a, b) is its score per anchor; training the
two scalars on winners of a known law recovers its maximum-likelihood point; the profiled link's running value
converges to it), the caps on separable winners, the settings' checks and round trips, and the per-process sums
that make two processes fit like one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from simcse_weince.diagnostics.link import ScoreBatch, _derivatives, _features, fit_coefficients
from simcse_weince.losses import (
    LOSSES,
    ArctanhLoss,
    ContrastiveLoss,
    InfoNCELoss,
    LearnedLinkLoss,
    LearnedTemperatureLoss,
    ProfiledLinkLoss,
    ScoreMatrix,
    score_matrix,
)
from simcse_weince.losses.arctanh import arctanh_logits
from simcse_weince.losses.link import features, link_derivatives
from simcse_weince.training.arguments import LossArguments

LINK_NAMES = ("learned_link", "learned_temperature", "profiled_link", "arctanh")


def _batch(b: int = 16, d: int = 8, k: int = 0, seed: int = 0, noise: float = 0.8):
    """Anchors, positives near them and k columns of hard negatives: (B, D), (B, D), (k, B, D) or None."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, d, generator=g)
    p = a + noise * torch.randn(b, d, generator=g)
    n = a[None] + 1.2 * torch.randn(k, b, d, generator=g) if k else None
    return a, p, n


def _simulated(anchors: int, candidates: int, a: float, b: float, seed: int = 0) -> ScoreMatrix:
    """Scores uniform in (−0.5, 0.95) and, per anchor, a winner drawn from softmax(a·s + b·u), u = −log(1 − s):
    the winner is the positive (``positive_index``), nothing is excluded."""
    g = torch.Generator().manual_seed(seed)
    scores = -0.5 + 1.45 * torch.rand(anchors, candidates, generator=g)
    s = scores.double()
    probs = (a * s - b * torch.log1p(-s)).softmax(dim=1)
    winner = torch.multinomial(probs, 1, generator=g)[:, 0]
    none = torch.zeros(anchors, candidates, dtype=torch.bool)
    return ScoreMatrix(scores, winner, none, none.clone(), candidates - 1)


def _separable(anchors: int = 8, spread: bool = False) -> ScoreMatrix:
    """Every positive (the diagonal) at 0.99, every negative at −0.5 (two feature points per anchor: a Hessian of
    rank 1), or with ``spread`` uniform in (−0.5, 0): winners the scores separate."""
    if spread:
        scores = -0.5 + 0.5 * torch.rand(anchors, anchors, generator=torch.Generator().manual_seed(9))
    else:
        scores = torch.full((anchors, anchors), -0.5)
    scores.fill_diagonal_(0.99)
    none = torch.zeros(anchors, anchors, dtype=torch.bool)
    return ScoreMatrix(scores, torch.arange(anchors), none, none.clone(), anchors - 1)


def _set(loss: LearnedLinkLoss, log_a: float, b: float) -> None:
    with torch.no_grad():
        loss.log_a.fill_(log_a)
        loss.b.fill_(b)


# 1. the start is InfoNCE ------------------------------------------------------------------------------------------

START_CASES = [
    pytest.param("simcse", 0, 0.0, id="simcse"),
    pytest.param("simcse", 2, 1.0, id="supervised-w1"),
    pytest.param("ntxent", 0, 0.0, id="ntxent"),
]


@pytest.mark.parametrize("cls", [LearnedLinkLoss, LearnedTemperatureLoss])
@pytest.mark.parametrize(("layout", "k", "w"), START_CASES)
def test_step_zero_is_infonce_bit_for_bit(cls: type[LearnedLinkLoss], layout: str, k: int, w: float) -> None:
    """At (α, b) = (0, 0) the learned link and the learned temperature are InfoNCE at τ exactly: the same loss
    value and the same gradients of the embeddings (torch.equal, not a tolerance)."""
    tau = 0.07
    a, p, n = _batch(b=16, d=8, k=k, seed=1)
    values, grads = [], []
    for loss in (
        InfoNCELoss(tau, layout=layout, hard_negative_weight=w),
        cls(tau, layout=layout, hard_negative_weight=w),
    ):
        inputs = [t.clone().requires_grad_(True) for t in (a, p) + ((n,) if n is not None else ())]
        value = loss(inputs[0], inputs[1], negatives=inputs[2] if n is not None else None)
        value.backward()
        values.append(value.detach())
        grads.append([t.grad for t in inputs])
    assert torch.isfinite(values[0]) and values[0] > 0
    assert torch.equal(values[0], values[1])
    for g_info, g_link in zip(*grads, strict=True):
        assert g_info is not None and torch.equal(g_info, g_link)


# 2. temperature-free InfoNCE against its formula ----------------------------------------------------------------


def _arctanh_loop(a: torch.Tensor, p: torch.Tensor, layout: str, n: torch.Tensor | None, w: float) -> float:
    """Mean over anchors of −log softmax of log((1 + s)/(1 − s)) (+ w at the anchor's own hard negatives) at the
    positive: a float64 loop over anchors and candidates."""
    if layout == "ntxent":
        views = F.normalize(torch.cat([a, p]).double(), dim=-1)
        m = a.shape[0]
        rows = [
            (views[i], [(views[j], j == (i + m) % (2 * m), False) for j in range(2 * m) if j != i])
            for i in range(2 * m)
        ]
    else:
        an, pn = F.normalize(a.double(), dim=-1), F.normalize(p.double(), dim=-1)
        negs = [] if n is None else [F.normalize(col.double(), dim=-1) for col in n]
        rows = []
        for i in range(a.shape[0]):
            cands = [(pn[j], j == i, False) for j in range(a.shape[0])]
            cands += [(col[j], False, j == i) for col in negs for j in range(a.shape[0])]
            rows.append((an[i], cands))
    total = 0.0
    for anchor, cands in rows:
        logits, positive = [], None
        for c, (z, is_positive, own_negative) in enumerate(cands):
            s = float(anchor @ z)
            logits.append(math.log((1 + s) / (1 - s)) + (w if own_negative else 0.0))
            if is_positive:
                positive = c
        assert positive is not None
        top = max(logits)
        total += top + math.log(sum(math.exp(v - top) for v in logits)) - logits[positive]
    return total / len(rows)


@pytest.mark.parametrize(("layout", "k", "w"), START_CASES)
def test_arctanh_matches_the_loop(layout: str, k: int, w: float) -> None:
    """ArctanhLoss is the cross-entropy of the positive under the logits 2·artanh(s) = log((1 + s)/(1 − s)),
    against a float64 loop (SimCSE, supervised with w = 1, NT-Xent); it differs from InfoNCE at τ = 1/2, its
    first-order slope."""
    a, p, n = _batch(b=12, d=8, k=k, seed=2)
    value = ArctanhLoss(layout=layout, hard_negative_weight=w)(a, p, negatives=n)
    expected = _arctanh_loop(a, p, layout, n, w)
    assert float(value) == pytest.approx(expected, rel=1e-5)
    infonce = InfoNCELoss(0.5, layout=layout, hard_negative_weight=w)(a, p, negatives=n)
    assert abs(float(infonce) - expected) > 1e-3


def test_arctanh_logits_are_finite_at_the_ends() -> None:
    """At s = ±1 (duplicates, antipodes) the logit is the clamped ±log((2 − ε)/ε), finite; a batch of duplicates
    gives a finite loss."""
    eps = 1e-6
    ends = arctanh_logits(torch.tensor([1.0, -1.0], dtype=torch.float64), eps)
    assert torch.isfinite(ends).all()
    closed = math.log((2 - eps) / eps)
    assert ends.tolist() == pytest.approx([closed, -closed], rel=1e-9)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(ArctanhLoss()(x, x))


# 3. the gradient in (a, b) is the link fit's score per anchor ------------------------------------------------------


@pytest.mark.parametrize("layout", ["simcse", "ntxent"])
@pytest.mark.parametrize("cls", [LearnedLinkLoss, LearnedTemperatureLoss])
def test_gradient_is_the_link_fits_score(cls: type[LearnedLinkLoss], layout: str) -> None:
    """At (α, b) = (0.3, 0.7), τ = 0.1: ∂L/∂b = b.grad and ∂L/∂a = log_a.grad / a (a = e^α/τ) equal the
    diagnostics' gradient of the summed NLL (``_derivatives``) divided by the number of anchors."""
    tau, alpha, b = 0.1, 0.3, 0.7
    loss = cls(tau, layout=layout)
    learns_b = cls is LearnedLinkLoss
    _set(loss, alpha, b if learns_b else 0.0)
    a_emb, p_emb, _ = _batch(b=24, d=8, seed=3, noise=1.0)
    lay = score_matrix(a_emb, p_emb, layout)
    lay.scores = lay.scores.detach()
    loss.loss_from_scores(lay).backward()
    a = math.exp(alpha) / tau
    assert loss.coefficients()[0] == pytest.approx(a, rel=1e-6)
    feats = [_features(ScoreBatch(lay.scores, lay.positive_index, lay.excluded))]
    theta = torch.tensor([a, b] if learns_b else [a], dtype=torch.float64)
    _, grad, _, _ = _derivatives(feats, theta)
    expected = grad / lay.scores.shape[0]
    assert abs(float(expected[0])) > 1e-3  # away from the optimum: a real comparison
    assert loss.log_a.grad is not None
    assert float(loss.log_a.grad) / a == pytest.approx(float(expected[0]), rel=1e-5, abs=1e-7)
    if learns_b:
        assert loss.b.grad is not None
        assert float(loss.b.grad) == pytest.approx(float(expected[1]), rel=1e-5, abs=1e-7)
    else:
        assert "b" not in dict(loss.named_parameters())


# 4. training the two scalars recovers the link of the winners ----------------------------------------------------


def test_learned_scalars_recover_the_simulated_link() -> None:
    """On 1000 anchors × 16 candidates with winners drawn from softmax(a*·s + b*·u), Adam on (α, b) alone reaches
    the link fit's maximum-likelihood (a, b), and that point is within 3 standard errors of (a*, b*)."""
    a_true, b_true = 6.0, 1.0
    lay = _simulated(1000, 16, a_true, b_true, seed=4)
    fit = fit_coefficients([ScoreBatch(lay.scores, lay.positive_index)])
    assert fit.converged
    (a_mle, b_mle), (a_se, b_se) = fit.theta, fit.se
    assert abs(a_mle - a_true) < 3 * a_se and abs(b_mle - b_true) < 3 * b_se
    loss = LearnedLinkLoss(temperature=0.1)
    optimizer = torch.optim.Adam([loss.log_a, loss.b], lr=0.1)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.96)
    for _ in range(150):
        optimizer.zero_grad()
        loss.loss_from_scores(lay).backward()
        optimizer.step()
        schedule.step()
    a, b = loss.coefficients()
    assert abs(a - a_mle) < 0.02 * a_se and abs(b - b_mle) < 0.02 * b_se
    assert abs(a - a_true) < 3 * a_se and abs(b - b_true) < 3 * b_se


# 5. the profiled link's running value ------------------------------------------------------------------------------


def test_profiled_running_value_converges_to_the_batch_mle() -> None:
    """Repeated training forwards on one batch move the running (a, b) (momentum 0.9) to the batch's
    maximum-likelihood point of the diagnostics' fit; evaluation forwards (no gradient) leave it where it is."""
    lay = _simulated(128, 16, 8.0, 1.5, seed=5)
    fit = fit_coefficients([ScoreBatch(lay.scores, lay.positive_index)])
    assert fit.converged
    loss = ProfiledLinkLoss(temperature=0.05)
    assert loss.coefficients() == (20.0, 0.0)
    with torch.enable_grad():
        for _ in range(120):
            loss.loss_from_scores(lay)
    a, b = loss.coefficients()
    assert a == pytest.approx(fit.theta[0], rel=1e-4) and b == pytest.approx(fit.theta[1], rel=1e-4)
    assert float(loss.last_diagnostics["link_a_batch"]) == pytest.approx(fit.theta[0], rel=1e-4)
    theta = loss.theta.clone()
    with torch.no_grad():
        value = loss.loss_from_scores(lay)
    assert torch.equal(loss.theta, theta)
    assert "link_a_batch" not in loss.last_diagnostics
    assert float(value) == pytest.approx(-fit.mean_loglik, rel=1e-5)


# 6. caps on separable winners ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("spread", [False, True])
def test_learned_link_caps_bind_on_separable_winners(spread: bool) -> None:
    """Separable winners push (a, b) up without end: the caps hold them at (a_max, b_max), the loss stays finite at
    every step, and the last forward logs both caps."""
    loss = LearnedLinkLoss(temperature=0.5, link_a_max=4.0, link_b_max=1.0)
    lay = _separable(spread=spread)
    optimizer = torch.optim.Adam(loss.parameters(), lr=0.5)
    for _ in range(30):
        optimizer.zero_grad()
        value = loss.loss_from_scores(lay)
        assert torch.isfinite(value)
        value.backward()
        assert torch.isfinite(loss.log_a.grad) and torch.isfinite(loss.b.grad)
        optimizer.step()
    a, b = loss.coefficients()
    assert a == pytest.approx(4.0, abs=1e-6) and b == pytest.approx(1.0, abs=1e-6)
    diagnostics = loss.last_diagnostics
    assert float(diagnostics["link_a_at_cap"]) == 1.0 and float(diagnostics["link_b_at_cap"]) == 1.0
    assert float(diagnostics["link_b_at_min"]) == 0.0
    assert float(diagnostics["link_a"]) == pytest.approx(4.0, rel=1e-6)


def test_profiled_link_caps_bind_on_separable_winners() -> None:
    """The profiled link (momentum 0: θ is each batch's Newton point) on separable winners with a singular Hessian
    (two feature points per anchor): θ and the loss stay finite, θ reaches both caps, and the logged caps say
    whether θ is at them at every forward."""
    loss = ProfiledLinkLoss(temperature=0.5, link_a_max=4.0, link_b_max=1.0, link_momentum=0.0)
    lay = _separable()
    at_caps = []
    for _ in range(30):
        value = loss.loss_from_scores(lay)
        assert torch.isfinite(value) and torch.isfinite(loss.theta).all()
        a, b = loss.coefficients()
        assert 0.0 <= a <= 4.0 and 0.0 <= b <= 1.0
        logged = (float(loss.last_diagnostics["link_a_at_cap"]), float(loss.last_diagnostics["link_b_at_cap"]))
        assert logged == (float(a == 4.0), float(b == 1.0))
        at_caps.append(logged == (1.0, 1.0))
    assert any(at_caps)


def test_profiled_link_reaches_the_box_mle_on_separable_winners() -> None:
    """On separable winners (every negative below the positive in s and in u) the NLL decreases in a and in b over
    the whole box, so its constrained maximum-likelihood point is (a_max, b_max): the running value must go there,
    not to a = 0."""
    lay = _separable(spread=True)
    x = features(lay.scores, 1e-6)
    corner = torch.tensor([0.0, 1.0], dtype=torch.float64)
    _, grad, _ = link_derivatives(x, ~lay.excluded, lay.positive_index, corner)
    assert float(grad[0]) < 0 and float(grad[1]) < 0  # raising a (or b) from (0, b_max) lowers the NLL
    loss = ProfiledLinkLoss(temperature=0.5, link_a_max=4.0, link_b_max=1.0)
    for _ in range(200):  # the running average closes a tenth of the distance to the Newton point per call
        assert torch.isfinite(loss.loss_from_scores(lay))
    assert loss.coefficients() == pytest.approx((4.0, 1.0), abs=1e-5)
    assert float(loss.last_diagnostics["link_a_batch"]) == 4.0  # this batch's constrained Newton point: the corner


def test_newton_step_on_a_singular_hessian_stays_in_the_identified_direction() -> None:
    """With two feature points per anchor the NLL depends on θ only through θ·d, d = x_positive − x_negative: the
    pseudo-inverse Newton step (the minimum-norm one) lies along d at every θ the running fit visits."""
    lay = _separable()
    x = features(lay.scores, 1e-6)
    d = x[0, 0] - x[0, 1]
    normal = torch.stack([d[1], -d[0]]) / d.norm()
    loss = ProfiledLinkLoss(temperature=0.5, link_a_max=100.0, link_b_max=16.0)
    for _ in range(20):
        theta = loss.theta.clone()
        step = loss.update(lay) - theta
        assert float(step @ d) > 0
        assert abs(float(step @ normal)) < 1e-6 * float(step.norm())


@pytest.mark.parametrize(("b_min", "expected"), [(-1.0, -0.5), (0.0, 0.0)])
def test_b_min_bounds_the_endpoint_weight(b_min: float, expected: float) -> None:
    """b = −0.5 stands with ``link_b_min = −1`` and is projected to 0 with the default ``link_b_min = 0``, in
    ``coefficients`` and in the parameter the forward uses (logged as ``link_b_at_min`` when it binds)."""
    loss = LearnedLinkLoss(temperature=0.1, link_b_min=b_min)
    _set(loss, 0.0, -0.5)
    assert loss.coefficients() == (pytest.approx(10.0), expected)
    lay = _simulated(8, 8, 10.0, 0.0, seed=6)
    value = loss.loss_from_scores(lay)
    assert float(loss.b.detach()) == expected
    assert float(loss.last_diagnostics["link_b_at_min"]) == float(expected == b_min)
    x = features(lay.scores, 1e-6)
    theta = torch.tensor([10.0, expected], dtype=torch.float64)
    nll, _, _ = link_derivatives(x, ~lay.excluded, lay.positive_index, theta)
    assert float(value.detach()) == pytest.approx(float(nll), rel=1e-5)


# 7. bad settings -----------------------------------------------------------------------------------------------------

BAD = [
    (LearnedLinkLoss, {"temperature": math.nan}, "temperature must be > 0, got nan"),
    (LearnedTemperatureLoss, {"temperature": math.nan}, "temperature must be > 0, got nan"),
    (ProfiledLinkLoss, {"temperature": math.nan}, "temperature must be > 0, got nan"),
    (LearnedLinkLoss, {"temperature": 0.1, "link_a_max": 5.0}, "link_a_max must be >= 1/temperature = 10"),
    (LearnedTemperatureLoss, {"temperature": 0.1, "link_a_max": 5.0}, "link_a_max must be >= 1/temperature = 10"),
    (ProfiledLinkLoss, {"temperature": 0.1, "link_a_max": 5.0}, "link_a_max must be >= 1/temperature = 10"),
    (LearnedLinkLoss, {"link_b_min": 0.5}, "link_b_min <= 0 <= link_b_max must hold"),
    (ProfiledLinkLoss, {"link_b_min": 0.5}, "link_b_min <= 0 <= link_b_max must hold"),
    (LearnedLinkLoss, {"link_b_max": -1.0}, "link_b_max must be a finite number >= 0, got -1.0"),
    (ProfiledLinkLoss, {"link_b_max": -1.0}, "link_b_max must be a finite number >= 0, got -1.0"),
    (LearnedLinkLoss, {"link_b_min": -math.inf}, "link_b_min must be a finite number, got -inf"),
    (LearnedLinkLoss, {"link_a_max": math.inf}, "or in (0, 10000], got inf"),
    (LearnedTemperatureLoss, {"link_a_max": math.inf}, "or in (0, 10000], got inf"),
    (ProfiledLinkLoss, {"link_a_max": math.inf}, "or in (0, 10000], got inf"),
    # a cap above the sane ceiling: at a = 1e4 a float32 softmax of cosines is one-hot (the run learns nothing)
    (LearnedLinkLoss, {"link_a_max": 1e30}, "or in (0, 10000], got 1e+30"),
    (LearnedTemperatureLoss, {"link_a_max": 1e5}, "or in (0, 10000], got 100000.0"),
    (ProfiledLinkLoss, {"link_momentum": 1.0}, "link_momentum must be in [0, 1), got 1.0"),
    (LearnedLinkLoss, {"eps": 0.0}, "eps must be in (0, 0.1], got 0.0"),
    (ProfiledLinkLoss, {"eps": 0.0}, "eps must be in (0, 0.1], got 0.0"),
    (ArctanhLoss, {"eps": 0.0}, "eps must be in (0, 0.1], got 0.0"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD, ids=[f"{c.name}-{next(iter(k))}" for c, k, _ in BAD])
def test_bad_settings_are_one_value_error(cls: type[ContrastiveLoss], kwargs: dict[str, Any], message: str) -> None:
    """Each bad setting is a ValueError naming its field, from the loss and from its Config alike."""
    with pytest.raises(ValueError) as err:
        cls(**kwargs)
    assert message in str(err.value)
    if "temperature" in kwargs and math.isnan(kwargs["temperature"]):
        return  # the shared base constructor checks τ before the Config
    with pytest.raises(ValueError) as err:
        cls.Config(**kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("cls", [LearnedLinkLoss, LearnedTemperatureLoss])
def test_infinite_temperature_is_refused_by_the_learned_link(cls: type[LearnedLinkLoss]) -> None:
    """An infinite τ freezes a = e^α/τ at 0 whatever α learns: the learned link must refuse it."""
    with pytest.raises(ValueError, match="temperature"):
        cls(temperature=math.inf)


# 8. settings round trip -----------------------------------------------------------------------------------------

NON_DEFAULT: dict[type[ContrastiveLoss], dict[str, Any]] = {
    LearnedLinkLoss: {
        "temperature": 0.1,
        "link_learn_a": False,
        "link_a_max": 50.0,
        "link_b_min": -0.5,
        "link_b_max": 8.0,
        "eps": 1e-5,
    },
    LearnedTemperatureLoss: {"temperature": 0.1, "link_a_max": 50.0},
    ProfiledLinkLoss: {
        "temperature": 0.1,
        "link_a_max": 50.0,
        "link_b_min": -0.5,
        "link_b_max": 8.0,
        "link_momentum": 0.5,
        "eps": 1e-5,
    },
    ArctanhLoss: {"eps": 1e-5},
}
PARAMETERS = {LearnedLinkLoss: ["b"], LearnedTemperatureLoss: ["log_a"], ProfiledLinkLoss: [], ArctanhLoss: []}


@pytest.mark.parametrize("cls", list(NON_DEFAULT), ids=lambda c: c.name)
def test_config_round_trip(cls: type[ContrastiveLoss]) -> None:
    """``from_config`` of non-default settings gives a loss whose ``get_config_dict`` holds them and rebuilds the same
    settings; ``LossArguments(loss=name, ...)`` builds that class with them; the trainable parameters are the
    learned scalars (b alone when a is not learned)."""
    values = NON_DEFAULT[cls]
    default = cls.Config()
    assert {f.name for f in dataclasses.fields(cls.Config)} == set(values)
    assert all(getattr(default, k) != v for k, v in values.items())
    config = cls.Config(**values)
    loss = cls.from_config(config, layout="ntxent")
    assert loss.config == config
    written = loss.get_config_dict()
    assert {k: written[k] for k in values} == values
    assert written["layout"] == "ntxent"
    again = cls.from_config(cls.Config(**{k: written[k] for k in values}))
    assert again.config == config
    built = LossArguments(loss=cls.name, **values).build()
    assert type(built) is cls and built.config == config
    assert [name for name, _ in built.named_parameters()] == PARAMETERS[cls]


def test_registry_lists_the_link_losses() -> None:
    """The four link losses are registered under their names, and every display name is unique."""
    assert {name: LOSSES[name].name for name in LINK_NAMES} == {name: name for name in LINK_NAMES}
    displays = [cls.display_name for cls in LOSSES.values()]
    assert len(set(displays)) == len(displays) and all(displays)


# 9. two processes fit like one -----------------------------------------------------------------------------------


def test_derivatives_of_two_halves_average_to_the_whole() -> None:
    """The per-anchor NLL, gradient and Hessian of a batch are the anchor-weighted means of its halves' (what the
    all_reduce of sums and counts computes), also with excluded entries; and they are the diagnostics' sums over
    anchors divided by their number."""
    lay = _simulated(64, 12, 7.0, 1.0, seed=7)
    x = features(lay.scores, 1e-6)
    valid = torch.rand(64, 12, generator=torch.Generator().manual_seed(8)) > 0.2
    valid[torch.arange(64), lay.positive_index] = True
    winner = lay.positive_index
    theta = torch.tensor([5.0, 2.0], dtype=torch.float64)
    whole = link_derivatives(x, valid, winner, theta)
    first = link_derivatives(x[:24], valid[:24], winner[:24], theta)
    second = link_derivatives(x[24:], valid[24:], winner[24:], theta)
    for w, f, s in zip(whole, first, second, strict=True):
        torch.testing.assert_close(w, (24 * f + 40 * s) / 64, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(first[1], second[1])  # the halves differ: the weighting is tested
    nll, grad, hess, _ = _derivatives([_features(ScoreBatch(lay.scores, winner, ~valid))], theta)
    torch.testing.assert_close(whole[0], nll / 64, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(whole[1], grad / 64, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(whole[2], hess / 64, rtol=1e-12, atol=1e-12)
