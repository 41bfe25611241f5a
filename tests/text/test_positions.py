"""The model's length limit, read from its config: a length setting above it is refused, naming the setting's
source, the model and its limit, before any text is tokenised."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import BertConfig, DebertaV2Config, RobertaConfig

from simcse_weince.text.positions import check_length_fits, model_position_limit, position_limit
from simcse_weince.training.config import ConfigError


def test_the_limit_is_the_position_table() -> None:
    assert position_limit(BertConfig(max_position_embeddings=512)) == 512
    assert position_limit(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512  # ids start at 2
    assert position_limit(DebertaV2Config(position_biased_input=False)) is None  # relative positions only
    assert position_limit(object()) is None


def test_the_limit_of_a_folder_follows_the_overrides(tiny_bert_dir: Path, tmp_path: Path) -> None:
    assert model_position_limit(str(tiny_bert_dir)) == 64
    assert model_position_limit(str(tiny_bert_dir), {"max_position_embeddings": 128}) == 128
    assert model_position_limit(str(tmp_path)) is None  # no config here: the loader says why, later


def test_a_longer_setting_is_refused() -> None:
    check_length_fits("command line: --max_seq_length 512", 512, "bert", 512)
    check_length_fits("command line: --max_length None", None, "bert", 512)  # the model's own limit
    check_length_fits("command line: --max_seq_length 100000", 100000, "bert", None)  # no table known
    with pytest.raises(ConfigError) as err:
        check_length_fits("command line: --max_seq_length 100000", 100000, "bert-base-uncased", 512)
    assert str(err.value) == (
        "command line: --max_seq_length 100000: the model bert-base-uncased has 512 positions; expected at most 512"
    )


def test_the_text_command_checks_max_seq_length_against_the_model(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from simcse_weince.cli.train_text import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"model_name_or_path: {tiny_bert_dir}\ninit_from_config: true\nmax_seq_length: 65\n")
    assert main([str(cfg), "--output_dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {cfg}: max_seq_length 65: the model {tiny_bert_dir} has 64 positions; expected at most 64"
    )
    assert not (tmp_path / "out").exists()  # before the output folder is locked
