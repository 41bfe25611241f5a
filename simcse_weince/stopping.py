"""The one exception a stopped run ends with (shared by the libraries and the command layer)."""

from __future__ import annotations


class Stopped(Exception):
    """A run stopped by a signal (Ctrl-C, ``SIGTERM``) after keeping what it could; the message says what was kept
    and how to go on. The commands end with it in one ``stopped:`` line and exit code 130."""
