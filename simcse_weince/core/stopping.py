"""How runs stop: the exception a stopped run ends with, and ``SIGTERM`` turned into an exception like Ctrl-C's
(shared by the libraries and the command layer; no heavy import)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)


class Stopped(Exception):
    """A run stopped by a signal (Ctrl-C, ``SIGTERM``) after keeping what it could; the message says what was kept
    and how to go on. The commands end with it in one ``stopped:`` line and exit code 130."""


class Terminated(KeyboardInterrupt):
    """``SIGTERM`` outside the training loop: raised where the main thread is, like Ctrl-C's ``KeyboardInterrupt``."""


class TerminationHandler:
    """The run's ``SIGTERM`` handler: raises :class:`Terminated`, or, while :attr:`deferred` (the training loop),
    only records the signal in :attr:`received` for :class:`SaveAndStopOnSigterm`.

    Use as a context manager (installed on entry, the previous handler restored on exit); off the main thread
    (where Python cannot install handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.deferred = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> TerminationHandler:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum
        if self.deferred:
            logger.warning("SIGTERM received: saving a checkpoint at the end of this step, then stopping")
            return
        raise Terminated("SIGTERM")


def stop_name(err: BaseException) -> str:
    """How a run was stopped, in words: ``SIGTERM`` or ``interrupted (Ctrl-C)``."""
    return "SIGTERM" if isinstance(err, Terminated) else "interrupted (Ctrl-C)"


@contextmanager
def kept_on_stop(kept: Callable[[], str]) -> Iterator[None]:
    """Turn a stop inside the block (Ctrl-C, or ``SIGTERM`` under :class:`TerminationHandler`) into
    :class:`Stopped` whose message says how it stopped, then ``kept()``: what was kept and how to go on
    (``SIGTERM: nothing was written; run the same command again``). ``kept`` is called at the stop, so it reads
    what the run had written by then."""
    try:
        yield
    except KeyboardInterrupt as err:
        raise Stopped(f"{stop_name(err)}: {kept()}") from err
