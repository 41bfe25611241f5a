"""Training a free table on a known kernel with the project's own losses."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.infonce import InfoNCELoss
from simcse_weince.losses.layout import ScoreMatrix
from simcse_weince.losses.weince import WeinceLoss
from weince_lab.simulation.learning import TrainConfig, batch_scores, build_loss, parse_arm, train_table
from weince_lab.simulation.search import universe_gap
from weince_lab.simulation.universe import kernel_law, make_universe


@pytest.mark.parametrize("kernel", ["vmf", "endpoint"])
def test_training_from_the_truth_with_the_true_link_stays_at_zero_up_to_its_noise(kernel: str) -> None:
    """At the true vectors the true link's k-negative risk is minimal, so training only adds step noise.

    The drift is bounded by 5·lr nats (measured 2.7–3.5·lr) and halves with the step size: noise, not a pull
    toward another optimum. InfoNCE at a wrong τ (0.05 under κ = 10, or any τ under the endpoint kernel) moves
    the same start far away.
    """
    law = kernel_law(kernel, kappa=10.0, beta=3.0)
    u = make_universe(64, 4, law, seed=3)
    true_link = build_loss("oracle", 0.1, law)  # vMF: InfoNCE at τ = 1/κ (λ ≡ 0); endpoint: the Weibit link
    if kernel == "vmf":
        assert isinstance(true_link, WeinceLoss) and true_link.fixed_lambda == 0.0 and true_link.temperature == 0.1
    drift = {}
    for lr in (0.002, 0.001):
        cfg = TrainConfig(negatives=32, dim=4, steps=200, batch=256, pairs=50_000, lr=lr, seed=0)
        drift[lr] = universe_gap(u, train_table(u, true_link, cfg, init=u.vectors).table, true_link)
        assert drift[lr] < 5 * lr
    assert drift[0.001] < 0.8 * drift[0.002]
    wrong = InfoNCELoss(0.05)
    cfg = TrainConfig(negatives=32, dim=4, steps=200, batch=256, pairs=50_000, lr=0.001, seed=0)
    assert universe_gap(u, train_table(u, wrong, cfg, init=u.vectors).table, wrong) > 20 * drift[0.001]


def test_training_from_a_random_table_learns_the_kernel() -> None:
    u = make_universe(48, 4, kernel_law("vmf", kappa=10.0), seed=0)
    loss = InfoNCELoss(0.1)
    cfg = TrainConfig(negatives=16, dim=4, steps=300, batch=128, pairs=20_000, lr=0.05, seed=0)
    start = torch.nn.functional.normalize(torch.randn(48, 4, generator=torch.Generator().manual_seed(1)), dim=1)
    before = universe_gap(u, start.double(), loss)
    result = train_table(u, loss, cfg)
    assert universe_gap(u, result.table, loss) < 0.3 * before
    assert result.lambda_mean == 0.0 and result.beta_mean == 1.0


def _recording(base: type) -> ContrastiveLoss:
    """``base`` (a loss class) that also keeps every batch's scores it was given."""

    class Recording(base):
        def __init__(self) -> None:
            super().__init__(0.1)
            self.seen: list[torch.Tensor] = []

        def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
            self.seen.append(lay.scores.detach().clone())
            return super().loss_from_scores(lay)

    return Recording()


def test_losses_at_one_seed_share_pairs_negatives_and_the_initial_table() -> None:
    u = make_universe(32, 3, kernel_law("endpoint", beta=3.0), seed=0)
    cfg = TrainConfig(negatives=20, dim=3, steps=3, batch=16, pairs=500, lr=0.01, seed=5)
    a, b = _recording(InfoNCELoss), _recording(WeinceLoss)
    result = train_table(u, b, cfg)
    train_table(u, a, cfg)
    assert torch.equal(a.seen[0], b.seen[0])  # same first batch on the same initial table
    assert not torch.equal(a.seen[1], b.seen[1])  # then the losses' updates differ
    assert result.lambda_mean > 0  # WEINCE's λ is reported
    other = _recording(InfoNCELoss)
    train_table(u, other, TrainConfig(negatives=20, dim=3, steps=3, batch=16, pairs=500, lr=0.01, seed=6))
    assert not torch.equal(other.seen[0], a.seen[0])  # another seed, another draw


