"""A callback that stops a training run with an exception after a given step, as a kill would."""

from __future__ import annotations

from transformers import TrainerCallback


class Interrupt(Exception):
    pass


class StopAt(TrainerCallback):
    """Raise :class:`Interrupt` at the end of step ``step`` (before that step's checkpoint is saved)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Interrupt
