"""Every setting is checked when the configuration is parsed, before any model or data is loaded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import ConfigError, parse_config
from simcse_weince.vision.arguments import SimCLRTrainingArguments, VisionDataArguments, VisionModelArguments

TEXT = (ModelArguments, DataArguments, LossArguments, SimCSETrainingArguments)
VISION = (VisionModelArguments, VisionDataArguments, LossArguments, SimCLRTrainingArguments)

# (groups, YAML key, bad value, words the one-line message must contain)
INVALID = [
    (TEXT, "beta_mode", "mle", "beta_mode must be one of unit, ols, hill; got 'mle'"),
    (TEXT, "loss", "nce", "loss must be one of weince, infonce"),
    (TEXT, "temperature", 0.0, "temperature must be > 0"),
    (TEXT, "q", 1.5, "q must be in [0, 1]"),
    (TEXT, "tail_frac", 0.0, "tail_frac must be in (0, 1]"),
    (TEXT, "beta_min", 20.0, "beta_clamp"),
    (TEXT, "fixed_lambda", 2.0, "fixed_lambda"),
    (TEXT, "pooler", "max", "pooler must be one of cls, cls_before_pooler, avg, avg_first_last"),
    (TEXT, "precision", "fp8", "precision must be one of auto, fp32, fp16, bf16"),
    (TEXT, "per_device_train_batch_size", 0, "per_device_train_batch_size must be >= 1"),
    (TEXT, "per_device_train_batch_size", 1, "a contrastive batch needs at least 2 rows"),
    (TEXT, "max_seq_length", 2, "max_seq_length must be >= 3"),
    (TEXT, "max_seq_length", 0, "max_seq_length must be >= 3"),
    (TEXT, "eval_batch_size", 0, "eval_batch_size must be >= 1"),
    (TEXT, "config_overrides", "layers", "key=value"),
    (TEXT, "learning_rate", -1e-05, "learning_rate must be >= 0.0; got -1e-05"),
    (TEXT, "weight_decay", -0.01, "weight_decay must be >= 0.0"),
    (TEXT, "max_grad_norm", -1.0, "max_grad_norm must be >= 0.0"),
    (TEXT, "adam_beta2", 1.0, "adam_beta2 must be in [0, 1); got 1.0"),
    (TEXT, "hub_model_id", "a/b/c", "hub_model_id 'a/b/c' is not a Hub repository id; expected name or namespace/"),
    (TEXT, "text_columns", "sent0,", "text_columns: every column name must be a non-empty string"),
    (VISION, "backbone", "vgg", "backbone must be one of resnet18"),
    (VISION, "hub_model_id", "me/x..y", "hub_model_id 'me/x..y' is not a Hub repository id"),
    (VISION, "dataset", "mnist", "dataset must be one of cifar10_zip"),
    (VISION, "image_size", 0, "image_size must be >= 8"),
    (VISION, "crop_min_scale", 0.0, "crop_min_scale must be in (0, 1]"),
]


@pytest.mark.parametrize(("groups", "key", "value", "message"), INVALID, ids=lambda x: str(x)[:30])
def test_invalid_yaml_value_names_the_file_and_value(groups, key, value, message, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"{key}: {value!r}\n".replace("'", '"') if isinstance(value, str) else f"{key}: {value}\n")
    with pytest.raises(ConfigError) as err:
        parse_config(groups, [str(cfg), "--output_dir", str(tmp_path)])
    text = str(err.value)
    assert text.startswith(f"{cfg}: ") and message in text and "\n" not in text


@pytest.mark.parametrize(("groups", "key", "value", "message"), INVALID, ids=lambda x: str(x)[:30])
def test_invalid_flag_value_names_the_command_line_and_flag(groups, key, value, message, tmp_path: Path) -> None:
    cfg = tmp_path / "ok.yaml"
    cfg.write_text("learning_rate: 1.0e-4\n")
    with pytest.raises(ConfigError) as err:
        parse_config(groups, [str(cfg), "--output_dir", str(tmp_path), f"--{key}", str(value)])
    text = str(err.value)
    assert text.startswith(f"command line: --{key} {value}: ") and "\n" not in text, text
    assert message in text or "invalid choice" in text  # choices are argparse's on the command line


def test_invalid_choice_on_the_command_line_is_one_error_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(TEXT, ["--beta_mode", "mle", "--output_dir", str(tmp_path)])
    assert str(err.value) == "command line: --beta_mode mle: invalid choice: 'mle' (choose from 'unit', 'ols', 'hill')"
    assert capsys.readouterr().err == ""  # no argparse usage text


@pytest.mark.parametrize("training", [SimCSETrainingArguments, SimCLRTrainingArguments])
def test_a_schedule_that_trains_nothing_is_refused(training, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"max_steps must be > 0, or -1 to train for num_train_epochs \(> 0\); got 0"):
        training(output_dir=str(tmp_path), max_steps=0)  # the Trainer would run 1 step
    with pytest.raises(ValueError, match=r"max_steps must be > 0, or -1 .*; got -2"):
        training(output_dir=str(tmp_path), max_steps=-2)
    with pytest.raises(ValueError, match=r"num_train_epochs must be > 0 when max_steps is -1 .*; got 0"):
        training(output_dir=str(tmp_path), num_train_epochs=0)  # would export the untrained model as trained
    assert training(output_dir=str(tmp_path), max_steps=3, num_train_epochs=0).max_steps == 3
    assert training(output_dir=str(tmp_path), num_train_epochs=0.5).num_train_epochs == 0.5


def test_output_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "f.txt"
    file.write_text("x")
    with pytest.raises(ValueError, match=re.escape(f"output_dir {file} is a file; expected a folder")):
        SimCSETrainingArguments(output_dir=str(file))
    with pytest.raises(ValueError, match=re.escape(f"output_dir {file}/a/b lies under {file}, a file; expected a")):
        SimCSETrainingArguments(output_dir=str(tmp_path / "f.txt" / "a" / "b"))
    for folder in (tmp_path, tmp_path / "new" / "run"):  # an existing folder, or one to be created
        assert SimCLRTrainingArguments(output_dir=str(folder)).output_dir == str(folder)
    assert not (tmp_path / "new").exists()  # checked, not created


def test_infonce_still_checks_the_weince_knobs() -> None:
    with pytest.raises(ValueError, match="q must be"):
        LossArguments(loss="infonce", q=2.0)
    assert LossArguments(loss="infonce").build().temperature == 0.05


def test_weince_knobs_parse_with_their_types_from_yaml_and_the_command_line(tmp_path: Path) -> None:
    # the fields are generated from WeinceConfig: argparse must still see float, int | None, Literal
    cfg = tmp_path / "c.yaml"
    cfg.write_text("eps: 1e-5\nburn: 3\nmin_tail_points: 8\nbeta_mode: unit\n")  # YAML reads 1e-5 as a string
    _, _, loss, _ = parse_config(TEXT, [str(cfg), "--fixed_lambda", "0.5", "--q", "0.3", "--output_dir", str(tmp_path)])
    assert (loss.eps, loss.burn, loss.min_tail_points, loss.beta_mode) == (1e-5, 3, 8, "unit")
    assert (loss.fixed_lambda, loss.q) == (0.5, 0.3) and type(loss.burn) is int and type(loss.eps) is float
    assert loss.build().config == loss.weince_config()


@pytest.mark.parametrize("training", [SimCSETrainingArguments, SimCLRTrainingArguments])
@pytest.mark.parametrize("engine", ["DEEPSPEED", "FSDP"])
def test_deepspeed_and_fsdp_from_the_launcher_are_refused(
    training, engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``accelerate launch --use_deepspeed`` / ``--use_fsdp`` (or a config naming them) set an environment variable,
    not a setting: refused all the same, before anything loads, with the reason; DDP (neither) is fine."""
    training(output_dir=str(tmp_path))
    monkeypatch.setenv(f"ACCELERATE_USE_{engine}", "true")
    with pytest.raises(ValueError, match=rf"^{engine.lower()} is not supported: the loss gathers .* launch with DDP"):
        training(output_dir=str(tmp_path))