def test_batch_scores_are_the_candidates_cosines() -> None:
    table = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    anchors = torch.tensor([0, 3])
    candidates = torch.tensor([[1, 2, 2], [0, 9, 4]])
    lay = batch_scores(table, anchors, candidates)
    unit = table / table.norm(dim=1, keepdim=True)
    for i in range(2):
        for j in range(3):
            assert float(lay.scores[i, j]) == pytest.approx(float(unit[anchors[i]] @ unit[candidates[i, j]]), abs=1e-6)
    assert lay.num_negatives == 2 and lay.positive_index.tolist() == [0, 0]


def test_arms_and_settings_are_checked() -> None:
    law = kernel_law("blend", kappa=10.0, beta=3.0, lam=0.5)
    oracle = build_loss("oracle", 0.7, law)
    assert (oracle.temperature, oracle.fixed_lambda, oracle.beta_clamp) == (0.1, 0.5, (3.0, 3.0))
    assert build_loss("weince_unit", 0.2, law).beta_mode == "unit"
    assert build_loss("weince", 0.2, law).beta_mode == "ols"
    with pytest.raises(ValueError, match="loss must be one of"):
        build_loss("triplet", 0.1, law)
    for bad in ({"negatives": 0}, {"batch": 1}, {"lr": float("nan")}, {"pairs": 2.5}):
        with pytest.raises(ValueError):
            TrainConfig(**bad)


