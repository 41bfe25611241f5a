"""How the commands end on an expected error: one line on stderr, no traceback, a non-zero exit.

Expected errors are the ones a user can fix: a bad setting (``ValueError`` and its subclasses, such as
``ConfigError``), a missing or unreadable file (``OSError``), a model that cannot be found. Set
``SIMCSE_WEINCE_DEBUG=1`` to get the traceback instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

DEBUG_ENV = "SIMCSE_WEINCE_DEBUG"
EXIT_USAGE = 2


def one_line(err: BaseException) -> str:
    """The error's message on one line (whitespace runs collapsed)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def run_command(run: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> tuple[Any, int]:
    """``(run(argv), 0)``, or ``(None, 2)`` after printing ``error: <message>`` for an expected error."""
    try:
        return run(argv), 0
    except (ValueError, OSError) as err:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {one_line(err)}", file=sys.stderr)
        return None, EXIT_USAGE
