"""A loss may own parameters (issue 42): a loss of one trainable scalar (``scalar_loss_run.ScaledInfoNCE``, a test
loss, not the package's) trains in its own optimizer group, resumes bitwise from a checkpoint, is exported with
the model, and trains the same in 2 processes as in 1."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tests.helpers import REPO, Interrupt, StopAt, accelerate_launch
from tests.training.scalar_loss_run import ScaledInfoNCE, outcome, trainer


def test_the_scalar_trains_in_its_own_group_without_weight_decay(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run")
    t.train()
    theta = t.contrastive_loss.log_scale
    assert theta.item() != 0.0  # it moved from its start
    groups = [g for g in t.optimizer.param_groups if any(p is theta for p in g["params"])]
    assert len(groups) == 1 and groups[0]["params"] == [theta]
    assert groups[0]["lr"] == pytest.approx(0.2) and groups[0]["weight_decay"] == 0.0
    assert all(g["lr"] == pytest.approx(0.05) for g in t.optimizer.param_groups if g is not groups[0])
    logged = outcome(t)["logged_scale"]  # the loss's own diagnostic is logged (registry's diagnostic_keys)
    assert len(logged) == 6 and logged[0] == pytest.approx(1.0) and logged[-1] != pytest.approx(1.0)


def test_a_resumed_run_equals_an_uninterrupted_one_bitwise(tmp_path: Path) -> None:
    whole = trainer(tmp_path / "whole")
    whole.train()
    cut = trainer(tmp_path / "cut")
    cut.add_callback(StopAt(4))  # after step 4: checkpoint-3 is the last complete one
    with pytest.raises(Interrupt):
        cut.train()
    saved = torch.load(tmp_path / "cut" / "checkpoint-3" / "loss_state.pt", weights_only=True)
    assert set(saved) == {"log_scale"} and saved["log_scale"].item() != 0.0
    resumed = trainer(tmp_path / "cut")
    resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-3"))
    assert torch.equal(resumed.contrastive_loss.log_scale, whole.contrastive_loss.log_scale)
    for (name, a), b in zip(resumed.model.state_dict().items(), whole.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    # the resume read θ back: a run restarted at checkpoint-3 with θ at its start ends elsewhere
    fresh = trainer(tmp_path / "fresh")
    fresh.train()
    assert torch.equal(fresh.contrastive_loss.log_scale, whole.contrastive_loss.log_scale)  # deterministic


def test_the_parameters_are_exported_with_the_model(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run", max_steps=2)
    t.train()
    folder = tmp_path / "model"
    folder.mkdir()
    t.export_loss_parameters(folder)
    state = torch.load(folder / "loss_state.pt", weights_only=True)
    assert torch.equal(state["log_scale"], t.contrastive_loss.log_scale.detach())
    config = json.loads((folder / "loss_config.json").read_text(encoding="utf-8"))
    again = ScaledInfoNCE(**{k: v for k, v in config.items() if k != "name"})
    again.load_state_dict(state)
    assert config["name"] == "scaled_infonce" and again.log_scale.item() == t.contrastive_loss.log_scale.item()


LINK_LOSSES = ("learned_link", "profiled_link")


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``accelerate launch`` of 2 processes running the scalar loss and the link losses in turn (one start-up
    for the three), their outcomes in the returned folder."""
    out = tmp_path_factory.mktemp("two_processes")
    script = str(REPO / "tests" / "training" / "scalar_loss_run.py")
    accelerate_launch(2, [script, str(out), ScaledInfoNCE.name, *LINK_LOSSES, "sigmoid"])
    return out


def test_two_processes_train_it_as_one(tmp_path: Path, two_process_runs: Path) -> None:
    """The global batch is the same (16 rows: 16 in one process, 8 in each of two, candidates gathered), the
    model's gradients are DDP-averaged and θ's averaged by the trainer: θ after 6 steps agrees to float rounding.
    Without θ's averaging each process would step on its own half's gradient and the two θ would differ."""
    single = trainer(tmp_path / "one")
    single.train()
    one = outcome(single)
    two = json.loads((two_process_runs / "outcome_scaled_infonce_2.json").read_text(encoding="utf-8"))
    assert one["log_scale"] != 0.0
    assert math.isclose(two["log_scale"], one["log_scale"], rel_tol=1e-5, abs_tol=1e-6)
    for name, values in one["weights"].items():
        assert two["weights"][name] == pytest.approx(values, rel=1e-4, abs=1e-6), name


# ---- the registry's link losses (issue 43) under the same runs -------------------------------------------------


@pytest.mark.parametrize("name", LINK_LOSSES)
def test_a_link_loss_resumes_bitwise_and_is_exported_with_its_link(tmp_path: Path, name: str) -> None:
    """The learned link's (α, b) parameters, the profiled link's running θ buffer: saved in checkpoint-3, read
    back on resume (the resumed run equals the uninterrupted one bit for bit), exported with ``loss_config.json``
    and rebuilt from it, and reported on the card and in the run summary."""
    from simcse_weince.losses import loss_class
    from simcse_weince.training.run import card_facts

    whole = trainer(tmp_path / "whole", loss=name)
    whole.train()
    link = whole.contrastive_loss.coefficients()
    assert link != (2.0, 0.0)  # it moved from its start (1/τ, 0)
    cut = trainer(tmp_path / "cut", loss=name)
    cut.add_callback(StopAt(4))
    with pytest.raises(Interrupt):
        cut.train()
    resumed = trainer(tmp_path / "cut", loss=name)
    resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-3"))
    assert outcome(resumed) | {"logged_scale": None} == outcome(whole) | {"logged_scale": None}
    folder = tmp_path / "model"
    folder.mkdir()
    whole.export_loss_parameters(folder)
    config = json.loads((folder / "loss_config.json").read_text(encoding="utf-8"))
    again = loss_class(config.pop("name"))(**config)
    again.load_state_dict(torch.load(folder / "loss_state.pt", weights_only=True))
    assert again.coefficients() == link
    assert card_facts(whole, whole.contrastive_loss)["loss_config"]["learned"] == {"link_a": link[0], "link_b": link[1]}
    summary = whole.contrastive_loss.run_summary(whole.state.log_history)
    assert len(summary["link_trajectory"]) == 6 and summary["link_trajectory"][0][1] != summary["link_a_final"]


