"""Clean stops: ``SIGTERM`` (what job schedulers send before preemption) never costs more than the steps since it.

For the whole run (:func:`~simcse_weince.training.run.start_run` installs
:class:`~simcse_weince.core.stopping.TerminationHandler` on the main thread; every command does too, in
:func:`~simcse_weince.cli.errors.run_command`) a ``SIGTERM`` is one of two things:

* while the training loop runs (:class:`SaveAndStopOnSigterm` defers it from ``on_train_begin`` to
  ``on_train_end``): a flag; the next step's end saves a checkpoint and stops the loop. That checkpoint is kept
  whatever ``save_total_limit`` and ``load_best_model_at_end`` say: the Trainer's rotation (during the save) and
  its end-of-training clean-up (with ``save_total_limit: 1``, every checkpoint but the best one) are turned off
  for the stop, so a preempted job loses at most one step. The same holds for the last step's checkpoint: it is
  kept until the model is exported (:func:`~simcse_weince.training.ending.finish_run` then applies the limit,
  :func:`~simcse_weince.training.run_folder.apply_save_limit`), so that a stop during the export resumes from it;
* in any other phase (reading and tokenising, loading, exporting, scoring): :class:`Terminated` is raised at
  once, a ``KeyboardInterrupt`` like Ctrl-C, so that every clean-up of an interrupted phase runs; the run then
  ends in one ``stopped:`` line saying what was kept and how to finish.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback

from simcse_weince.core.stopping import Terminated, TerminationHandler

__all__ = ["SaveAndStopOnSigterm", "Terminated", "TerminationHandler"]

logger = logging.getLogger(__name__)


class SaveAndStopOnSigterm(TrainerCallback):
    """While training, ``SIGTERM`` sets a flag (through ``handler``, the run's :class:`TerminationHandler`, or one
    of its own installed for the loop); the next step's end saves a checkpoint and stops the loop, and that
    checkpoint survives the Trainer's rotation.

    ``stopped`` tells every process afterwards that training stopped because of the signal (on any process), not
    because it was done.
    """

    def __init__(self, handler: TerminationHandler | None = None) -> None:
        self.handler = handler
        self._own: TerminationHandler | None = None
        self.stopped = False  # training stopped for a signal that reached this process or another one
        self._limit: Any = None  # the run's save_total_limit, set aside while the stop's checkpoint is saved
        self._set_aside = False

    @property
    def received(self) -> int | None:
        """The signal, on the process it reached (``None`` elsewhere)."""
        active = self.handler or self._own
        return active.received if active is not None else None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.handler is None:
            self._own = TerminationHandler().__enter__()
        (self.handler or self._own).deferred = True

    def on_step_end(self, args, state, control, **kwargs):
        if self.any_process_received(args.device):
            self.stopped = True
            control.should_save = True
            control.should_training_stop = True
        last = state is not None and 0 < state.max_steps <= state.global_step
        if (self.stopped or last) and not self._set_aside:  # no rotation may delete the checkpoint saved now
            self._limit, self._set_aside = args.save_total_limit, True
            args.save_total_limit = None
        return control

    def any_process_received(self, device) -> bool:
        """Whether this process or any other got the signal: all processes save and stop at the same step (a
        checkpoint save is collective), whichever of them the signal reached first."""
        received = self.received is not None
        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return received
        flag = torch.tensor([float(received)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # one scalar per step, only in multi-process runs
        return bool(flag.item())

    def on_train_end(self, args, state, control, **kwargs):
        self.restore(args)

    def restore(self, args: Any = None) -> None:
        """The run's handler back to raising (or this callback's own removed), ``save_total_limit`` as it was."""
        if self.handler is not None:
            self.handler.deferred = False
        if self._own is not None:
            self._own.__exit__()
            self._own = None
        if self._set_aside and args is not None:
            args.save_total_limit = self._limit
            self._set_aside = False
