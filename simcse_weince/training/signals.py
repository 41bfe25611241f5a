"""Clean stops: ``SIGTERM`` (what job schedulers send before preemption) saves a checkpoint at the next step
boundary and stops training, so a preempted job loses at most one step."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class SaveAndStopOnSigterm(TrainerCallback):
    """While training, ``SIGTERM`` sets a flag; the next step's end saves a checkpoint and stops the loop.

    The handler is installed at ``on_train_begin`` (main thread only: Python delivers signals there) and the
    previous one restored at ``on_train_end``. ``stopped`` tells every process afterwards that training stopped
    because of the signal (on any process), not because it was done.
    """

    def __init__(self) -> None:
        self.received: int | None = None  # the signal, on the process it reached
        self.stopped = False  # training stopped for a signal that reached this process or another one
        self._previous: Any = None

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum
        logger.warning("SIGTERM received: saving a checkpoint at the end of this step, then stopping")

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)

    def on_step_end(self, args, state, control, **kwargs):
        if self.any_process_received(args.device):
            self.stopped = True
            control.should_save = True
            control.should_training_stop = True
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
        self.restore()

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
