"""Run-time health (``simcse_weince.training.health`` and the trainer's hooks): a non-finite selection metric, a
non-finite loss state (at a step, before a save, on load) and a gradient that stays exactly 0 each stop the run in
one ``RunFault`` / ``FileFault`` naming the cause and the last good checkpoint.

The runs are :mod:`tests.training.scalar_loss_run`'s: a linear encoder, 16 rows a step, checkpoints every 3 steps.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from simcse_weince.core.file_errors import FileFault
from simcse_weince.losses.layout import ScoreMatrix
from simcse_weince.training.health import (
    DEGENERATE_STEPS,
    RunFault,
    degenerate_fault,
    last_good_checkpoint,
    metric_fault,
    metric_name,
    non_finite,
    state_faults,
)
from simcse_weince.training.trainer import LOSS_STATE_FILE
from tests.training.scalar_loss_run import ScaledInfoNCE, trainer


# ---- the pure checks ------------------------------------------------------------------------------------------
def test_state_faults_names_each_non_finite_tensor_with_its_first_bad_value() -> None:
    state = {
        "a": torch.tensor(1.0),
        "b": torch.tensor([0.5, float("inf"), float("nan")]),
        "steps": torch.tensor(3),  # integers are not checked
        "c": torch.tensor(float("nan"), dtype=torch.float64),
    }
    assert state_faults(state) == ["b = inf", "c = nan"]
    assert state_faults({"a": torch.zeros(4)}) == []


def test_the_selection_metric_must_be_finite_and_only_it_stops() -> None:
    metrics = {"sts_spearman": float("nan"), "sts_pearson": 0.3}
    assert metric_name("eval_sts_spearman") == "sts_spearman" and metric_name("sts_spearman") == "sts_spearman"
    cause = metric_fault(metrics, "sts_spearman", 40)
    assert cause is not None and cause.startswith("the validation metric sts_spearman is nan at step 40")
    assert metric_fault(metrics, "sts_pearson", 40) is None
    assert metric_fault(metrics, None, 40) is None  # nothing selects: a warning, not a stop
    assert non_finite(metrics | {"x": -math.inf}) == {"sts_spearman": metrics["sts_spearman"], "x": -math.inf}


def test_a_zero_gradient_stops_only_after_the_stated_number_of_steps() -> None:
    assert degenerate_fault(DEGENERATE_STEPS - 1, 9, 0.0, {}) is None
    cause = degenerate_fault(DEGENERATE_STEPS, 9, 0.0, {"link_a": 1e15, "link_b": 0.0})
    assert cause == (
        f"the encoder's gradient has been exactly 0 for {DEGENERATE_STEPS} steps up to step 9 (the loss: 0): the run "
        "has stopped learning; the loss's learned values are link_a = 1e+15, link_b = 0: lower their cap or "
        "--loss_learning_rate"
    )


# ---- in a run -------------------------------------------------------------------------------------------------
class ZeroGradientLoss(ScaledInfoNCE):
    """InfoNCE times 0: finite, and every gradient exactly 0 (what a one-hot float32 softmax gives)."""

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        return 0.0 * super().loss_from_scores(lay)


class NanLoss(ScaledInfoNCE):
    """InfoNCE times NaN: the embeddings finite, the loss not (the Trainer's log would average it away)."""

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        return float("nan") * super().loss_from_scores(lay)


class PoisonAt(TrainerCallback):
    """At the end of step ``step``, set the loss's scalar to NaN (a diverged loss parameter)."""

    def __init__(self, t, step: int) -> None:
        self.t, self.step = t, step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():
                self.t.contrastive_loss.log_scale.fill_(float("nan"))


def test_a_gradient_that_stays_zero_stops_the_run_before_a_checkpoint_of_the_spell_is_offered(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run", max_steps=12)
    t.contrastive_loss = ZeroGradientLoss(0.5)
    with pytest.raises(RunFault) as err:
        t.train()
    assert t.state.global_step == DEGENERATE_STEPS - 1  # stopped before the optimizer step of the 5th zero step
    text = str(err.value)
    assert f"exactly 0 for {DEGENERATE_STEPS} steps up to step {DEGENERATE_STEPS}" in text
    # checkpoint-3 was saved during the spell (from step 1): not offered
    assert (tmp_path / "run" / "checkpoint-3").is_dir()
    assert "no good checkpoint was saved before it" in text


def test_a_non_finite_loss_with_finite_embeddings_stops_the_step(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run", max_steps=6)
    t.contrastive_loss = NanLoss(0.5)
    with pytest.raises(RunFault, match=r"^the loss is nan at step 1 although the embeddings are finite"):
        t.train()
    assert t.state.global_step == 0


def test_a_loss_state_that_turns_nan_stops_the_next_step_and_is_never_saved(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run", max_steps=12)
    t.add_callback(PoisonAt(t, 5))
    with pytest.raises(RunFault) as err:
        t.train()
    text = str(err.value)
    assert text.startswith("the loss's state is not finite at step 6 (log_scale = nan)"), text
    assert f"the last good checkpoint is {tmp_path / 'run' / 'checkpoint-3'}" in text


def test_a_loss_state_that_turns_nan_at_a_save_step_is_not_saved(tmp_path: Path) -> None:
    t = trainer(tmp_path / "run", max_steps=12)
    t.add_callback(PoisonAt(t, 6))
    with pytest.raises(RunFault, match=r"not finite before saving checkpoint-6 \(log_scale = nan\)"):
        t.train()
    assert not (tmp_path / "run" / "checkpoint-6" / LOSS_STATE_FILE).exists()


@pytest.fixture(scope="module")
def six_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("health") / "run"
    trainer(out).train()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-6"]
    return out


@pytest.mark.parametrize("damage", ["nan", "garbage"])
def test_a_resume_from_a_bad_loss_state_names_it_and_offers_the_earlier_good_checkpoint(
    six_steps: Path, tmp_path: Path, damage: str
) -> None:
    import shutil

    out = tmp_path / "run"
    shutil.copytree(six_steps, out)
    state_file = out / "checkpoint-6" / LOSS_STATE_FILE
    if damage == "nan":
        torch.save({"log_scale": torch.tensor(float("nan"))}, state_file)
    else:
        state_file.write_bytes(b"not a torch file")
    assert last_good_checkpoint(out) == out / "checkpoint-3"
    t = trainer(out, max_steps=9)
    with pytest.raises(FileFault) as err:
        t.train(resume_from_checkpoint=str(out / "checkpoint-6"))
    text = str(err.value)
    assert str(state_file) in text
    assert text.endswith(
        f"the last good checkpoint is {out / 'checkpoint-3'}: fix the cause, then resume with "
        f"--resume_from_checkpoint {out / 'checkpoint-3'}"
    )
    if damage == "nan":
        assert "is not finite (log_scale = nan)" in text


def test_a_nan_selection_metric_stops_at_the_first_evaluation(tmp_path: Path) -> None:
    t = trainer(
        tmp_path / "run", max_steps=12, eval_strategy="steps", eval_steps=3, load_best_model_at_end=True,
        metric_for_best_model="m", greater_is_better=True, evaluator=lambda model: {"m": float("nan"), "other": 1.0},
    )  # fmt: skip
    with pytest.raises(RunFault, match=r"^the validation metric m is nan at step 3, so the run cannot pick"):
        t.train()
    assert not (tmp_path / "run" / "checkpoint-3").exists()  # the evaluation comes before the step's save


def test_a_nan_metric_that_selects_nothing_is_warned_about_once(tmp_path: Path, caplog) -> None:
    evaluator = lambda model: {"m": 1.0, "other": float("nan")}  # noqa: E731
    t = trainer(tmp_path / "run", max_steps=6, eval_strategy="steps", eval_steps=2, evaluator=evaluator)
    with caplog.at_level("WARNING", logger="simcse_weince.training.trainer"):
        t.train()
    warned = [r.getMessage() for r in caplog.records if "validation metric other" in r.getMessage()]
    assert warned == ["the validation metric other is nan at step 2 (reported as null)"]


def test_an_engine_that_reports_no_gradient_norm_is_not_watched(tmp_path: Path, monkeypatch) -> None:
    from transformers import Trainer

    monkeypatch.setattr(Trainer, "_get_grad_norm", lambda self, model, grad_norm=None: None)
    t = trainer(tmp_path / "run", max_steps=DEGENERATE_STEPS + 1)
    t.contrastive_loss = ZeroGradientLoss(0.5)
    t.train()  # no norm, no verdict: it trains to the end
    assert t.state.global_step == DEGENERATE_STEPS + 1 and t._zero_grad_steps == 0
