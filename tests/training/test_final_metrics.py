"""``ContrastiveTrainer.metrics_of_final_weights``: the training's own evaluation of the weights the model holds
after training is reused (not scored again) only when it evaluated exactly those weights in fp32."""

from __future__ import annotations

from types import SimpleNamespace

from simcse_weince.training.trainer import ContrastiveTrainer


def _trainer(evaluated: dict, step: int, best: str | None, load_best: bool = True, bf16: bool = False):
    args = SimpleNamespace(fp16=False, bf16=bf16, load_best_model_at_end=load_best)
    state = SimpleNamespace(global_step=step, best_model_checkpoint=best)
    return SimpleNamespace(args=args, state=state, evaluated=evaluated)


def final(trainer) -> dict | None:
    return ContrastiveTrainer.metrics_of_final_weights(trainer)


def test_the_best_checkpoints_metrics_when_the_best_was_loaded() -> None:
    evaluated = {20: {"stsb_spearman": 81.0}, 40: {"stsb_spearman": 80.5}}
    assert final(_trainer(evaluated, 40, "out/checkpoint-20")) == {"stsb_spearman": 81.0}


def test_the_last_steps_metrics_without_best_model_loading() -> None:
    evaluated = {20: {"stsb_spearman": 81.0}, 40: {"stsb_spearman": 80.5}}
    assert final(_trainer(evaluated, 40, "out/checkpoint-20", load_best=False)) == {"stsb_spearman": 80.5}
    assert final(_trainer(evaluated, 40, None)) == {"stsb_spearman": 80.5}  # no checkpoint chosen: the last step


def test_none_when_those_weights_were_not_evaluated_in_this_session() -> None:
    assert final(_trainer({}, 40, "out/checkpoint-20")) is None  # a resumed run's best came from an earlier session
    assert final(_trainer({20: {"m": 1.0}}, 30, None)) is None  # the last step was not evaluated


def test_none_under_mixed_precision_whose_evaluation_ran_in_the_training_autocast() -> None:
    assert final(_trainer({20: {"m": 1.0}}, 20, "out/checkpoint-20", bf16=True)) is None
