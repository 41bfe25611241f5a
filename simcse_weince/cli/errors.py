"""How the commands end on an expected error or a stop: one line on stderr, no traceback, a non-zero exit.

Expected errors are the ones a user can fix: a bad setting (``ValueError`` and its subclasses, such as
``ConfigError``), a missing or unreadable file (``OSError``), a model that cannot be found. A stop (Ctrl-C,
``SIGTERM``) ends with exit code 130 and one line saying what was kept (:class:`Stopped`, raised by the command
once it has kept what it could). Set ``SIMCSE_WEINCE_DEBUG=1`` to get the traceback instead.

Every command's ``main`` is :func:`command_main`: the same frame (arguments, logging, error lines, exit code).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from simcse_weince.core.stopping import Stopped, Terminated, TerminationHandler

__all__ = ["EXIT_STOPPED", "EXIT_USAGE", "Stopped", "command_main", "cut_long", "one_line", "run_command"]

DEBUG_ENV = "SIMCSE_WEINCE_DEBUG"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
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


VALUE_CHARS = 200  # a quoted value longer than this is cut in a message
RUN_CHARS = 1000  # ... and a run without spaces (longer: a path may be over 200 characters)
MESSAGE_CHARS = 2000  # ... and a whole message
# a quoted value ('...' or "...", as repr writes it) over VALUE_CHARS, or a run without spaces over RUN_CHARS; a
# quote opens after a space or bracket and closes before one or a stop, so that the apostrophes of words (the
# file's ... model's) never pair up around a part of the message
_OPEN, _CLOSE = r"(?<![^\s(\[{=:,])", r"(?=[\s)\]},;:.!?]|$)"
_LONG = re.compile(
    rf"{_OPEN}'[^']{{{VALUE_CHARS + 1},}}'{_CLOSE}|{_OPEN}\"[^\"]{{{VALUE_CHARS + 1},}}\"{_CLOSE}"
    rf"|\S{{{RUN_CHARS + 1},}}"
)


def _cut(text: str, limit: int) -> str:
    return f"{text[:limit]}… ({len(text)} characters)"


def cut_long(text: str) -> str:
    """``text`` with every quoted value longer than :data:`VALUE_CHARS` cut to that length (``'xxx…' (3000000
    characters)``), every run without spaces to :data:`RUN_CHARS`, then the whole to :data:`MESSAGE_CHARS`.

    Messages quote what they found (an id, a cell, a line); read from a file without line breaks that can be
    megabytes, and one ``error:`` line must stay readable. The rest of the message (where, what was expected)
    is kept.
    """

    def cut(found: re.Match) -> str:
        value = found.group()
        if value[0] in "'\"" and value[-1] == value[0]:
            return f"{value[0]}{value[1 : VALUE_CHARS + 1]}…{value[0]} ({len(value) - 2} characters)"
        return _cut(value, RUN_CHARS)

    text = _LONG.sub(cut, text)
    return text if len(text) <= MESSAGE_CHARS else _cut(text, MESSAGE_CHARS)


def one_line(err: BaseException) -> str:
    """The error's message on one line (whitespace runs collapsed, overlong values cut: :func:`cut_long`); for an
    error re-raised from a DataLoader worker, the worker's final exception line only (not its traceback)."""
    text = str(err)
    worker = _WORKER_TRACEBACK.search(text)
    if worker:
        text = _final_exception(text[worker.end() :], worker.group(1))
    text = cut_long(" ".join(text.split()))
    return text or type(err).__name__


def run_command(run: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> tuple[Any, int]:
    """``(run(argv), 0)``, or ``(None, code)`` after printing one ``error:`` / ``stopped:`` line. ``SIGTERM`` is
    handled as Ctrl-C is (:class:`~simcse_weince.core.stopping.TerminationHandler`): the command keeps what it can."""
    with TerminationHandler():
        return _run(run, argv)


def command_main(
    run: Callable[[Sequence[str]], Any],
    argv: Sequence[str] | None = None,
    *,
    log_info: bool = False,
    exit_code: Callable[[Any], int] | None = None,
) -> int:
    """A command's ``main``: ``run`` on ``argv`` (the process's arguments when ``None``) through
    :func:`run_command`, returning the exit code: the error's or the stop's, else ``exit_code(result)`` (0 without
    it). ``log_info``: INFO logs to stdout (``logging.basicConfig``), for the commands that report as they go."""
    if log_info:
        logging.basicConfig(format=LOG_FORMAT, level=logging.INFO, stream=sys.stdout)
    result, code = run_command(run, sys.argv[1:] if argv is None else argv)
    return code or (exit_code(result) if exit_code is not None else 0)


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
