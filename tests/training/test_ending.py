"""The one run ending of text and vision runs (``training/ending.py``), with a stand-in trainer: export, push,
card rendered once with the usage path the push decided, ``results.json``, and the one Hub policy."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from simcse_weince.training.ending import LOCAL_USAGE_PATH, exit_code, finish_run
from simcse_weince.training.hub import HubPushError
from simcse_weince.training.run_record import RunState


class FakeTrainer:
    """The parts of a finished trainer that the ending reads; ``fail`` makes the n-th push fail."""

    def __init__(self, out: Path, push: bool, fail: set[int] = frozenset(), main: bool = True, **args) -> None:
        self.run_state = RunState(started=0.0, hub_error=args.pop("hub_error", None))
        self.args = SimpleNamespace(output_dir=str(out), push_to_hub=push, hub_push_optional=False)
        vars(self.args).update(args)
        self.hub_model_id = "me/run"
        self.pushes: list[tuple[str, list[str] | None, str | None]] = []  # (message, patterns, card at push time)
        self.fail, self.main = fail, main

    def is_world_process_zero(self) -> bool:
        return self.main

    def export_loss_parameters(self, folder: Path) -> None:  # a loss without parameters: nothing to write
        pass

    def push_final_folder(self, folder: str, commit_message: str, allow_patterns: list[str] | None = None) -> str:
        card = Path(folder) / "README.md"
        self.pushes.append((commit_message, allow_patterns, card.read_text() if card.is_file() else None))
        if len(self.pushes) in self.fail:
            raise HubPushError(f"could not push {folder}")
        return f"https://hub.invalid/me/run/commit/{len(self.pushes)}"


def export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"w")
    return folder


def card(usage: str) -> str:
    return f"use {usage}\n"


def end(trainer: FakeTrainer) -> dict:
    return finish_run(trainer, {"steps": 3}, export=export, render_card=card, what="model")


def test_local_run_writes_the_folder_the_local_card_and_the_record(tmp_path: Path) -> None:
    results = end(FakeTrainer(tmp_path, push=False))
    assert (tmp_path / "model" / "README.md").read_text() == f"use {LOCAL_USAGE_PATH}\n"
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["steps"] == 3 and record["model_dir"] == str(tmp_path / "model") and "hub_url" not in record
    assert record == json.loads(json.dumps(results, default=str)) and exit_code(results) == 0


def test_pushed_model_gets_the_card_naming_the_repository_after_the_push(tmp_path: Path) -> None:
    trainer = FakeTrainer(tmp_path, push=True)
    results = end(trainer)
    (model_msg, patterns, card_at_push), (card_msg, card_patterns, pushed_card) = trainer.pushes
    assert (model_msg, patterns, card_at_push) == ("End of training: model", None, None)  # no card before the push
    assert (card_msg, card_patterns, pushed_card) == ("End of training: model card", ["README.md"], "use me/run\n")
    assert results["hub_url"].endswith("/commit/1") and "hub_error" not in results and exit_code(results) == 0


def test_failed_push_keeps_everything_local_and_fails_the_run(tmp_path: Path) -> None:
    trainer = FakeTrainer(tmp_path, push=True, fail={1})
    results = end(trainer)
    assert len(trainer.pushes) == 1  # no card pushed for a model that is not there
    assert (tmp_path / "model" / "README.md").read_text() == f"use {LOCAL_USAGE_PATH}\n"  # never names the repo
    assert "could not push" in json.loads((tmp_path / "results.json").read_text())["hub_error"]
    assert exit_code(results) == 1


def test_failed_card_push_is_recorded(tmp_path: Path) -> None:
    results = end(FakeTrainer(tmp_path, push=True, fail={2}))
    assert "hub_url" in results and "could not push" in results["hub_error"] and exit_code(results) == 1


@pytest.mark.parametrize("push", [True, False])
def test_optional_push_records_the_failure_and_succeeds(tmp_path: Path, push: bool) -> None:
    # push=False: the access check failed before training and turned pushing off (hub_error set then)
    trainer = FakeTrainer(tmp_path, push=push, fail={1}, hub_push_optional=True, hub_error="no network")
    results = end(trainer)
    assert results["hub_error"] and results["hub_push_optional"] is True and exit_code(results) == 0


def test_other_processes_write_nothing(tmp_path: Path) -> None:
    results = end(FakeTrainer(tmp_path, push=True, main=False))
    assert results == {"steps": 3} and not any(tmp_path.iterdir())


def test_exit_code_of_a_failed_command() -> None:
    assert exit_code(None) == 0  # the command's own error code is used instead
