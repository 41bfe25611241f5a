"""``command_main``: the one frame of every command's ``main`` (arguments, logging, one-line errors, exit codes)."""

from __future__ import annotations

import logging
import sys

import pytest

from simcse_weince.cli.errors import DEBUG_ENV, EXIT_STOPPED, EXIT_USAGE, Stopped, command_main


def _bad(argv):
    raise ValueError(f"--x {argv[0]}:\n  must be positive")


def _stopped(argv):
    raise Stopped("kept 2 files")


def test_the_exit_code_is_the_errors_or_the_results(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)  # set, the error's traceback is shown instead
    assert command_main(lambda argv: list(argv), ["a"]) == 0
    assert command_main(lambda argv: {"failed": argv == ["a"]}, ["a"], exit_code=lambda r: int(r["failed"])) == 1
    assert command_main(_bad, ["-1"], exit_code=lambda r: 0) == EXIT_USAGE
    assert capsys.readouterr().err == "error: --x -1: must be positive\n"
    assert command_main(_stopped, []) == EXIT_STOPPED
    assert capsys.readouterr().err == "stopped: kept 2 files\n"


def test_without_argv_the_process_arguments_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(sys, "argv", ["simcse-x", "--flag", "1"])
    assert command_main(seen.extend) == 0 and seen == ["--flag", "1"]
    assert command_main(seen.extend, []) == 0 and seen == ["--flag", "1"]  # an empty list is not None


def test_log_info_configures_info_logging_to_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: calls.append(kw))
    command_main(lambda argv: None, [])
    assert calls == []
    command_main(lambda argv: None, [], log_info=True)
    assert [(c["level"], c["stream"]) for c in calls] == [(logging.INFO, sys.stdout)]
