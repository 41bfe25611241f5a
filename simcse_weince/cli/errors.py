"""How the commands end on an expected error or a stop: one line on stderr, no traceback, a non-zero exit.

Expected errors are the ones a user can fix: a bad setting (``ValueError`` and its subclasses, such as
``ConfigError``), a missing or unreadable file (``OSError``), a model that cannot be found. A stop (Ctrl-C,
``SIGTERM``) ends with exit code 130 and one line saying what was kept (:class:`Stopped`, raised by the command
once it has kept what it could). Set ``SIMCSE_WEINCE_DEBUG=1`` to get the traceback instead.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from simcse_weince.stopping import Stopped, Terminated, TerminationHandler

__all__ = ["EXIT_STOPPED", "EXIT_USAGE", "Stopped", "one_line", "run_command"]

DEBUG_ENV = "SIMCSE_WEINCE_DEBUG"
EXIT_USAGE = 2
EXIT_STOPPED = 130  # the shell's code for a process ended by SIGINT


# torch re-raises an error of a DataLoader worker (or pin-memory thread) with the worker's whole traceback in the
# message: "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last): ..."
_WORKER_TRACEBACK = re.compile(r"Caught (\w+) in [^\n]*?\.\s*Original Traceback \(most recent call last\):")


def _final_exception(traceback_text: str, name: str) -> str:
    """The message of the last exception of a formatted traceback (after a chain: the one re-raised), without
    its type (``ValueError: `` or ``zipfile.BadZipFile: ``)."""
    lines = traceback_text.splitlines()
    head = re.compile(rf"(?:[\w.]+\.)?{re.escape(name)}(?:: |$)")
    for i in range(len(lines) - 1, -1, -1):
        found = head.match(lines[i])
        if found:
            return "\n".join([lines[i][found.end() :], *lines[i + 1 :]])
    unindented = [line for line in lines if line.strip() and not line.startswith(" ")]
    return unindented[-1] if unindented else traceback_text


def one_line(err: BaseException) -> str:
    """The error's message on one line (whitespace runs collapsed); for an error re-raised from a DataLoader
    worker, the worker's final exception line only (not its traceback)."""
    text = str(err)
    worker = _WORKER_TRACEBACK.search(text)
    if worker:
        text = _final_exception(text[worker.end() :], worker.group(1))
    text = " ".join(text.split())
    return text or type(err).__name__


def run_command(run: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> tuple[Any, int]:
    """``(run(argv), 0)``, or ``(None, code)`` after printing one ``error:`` / ``stopped:`` line. ``SIGTERM`` is
    handled as Ctrl-C is (:class:`~simcse_weince.stopping.TerminationHandler`): the command keeps what it can."""
    with TerminationHandler():
        return _run(run, argv)


def _run(run: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> tuple[Any, int]:
    try:
        return run(argv), 0
    except (ValueError, OSError) as err:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {one_line(err)}", file=sys.stderr)
        return None, EXIT_USAGE
    except Stopped as err:
        print(f"stopped: {one_line(err)}", file=sys.stderr)
        return None, EXIT_STOPPED
    except KeyboardInterrupt as err:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"stopped: {'SIGTERM' if isinstance(err, Terminated) else 'interrupted (Ctrl-C)'}", file=sys.stderr)
        return None, EXIT_STOPPED
