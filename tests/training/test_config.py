"""YAML + command-line configuration and the saved run information."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import parse_config, save_run_info

GROUPS = (ModelArguments, DataArguments, LossArguments, SimCSETrainingArguments)
REPO = Path(__file__).resolve().parents[2]


def test_yaml_then_cli_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_name_or_path: x\nlearning_rate: 1.0e-4\nbeta_mode: hill\nmax_steps: 7\n")
    m, _, loss, t = parse_config(GROUPS, [str(cfg), "--learning_rate", "2e-5", "--output_dir", str(tmp_path)])
    assert m.model_name_or_path == "x" and loss.beta_mode == "hill" and t.max_steps == 7
    assert t.learning_rate == 2e-5  # the command line wins
    assert t.per_device_train_batch_size == 64 and t.eval_steps == 125  # SimCSE defaults
    assert t.metric_for_best_model == "stsb_spearman" and t.load_best_model_at_end


def test_unknown_yaml_key_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("learning_rate: 1.0e-4\nlearning_rat: 3\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: unknown config keys \['learning_rat'\]"):
        parse_config(GROUPS, [str(cfg)])


def test_unknown_cli_flag_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="learning_rat"):
        parse_config(GROUPS, ["--learning_rat", "3", "--output_dir", str(tmp_path)])  # no abbreviations
    with pytest.raises(ValueError, match="no_such_flag"):
        parse_config(GROUPS, ["--no_such_flag", "3", "--output_dir", str(tmp_path)])


@pytest.mark.parametrize("name", ["quickstart.yaml", "unsup_bert_base.yaml"])
def test_shipped_configs_parse(name: str, tmp_path: Path) -> None:
    m, d, loss, t = parse_config(GROUPS, [str(REPO / "configs" / name), "--output_dir", str(tmp_path)])
    built = loss.build()
    if "infonce" in name:
        assert isinstance(built, InfoNCELoss) and not isinstance(built, WeinceLoss)
    else:
        assert isinstance(built, WeinceLoss)
    if "bert_base" in name:
        assert (m.model_name_or_path, t.per_device_train_batch_size, t.learning_rate) == ("bert-base-uncased", 64, 3e-5)
        assert (d.max_seq_length, loss.temperature, t.num_train_epochs, t.eval_steps) == (32, 0.05, 1, 125)
        assert m.pooler == "cls" and m.mlp_only_train and d.train_files is None


def test_loss_arguments_reach_the_loss() -> None:
    # every knob set away from its default must arrive in the loss under its own name
    values = dict(
        beta_mode="unit",
        beta_min=1.0,
        beta_max=4.0,
        min_tail_points=8,
        tail_frac=0.2,
        burn=2,
        q=0.3,
        kappa_rho=5.0,
        kappa_aic=2.0,
        margin=1.5,
        eps=1e-5,
        fixed_lambda=0.25,
        temperature=0.1,
        gather_across_devices=False,
    )
    cfg = LossArguments(**values).build("ntxent").get_config_dict()
    expected = {k: v for k, v in values.items() if k not in ("beta_min", "beta_max")}
    assert cfg == expected | {"beta_clamp": [1.0, 4.0], "layout": "ntxent"}
    with pytest.raises(ValueError, match="loss must be"):
        LossArguments(loss="nce").build()


def test_precision_auto_is_fp32_on_cpu(tmp_path: Path) -> None:
    t = SimCSETrainingArguments(output_dir=str(tmp_path))
    assert not t.fp16 and not t.bf16
    with pytest.raises(ValueError, match="precision"):
        SimCSETrainingArguments(output_dir=str(tmp_path), precision="fp8")


def test_config_overrides_parsing() -> None:
    m = ModelArguments(config_overrides="num_hidden_layers=2,hidden_dropout_prob=0.0,hidden_act=gelu")
    assert m.overrides() == {"num_hidden_layers": 2, "hidden_dropout_prob": 0.0, "hidden_act": "gelu"}
    with pytest.raises(ValueError, match="key=value"):
        ModelArguments(config_overrides="layers").overrides()


def test_run_info_saved(tmp_path: Path) -> None:
    path = save_run_info(tmp_path, {"loss": LossArguments(), "training": SimCSETrainingArguments(output_dir="o")})
    info = yaml.safe_load(path.read_text())
    assert info["loss"]["beta_mode"] == "ols" and info["training"]["learning_rate"] == 3e-5
    assert {"torch", "transformers", "sentence-transformers"} <= set(info["versions"])


def test_run_info_records_the_checkout_revision(tmp_path: Path) -> None:
    """``git_revision`` is the commit checked out where the package lives (``+dirty`` with local changes)."""
    from simcse_weince.training import config

    package = Path(config.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=package, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the package is not in a git checkout (or git is missing): its revision is 'unknown'")
    sha = head.stdout.strip()
    assert len(sha) == 40 and int(sha, 16) >= 0
    info = yaml.safe_load(save_run_info(tmp_path, {"loss": LossArguments()}).read_text())
    assert info["git_revision"] in (sha, f"{sha}+dirty")
