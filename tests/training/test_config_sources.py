"""Which source an error of :func:`~simcse_weince.training.config.parse_config` blames, read from its message
(no culprit search by building the configuration again): the setting that leads a check's message alone, else
the settings the message names and the given ones whose value it quotes, the command line's first."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import ConfigError, parse_config

GROUPS = (ModelArguments, DataArguments, LossArguments, SimCSETrainingArguments)
STEPS = "eval_strategy: steps\nsave_strategy: steps\nload_best_model_at_end: true\neval_steps: 3\n"
NOT_A_MULTIPLE = "--load_best_model_at_end requires the saving steps to be a round multiple of the evaluation steps"


def _error(tmp_path: Path, text: str, flags: list[str]) -> tuple[str, Path]:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        parse_config(GROUPS, [str(cfg), "--output_dir", str(tmp_path / "out"), *flags])
    return str(err.value), cfg


def test_a_flag_whose_value_the_message_quotes_is_blamed(tmp_path: Path) -> None:
    # the Trainer's message names load_best_model_at_end (from the file) and quotes save_steps' 5 (a float, 5.0)
    message, _ = _error(tmp_path, STEPS, ["--save_steps", "5"])
    assert message.startswith(f"command line: --save_steps 5: {NOT_A_MULTIPLE}"), message


def test_the_file_is_blamed_when_no_flag_is_named_or_quoted(tmp_path: Path) -> None:
    message, cfg = _error(tmp_path, STEPS + "save_steps: 5\n", ["--seed", "7"])
    assert message.startswith(f"{cfg}: {NOT_A_MULTIPLE}"), message


def test_the_setting_that_leads_a_check_message_is_blamed_alone(tmp_path: Path) -> None:
    # the message also names num_train_epochs, which the command line sets; max_steps leads it
    message, cfg = _error(tmp_path, "max_steps: 0\n", ["--num_train_epochs", "2"])
    assert message.startswith(f"{cfg}: max_steps must be > 0, or -1"), message
    message, _ = _error(tmp_path, "num_train_epochs: 2\n", ["--max_steps", "0"])
    assert message.startswith("command line: --max_steps 0: max_steps must be > 0, or -1"), message


def test_a_key_the_message_does_not_name_is_added(tmp_path: Path) -> None:
    message, cfg = _error(tmp_path, "eval_strategy: bogus\n", [])
    assert message.startswith(f"{cfg}: eval_strategy: bogus is not a valid"), message


@pytest.mark.parametrize(("flag", "value"), [("--temperature", "inf"), ("--q", "nan")])
def test_a_value_that_is_not_finite_names_its_flag(flag: str, value: str, tmp_path: Path) -> None:
    message, _ = _error(tmp_path, "q: 0.3\n", [flag, value])
    name = flag.removeprefix("--")
    assert message == f"command line: {flag} {value}: {name} must be a finite number, got {float(value)!r}"
