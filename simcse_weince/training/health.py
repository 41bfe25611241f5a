"""Run-time health of a training run: what selects a checkpoint or learns with the encoder stays sane, or the run stops.

Three properties, checked while the run trains (the trainer's hooks call these pure functions):

* **the selection metric is finite.** ``metric_for_best_model`` decides which checkpoint is kept; a NaN never
  compares greater, so a run whose dev metric is NaN at every evaluation keeps no best checkpoint, exports its
  last weights as if chosen, and writes ``best_metric: -Infinity``. A correlation is NaN when the model's
  similarities or the gold scores are constant over the dev rows. A non-finite selection metric stops the run; a
  non-finite metric that selects nothing is warned about once;
* **the loss's state is finite**: its parameters and running statistics (the link's (a, b), the top-M term's
  β_t), checked when a checkpoint is loaded, before every step and before every save, so that a checkpoint never
  holds a state that poisons the next step (which then surfaced as "non-finite embeddings", blaming the encoder);
* **the run still learns**: an encoder gradient that is exactly 0 for :data:`DEGENERATE_STEPS` consecutive optimizer
  steps trains nothing (a learned link whose slope ran to 10^15 under a cap of 10^30: the softmax is one-hot in
  float32, the loss is exactly 0 and every gradient underflows). The run stops.

Each stop is one line naming the cause and the last good checkpoint: the newest complete checkpoint saved before
the fault began whose loss state is finite (:func:`last_good_checkpoint`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from simcse_weince.training.run_folder import complete_checkpoints, step_of

DEGENERATE_STEPS = 5  # consecutive optimizer steps with an exactly-zero encoder gradient that stop a run
LOSS_STATE_FILE = "loss_state.pt"


class RunFault(ValueError):
    """A run stopped because a value it selects, reports or learns with is not sane (the message is one line: the
    cause, the value, and the last good checkpoint)."""


def metric_name(metric: str | None) -> str | None:
    """``metric_for_best_model`` without the Trainer's ``eval_`` prefix (``None`` stays ``None``)."""
    return None if metric is None else metric.removeprefix("eval_")


def non_finite(values: Mapping[str, float]) -> dict[str, float]:
    """The entries of ``values`` that are NaN or ±Inf."""
    return {k: v for k, v in values.items() if not math.isfinite(float(v))}


def state_faults(state: Mapping[str, torch.Tensor]) -> list[str]:
    """``name = value`` for every floating tensor of a loss's ``state_dict`` holding NaN or Inf (the first bad
    value of a tensor with several), in the dict's order; empty when all are finite."""
    bad = []
    for name, tensor in state.items():
        if not torch.is_tensor(tensor) or not tensor.is_floating_point():
            continue
        finite = torch.isfinite(tensor)
        if not bool(finite.all()):
            first = tensor.detach().reshape(-1)[~finite.reshape(-1)][0].item()
            bad.append(f"{name} = {first}")
    return bad


def saved_state_ok(checkpoint: Path) -> bool:
    """Whether ``checkpoint``'s ``loss_state.pt`` (if it has one) reads and holds finite values only."""
    path = Path(checkpoint) / LOSS_STATE_FILE
    if not path.is_file():
        return True
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # a damaged file: not a good checkpoint, whatever the reason
        return False
    return isinstance(state, dict) and not state_faults(state)


def last_good_checkpoint(output_dir: str | Path, before_step: int | None = None) -> Path | None:
    """The newest complete checkpoint of ``output_dir`` (at a step below ``before_step``, when given) whose loss
    state is finite, or ``None``."""
    found: Iterable[Path] = complete_checkpoints(output_dir)  # newest first
    for ckpt in found:
        if (before_step is None or step_of(ckpt) < before_step) and saved_state_ok(ckpt):
            return ckpt
    return None


def go_on(output_dir: str | Path, before_step: int | None = None) -> str:
    """What a stopped run says of its checkpoints: the last good one and how to resume from it, or that there is
    none."""
    good = last_good_checkpoint(output_dir, before_step)
    if good is None:
        return "no good checkpoint was saved before it, so start again with --overwrite_output_dir true once fixed"
    return f"the last good checkpoint is {good}: fix the cause, then resume with --resume_from_checkpoint {good}"


def metric_fault(metrics: Mapping[str, float], selected: str | None, step: int) -> str | None:
    """The cause, when the selection metric ``selected`` (a key of ``metrics``) is not finite; else ``None``."""
    if selected is None or selected not in metrics or math.isfinite(float(metrics[selected])):
        return None
    return (
        f"the validation metric {selected} is {float(metrics[selected])} at step {step}, so the run cannot pick its "
        "best checkpoint (a correlation is NaN when the model's similarities or the gold scores are constant over "
        "the dev rows: check the validation file's rows)"
    )


def learned_text(learned: Mapping[str, float]) -> str:
    """A loss's learned values for a message (``link_a = 1e+15, link_b = 0``; empty when it has none)."""
    return ", ".join(f"{k} = {v:g}" for k, v in learned.items())


def degenerate_fault(zero_steps: int, step: int, loss: float | None, learned: Mapping[str, float]) -> str | None:
    """The cause, when the encoder's gradient has been exactly 0 for ``zero_steps`` >= :data:`DEGENERATE_STEPS`
    consecutive optimizer steps (the norm the Trainer computes before each step: over all processes, so every
    process decides alike); else ``None``. ``loss``: this process's last loss; ``learned``: the loss's learned
    values, named in the message (they are what usually ran away)."""
    if zero_steps < DEGENERATE_STEPS:
        return None
    values = learned_text(learned)
    shown = "" if loss is None else f" (the loss: {loss:g})"
    return (
        f"the encoder's gradient has been exactly 0 for {zero_steps} steps up to step {step}{shown}: the run has "
        "stopped learning"
        + (f"; the loss's learned values are {values}: lower their cap or --loss_learning_rate" if values else "")
    )