def test_an_arm_may_carry_its_loss_knobs() -> None:
    """``NAME:knob=value,...`` is the loss at τ with those knobs (numbers, ``none``, words); a knob the loss does not
    take, a value out of range, a malformed part or knobs on an arm without them stop in one line naming the arm."""
    law = kernel_law("vmf", kappa=10.0)
    assert parse_arm("hcl") == ("hcl", {})
    assert parse_arm("hcl:hcl_beta=0.5,hcl_tau_plus=0") == ("hcl", {"hcl_beta": 0.5, "hcl_tau_plus": 0.0})
    hcl = build_loss("hcl:hcl_beta=0.5", 0.2, law)
    assert (hcl.temperature, hcl.config.hcl_beta, hcl.config.hcl_tau_plus) == (0.2, 0.5, 0.1)
    assert build_loss("dcl:dcl_sigma=none", 0.1, law).config.dcl_sigma is None
    assert build_loss("dcl:dcl_sigma=0.5", 0.1, law).config.dcl_sigma == 0.5
    assert build_loss("weince:beta_mode=unit", 0.1, law).beta_mode == "unit"
    assert build_loss("hardness_infonce:hardness_strength=5", 0.1, law).config.hardness_strength == 5.0
    assert build_loss("sigmoid:sigmoid_bias=-5", 0.1, law).learned_values()["sigmoid_b"] == -5.0
    for arm, message in [
        ("hcl:foo=1", "loss arm 'hcl:foo=1': .*unexpected keyword argument 'foo'"),
        ("hcl:hcl_beta=-1", "hcl_beta must be a finite number >= 0, got -1.0"),
        ("hcl:hcl_beta", "loss arm 'hcl:hcl_beta': expected NAME or NAME:knob=value"),
        ("hcl:hcl_beta=1,hcl_beta=2", "expected NAME or NAME:knob=value"),
        ("oracle:tau=1", "loss arm 'oracle:tau=1': oracle takes no knobs here"),
        ("triplet:x=1", "loss must be one of"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_loss(arm, 0.1, law)


def test_an_encoder_embeds_items_it_never_saw() -> None:
    """Trained on half of the items, the encoder's held-out search beats an untrained encoder's and the seeded
    initial weights are the same for every loss."""
    from weince_lab.simulation.learning import Encoder, observations, train_encoder
    from weince_lab.simulation.search import top1_agreement

    u = make_universe(96, 4, kernel_law("vmf", kappa=10.0), seed=0)
    obs = observations(u, 16, 0.05, seed=0)
    assert torch.equal(obs, observations(u, 16, 0.05, seed=0)) and obs.shape == (96, 16)
    seen, held = torch.arange(48), torch.arange(48, 96)
    loss = InfoNCELoss(0.1)
    cfg = TrainConfig(negatives=16, dim=4, steps=300, batch=64, pairs=5000, lr=0.01, seed=0)
    encoder, result = train_encoder(u.subset(seen), obs[seen], loss, cfg, hidden=32)
    untrained = Encoder(16, 32, 4, seed=0)
    assert all(
        torch.equal(a, b)
        for a, b in zip(untrained.state_dict().values(), Encoder(16, 32, 4, 0).state_dict().values(), strict=True)
    )
    held_u = u.subset(held)
    with torch.no_grad():
        after = torch.nn.functional.normalize(encoder(obs[held]).double(), dim=1)
        before = torch.nn.functional.normalize(untrained(obs[held]).double(), dim=1)
    assert universe_gap(held_u, after, loss) < 0.5 * universe_gap(held_u, before, loss)
    assert top1_agreement(held_u, after) > top1_agreement(held_u, before) + 0.1
    assert result.table.shape == (48, 4)


def test_a_subset_is_the_kernel_restricted_to_its_items() -> None:
    u = make_universe(12, 3, kernel_law("endpoint", beta=2.0), seed=1)
    items = torch.tensor([0, 3, 5, 9])
    sub = u.subset(items)
    m = u.transition()[items][:, items]
    assert torch.allclose(sub.transition(), m / m.sum(dim=1, keepdim=True), atol=1e-12)


def test_the_link_arms_learn_their_link_and_are_scored_under_it() -> None:
    """The issue-43 arms: the learned link's (α, b) are trained with the table (they leave their start (1/τ, 0) and
    are reported), ``learned_link_b`` keeps a = 1/τ, and the universe KL reads each arm's current link: the
    model's law over candidates is softmax(a·s + b·u) for the link losses, softmax(2·artanh s) without τ."""
    from simcse_weince.losses.logits import shortfall
    from weince_lab.simulation.search import model_log_posterior

    law = kernel_law("endpoint", beta=3.0)
    u = make_universe(48, 4, law, seed=0)
    cfg = TrainConfig(negatives=16, dim=4, steps=60, batch=64, pairs=5_000, lr=0.05, seed=0)
    scores = torch.rand(5, 7) * 1.8 - 0.9
    for name in ("learned_link", "learned_link_b", "learned_temperature", "profiled_link"):
        loss = build_loss(name, 0.2, law)
        learned = train_table(u, loss, cfg).learned
        assert learned["link_a"] != 5.0 or name == "learned_link_b", name
        assert (learned["link_a"] == 5.0) == (name == "learned_link_b"), name
        a, b = loss.coefficients()
        assert learned == ({"link_a": a} if name == "learned_temperature" else {"link_a": a, "link_b": b})
        expected = (a * scores.double() + b * shortfall(scores.double())).log_softmax(dim=1)
        torch.testing.assert_close(model_log_posterior(loss, scores), expected, rtol=1e-5, atol=1e-6)
    arctanh = build_loss("arctanh", 0.2, law)
    expected = (torch.log1p(scores.double()) - torch.log1p(-scores.double())).log_softmax(dim=1)
    torch.testing.assert_close(model_log_posterior(arctanh, scores), expected, rtol=1e-5, atol=1e-6)
    assert train_table(u, arctanh, cfg).learned == {}


def test_the_field_losses_are_arms() -> None:
    """The field's losses (issue 55) train a table at τ and their defaults; the sigmoid loss's t and b are trained
    with it and reported, and its search law is softmax(t·s + b) (b cancels)."""
    from weince_lab.simulation.learning import FIELD_LOSSES
    from weince_lab.simulation.search import model_log_posterior

    law = kernel_law("endpoint", beta=3.0)
    u = make_universe(48, 4, law, seed=0)
    cfg = TrainConfig(negatives=16, dim=4, steps=60, batch=64, pairs=5_000, lr=0.05, seed=0)
    scores = torch.rand(5, 7) * 1.8 - 0.9
    for name in FIELD_LOSSES:
        loss = build_loss(name, 0.2, law)
        result = train_table(u, loss, cfg)
        assert torch.isfinite(result.table).all() and loss.temperature == 0.2, name
        if name == "sigmoid":
            assert result.learned == loss.learned_values() and result.learned["sigmoid_t"] != 5.0
            expected = (result.learned["sigmoid_t"] * scores.double()).log_softmax(dim=1)
        else:
            assert result.learned == {}, name
            expected = (scores.double() / 0.2).log_softmax(dim=1)
        torch.testing.assert_close(model_log_posterior(loss, scores), expected, rtol=1e-5, atol=1e-6)