@pytest.mark.parametrize("name", LINK_LOSSES)
def test_two_processes_fit_the_link_as_one(tmp_path: Path, name: str, two_process_runs: Path) -> None:
    """(a, b) and the weights after 6 steps in 2 processes equal 1 process's: the learned link's gradients are
    averaged by the trainer, the profiled link's Newton step sums its NLL, gradient and Hessian over the processes
    (without that sum each process fits its own half: θ then differs from one process's by 27 %; float32 rounding of
    the gathered scores moves it by about 1e-5, amplified by six Newton steps, whose line search can halve its step
    on one side of a rounding and not the other: hence the tolerances, 1e-3 relative and 1e-4 absolute)."""
    single = trainer(tmp_path / "one", loss=name)
    single.train()
    one = outcome(single)
    two = json.loads((two_process_runs / f"outcome_{name}_2.json").read_text(encoding="utf-8"))
    for key, values in one["loss_state"].items():
        assert two["loss_state"][key] == pytest.approx(values, rel=1e-3, abs=1e-5), key
    for key, values in one["weights"].items():
        assert two["weights"][key] == pytest.approx(values, rel=1e-3, abs=1e-4), key


def test_the_gradient_cache_trains_the_learned_link_as_the_full_graph(tmp_path: Path) -> None:
    """With ``gradient_cache_chunk_size`` the learned link's (α, b) get the uncached run's gradients: after 6
    steps in chunks of 4 rows, (α, b) and the weights equal the uncached run's to float rounding."""
    whole = trainer(tmp_path / "whole", loss="learned_link")
    whole.train()
    cached = trainer(tmp_path / "cached", loss="learned_link", gradient_cache_chunk_size=4)
    cached.train()
    assert whole.contrastive_loss.coefficients() != (2.0, 0.0)
    for key, values in outcome(whole)["loss_state"].items():
        assert outcome(cached)["loss_state"][key] == pytest.approx(values, rel=1e-5, abs=1e-7), key
    for key, values in outcome(whole)["weights"].items():
        assert outcome(cached)["weights"][key] == pytest.approx(values, rel=1e-4, abs=1e-5), key


# ---- the sigmoid loss's t and b (issue 55) ------------------------------------------------------------------------


def test_the_sigmoid_loss_resumes_bitwise_and_exports_t_and_b(tmp_path: Path) -> None:
    """SigLIP's t and b: trained in the loss's own group, saved in checkpoint-3 and read back on resume (bitwise
    the uninterrupted run), exported with ``loss_config.json`` and rebuilt from it by name."""
    from simcse_weince.losses import make_loss

    whole = trainer(tmp_path / "whole", loss="sigmoid")
    whole.train()
    learned = whole.contrastive_loss.learned_values()
    assert learned["sigmoid_t"] != pytest.approx(2.0) and learned["sigmoid_b"] != pytest.approx(-10.0)  # they moved
    cut = trainer(tmp_path / "cut", loss="sigmoid")
    cut.add_callback(StopAt(4))
    with pytest.raises(Interrupt):
        cut.train()
    assert set(torch.load(tmp_path / "cut" / "checkpoint-3" / "loss_state.pt", weights_only=True)) == {"log_t", "b"}
    resumed = trainer(tmp_path / "cut", loss="sigmoid")
    resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-3"))
    assert outcome(resumed) == outcome(whole)
    folder = tmp_path / "model"
    folder.mkdir()
    whole.export_loss_parameters(folder)
    config = json.loads((folder / "loss_config.json").read_text(encoding="utf-8"))
    again = make_loss(config.pop("name"), **config)
    again.load_state_dict(torch.load(folder / "loss_state.pt", weights_only=True))
    assert again.learned_values() == learned
    logged = [e["sigmoid_b"] for e in whole.state.log_history if "sigmoid_b" in e]
    assert len(logged) == 6 and logged[0] == pytest.approx(-10.0)


def test_two_processes_train_the_sigmoid_loss_as_one(tmp_path: Path, two_process_runs: Path) -> None:
    """t and b after 6 steps in 2 processes (candidates gathered, t and b's gradients averaged) equal 1 process's."""
    single = trainer(tmp_path / "one", loss="sigmoid")
    single.train()
    one = outcome(single)
    two = json.loads((two_process_runs / "outcome_sigmoid_2.json").read_text(encoding="utf-8"))
    for key, values in one["loss_state"].items():
        assert two["loss_state"][key] == pytest.approx(values, rel=1e-5, abs=1e-6), key
    for key, values in one["weights"].items():
        assert two["weights"][key] == pytest.approx(values, rel=1e-4, abs=1e-6), key
