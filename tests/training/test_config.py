"""YAML + command-line configuration and the saved run information."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import get_type_hints

import pytest
import yaml

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import ConfigError, parse_config, save_run_info, to_plain

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


def _error(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(GROUPS, argv)
    text = str(err.value)
    assert "\n" not in text and "usage:" not in text
    return text


def test_unknown_flag_after_a_yaml_file_names_the_command_line(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 1.0e-4\n")
    flags = ["--learning_rat", "3", "--output_dir", str(tmp_path)]
    assert _error([str(cfg), *flags]) == (
        "command line: unknown flag --learning_rat (did you mean --learning_rate?); see --help"
    )
    assert _error([str(cfg), "--no_such_flag=3", "--learning_rat", "3"]).startswith(
        "command line: unknown flags --no_such_flag, --learning_rat (did you mean --learning_rate?)"
    )
    assert _error(["--output_dir", str(tmp_path), str(cfg)]) == (
        f"command line: unexpected argument '{cfg}' (the YAML config file must come first)"
    )
    assert capsys.readouterr().err == ""  # no argparse usage text


# (YAML text, command-line flags, the error's start: the true source, {cfg} standing for the YAML file)
SOURCES = [
    ("temperature: 0.05\n", ["--temperature", "-0.05"], "command line: --temperature -0.05: temperature must be > 0"),
    ("temperature: 0\n", ["--temperature", "-1"], "command line: --temperature -1: temperature must be > 0, got -1"),
    ("temperature: -0.05\n", ["--q", "0.3"], "{cfg}: temperature must be > 0, got -0.05"),
    ("temperature: 0\nq: 2\n", ["--q", "0.3"], "{cfg}: temperature must be > 0, got 0"),
    ("beta_mode: ols\n", ["--beta_mode", "mle"], "command line: --beta_mode mle: invalid choice: 'mle'"),
    ("beta_mode: mle\n", ["--q", "0.3"], "{cfg}: beta_mode must be one of unit, ols, hill; got 'mle'"),
    ("max_steps: ten\n", [], "{cfg}: max_steps: invalid int value: 'ten'"),
    ("max_steps: 5\n", ["--max_steps", "ten"], "command line: --max_steps ten: invalid int value: 'ten'"),
    ("max_steps: 5\n", ["--max_steps", "0"], "command line: --max_steps 0: max_steps must be > 0, or -1"),
    ("max_steps: 0\n", ["--learning_rate", "1e-5"], "{cfg}: max_steps must be > 0, or -1"),
    ("eval_strategy: bogus\n", ["--learning_rate", "1e-5"], "{cfg}: eval_strategy: bogus is not a valid"),
    ("", ["--learning_rate"], "command line: --learning_rate: expected one argument"),
    (
        "gradient_cache_chunk_size: 4\n",
        ["--ddp_static_graph", "true", "--learning_rate", "1e-5"],
        "command line: --ddp_static_graph true: gradient_cache_chunk_size does not work with ddp_static_graph",
    ),
    (
        "learning_rate: 1.0e-4\n",
        ["--gradient_cache_chunk_size", "4", "--learning_rate", "1e-5", "--ddp_static_graph", "true"],
        "command line: --ddp_static_graph true --gradient_cache_chunk_size 4: gradient_cache_chunk_size does not",
    ),
    (
        "config_overrides: num_hidden_layers=2\n",
        ["--config_overrides", "layers"],
        "command line: --config_overrides layers: config_overrides: expected 'key=value' items",
    ),
]


@pytest.mark.parametrize(("text", "flags", "start"), SOURCES, ids=lambda x: str(x)[:40])
def test_errors_name_their_true_source(text: str, flags: list[str], start: str, tmp_path: Path) -> None:
    """A value from the command line is blamed on its flag, one from the YAML file on the file (and its key
    when the message does not name it), whichever check or parser finds it."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    message = _error([str(cfg), "--output_dir", str(tmp_path / "out"), *flags])
    assert message.startswith(start.replace("{cfg}", str(cfg))), message


def test_command_line_fixes_a_bad_yaml_value(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("temperature: 0\nmax_steps: ten\n")
    _, _, loss, t = parse_config(GROUPS, [str(cfg), "--temperature", "0.1", "--max_steps", "5"])
    assert (loss.temperature, t.max_steps) == (0.1, 5)


@pytest.mark.parametrize(
    ("data", "start"),
    [
        (b"a: [1\n", ":2:1: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence "
                     "at line 1, column 4)"),
        (b"q: 0.5\n\tq: 1\n", ":2:1: not valid YAML: found character '\\t' that cannot start any token"),
        (b"q: 0.5\nbeta_mode: o\x00ls\n", ":2:13: not valid YAML: unacceptable character #x0000"),
        (b"q: 0.5\nbeta_mode: \xffols\n", ":2: not valid UTF-8 (byte 0xff); expected UTF-8 text"),
    ],
    ids=["flow sequence", "tab", "NUL", "not UTF-8"],
)  # fmt: skip
def test_yaml_errors_name_file_line_and_column(data: bytes, start: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(data)
    message = _error([str(cfg)])
    assert message.startswith(f"{cfg}{start}"), message
    assert "<unicode string>" not in message and "^" not in message


@pytest.mark.parametrize(
    "name",
    ["quickstart.yaml", "unsup_bert_base.yaml", "sup_quickstart.yaml", "sup_bert_base_weince.yaml",
     "sup_bert_base_infonce.yaml"],
)  # fmt: skip
def test_shipped_configs_parse(name: str, tmp_path: Path) -> None:
    m, d, loss, t = parse_config(GROUPS, [str(REPO / "configs" / name), "--output_dir", str(tmp_path)])
    built = loss.build()
    if "infonce" in name:
        assert isinstance(built, InfoNCELoss) and not isinstance(built, WeinceLoss)
    else:
        assert isinstance(built, WeinceLoss)
    if name == "unsup_bert_base.yaml":
        assert (m.model_name_or_path, t.per_device_train_batch_size, t.learning_rate) == ("bert-base-uncased", 64, 3e-5)
        assert (d.max_seq_length, loss.temperature, t.num_train_epochs, t.eval_steps) == (32, 0.05, 1, 125)
        assert m.pooler == "cls" and m.mlp_only_train and d.train_files is None
    if name.startswith("sup_bert_base"):  # SimCSE's supervised setting
        assert (m.model_name_or_path, t.per_device_train_batch_size, t.learning_rate) == ("bert-base-uncased", 512,
                                                                                          5e-5)  # fmt: skip
        assert (d.max_seq_length, loss.temperature, t.num_train_epochs, t.eval_steps) == (32, 0.05, 3, 125)
        assert m.pooler == "cls" and not m.mlp_only_train and d.train_files is None
        assert (d.hub_dataset, d.hub_data_file) == ("princeton-nlp/datasets-for-simcse", "nli_for_simcse.csv")
        assert d.text_columns == ["sent0", "sent1", "hard_neg"] and loss.hard_negative_weight == 0.0
    if name == "sup_quickstart.yaml":
        assert d.allow_missing_negatives and d.text_columns == ["sent0", "sent1", "hard_neg"]


def test_the_two_supervised_recipes_differ_in_the_loss_and_the_folder_only(tmp_path: Path) -> None:
    weince, infonce = (
        [to_plain(g) for g in parse_config(GROUPS, [str(REPO / "configs" / f"sup_bert_base_{loss}.yaml")])]
        for loss in ("weince", "infonce")
    )
    differ = {(i, k) for i, (a, b) in enumerate(zip(weince, infonce, strict=True)) for k in a if a[k] != b.get(k)}
    assert {k for _, k in differ} >= {"loss", "output_dir"}
    assert {k for _, k in differ} <= {"loss", "output_dir", "logging_dir", "run_name"}


def test_a_config_starts_from_its_base(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text("learning_rate: 1.0e-4\nseed: 7\ntemperature: 0.1\n", encoding="utf-8")
    (tmp_path / "sub" / "b.yaml").write_text("base: ../a.yaml\nseed: 8\n", encoding="utf-8")
    (tmp_path / "c.yaml").write_text("base: sub/b.yaml\ntemperature: 0.2\n", encoding="utf-8")
    _, _, loss, t = parse_config(GROUPS, [str(tmp_path / "c.yaml"), "--seed", "9"])
    assert (t.learning_rate, t.seed, loss.temperature) == (1e-4, 9, 0.2)  # a, then b, then c, then the flag
    _, _, _, t = parse_config(GROUPS, [str(tmp_path / "c.yaml")])
    assert t.seed == 8
    # errors name the file of the chain that holds the value
    (tmp_path / "a.yaml").write_text("temperature: -1\n", encoding="utf-8")
    assert _error([str(tmp_path / "sub" / "b.yaml")]).startswith(f"{tmp_path / 'sub' / '..' / 'a.yaml'}: temperature")
    (tmp_path / "a.yaml").write_text(
        "eval_strategy: steps\nsave_strategy: steps\nload_best_model_at_end: true\neval_steps: 3\nsave_steps: 5\n",
        encoding="utf-8",
    )  # an error of two keys, both in the base
    assert _error([str(tmp_path / "c.yaml")]).startswith(f"{tmp_path / 'sub' / '..' / 'a.yaml'}: ")
    (tmp_path / "a.yaml").write_text("learning_rat: 1\n", encoding="utf-8")
    assert _error([str(tmp_path / "c.yaml")]).startswith(f"{tmp_path / 'sub' / '..' / 'a.yaml'}: unknown config keys")
    for text, message in [
        ("base: c.yaml\n", "base: c.yaml leads back to"),
        ("base: missing.yaml\n", "base: config file not found:"),
        ("base: [a.yaml]\n", "base: ['a.yaml'] is not a YAML file name"),
    ]:
        (tmp_path / "c.yaml").write_text(text, encoding="utf-8")
        assert _error([str(tmp_path / "c.yaml")]).startswith(f"{tmp_path / 'c.yaml'}: {message}")


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
    assert re.fullmatch(r"[0-9a-f]{40}", sha), sha
    info = yaml.safe_load(save_run_info(tmp_path, {"loss": LossArguments()}).read_text())
    assert info["git_revision"] in (sha, f"{sha}+dirty")  # whether it is dirty: the exact test below


def test_git_revision_is_the_commit_plus_dirty_or_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a repository of its own: the commit's sha when the work tree is clean, ``<sha>+dirty`` after a change,
    ``unknown`` outside any checkout."""
    from simcse_weince.training.config import git_revision

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git looks for no repository above tmp_path
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                                   "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", *args],
                                  cwd=repo, capture_output=True, text=True, check=True)  # fmt: skip
        except (OSError, subprocess.CalledProcessError) as err:
            pytest.skip(f"git cannot make a repository here: {err}")
        return done.stdout.strip()

    git("init", "-q")
    (repo / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "first")
    sha = git("rev-parse", "HEAD")
    assert git_revision(repo) == sha
    (repo / "a.txt").write_text("two\n")
    assert git_revision(repo) == f"{sha}+dirty"
    git("commit", "-q", "-am", "second")
    assert git_revision(repo) == git("rev-parse", "HEAD") != sha
    assert git_revision(outside) == "unknown"


def _float_settings() -> list[tuple[str, tuple[type, ...], str]]:
    """(command, its argument groups, setting) for every setting typed ``float`` (or ``float | None``) of the text
    and vision commands: the loss, model, data and training groups, the Trainer's own floats included."""
    from simcse_weince.cli.train_vision import ARG_GROUPS as VISION

    out = []
    for command, groups in (("text", GROUPS), ("vision", VISION)):
        for group in groups:
            hints = get_type_hints(group)
            out += [
                (command, groups, f.name) for f in dataclasses.fields(group) if f.init and "float" in str(hints[f.name])
            ]
    return out


FLOAT_SETTINGS = _float_settings()


def test_every_float_setting_is_found() -> None:
    names = {name for _, _, name in FLOAT_SETTINGS}
    assert {"temperature", "hard_negative_weight", "learning_rate", "crop_min_scale", "max_grad_norm"} <= names


@pytest.mark.parametrize(("command", "groups", "name"), FLOAT_SETTINGS, ids=lambda x: x if isinstance(x, str) else "")
def test_every_float_setting_refuses_nan_and_inf(command: str, groups: tuple, name: str, tmp_path: Path) -> None:
    """No float setting means infinity: nan and ±inf are refused from the command line and the YAML file alike,
    naming the source, before the dataclasses' own checks (where nan fails comparisons and inf passes them)."""
    out = ["--output_dir", str(tmp_path / "out")]
    assert _error_of(groups, [*out, f"--{name}", "nan"]) == (
        f"command line: --{name} nan: {name} must be a finite number, got nan"
    )
    assert _error_of(groups, [*out, f"--{name}", "-inf"]).startswith(f"command line: --{name} -inf: {name} must be a")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{name}: .inf\n", encoding="utf-8")
    assert _error_of(groups, [str(cfg), *out]) == f"{cfg}: {name} must be a finite number, got inf"


def _error_of(groups: tuple, argv: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(groups, argv)
    return str(err.value)


def test_a_key_given_twice_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 1.0e-4\n\nmax_steps: 2\nseed: 3\n\n\nmax_steps: 120\n", encoding="utf-8")
    assert _error([str(cfg)]) == f"{cfg}:7: max_steps is given twice (lines 3 and 7); expected each key once"
    cfg.write_text("{seed: 1, seed: 2}\n", encoding="utf-8")  # one line: a flow mapping
    assert _error([str(cfg)]) == f"{cfg}:1: seed is given twice (lines 1 and 1); expected each key once"
    # a key of the file overriding its base file is the base mechanism, not a duplicate
    (tmp_path / "base.yaml").write_text("max_steps: 2\nseed: 3\n", encoding="utf-8")
    cfg.write_text("base: base.yaml\nmax_steps: 120\n", encoding="utf-8")
    _, _, _, t = parse_config(GROUPS, [str(cfg), "--output_dir", str(tmp_path / "out")])
    assert (t.max_steps, t.seed) == (120, 3)


@pytest.mark.parametrize("value", ["-1e-5", "-1E-5", "-.5e-3", "-2.5e+1", "-3"])
def test_a_negative_number_after_a_flag_is_its_value(value: str, tmp_path: Path) -> None:
    """argparse reads only -1 and -1.5 as numbers: -1e-5 would be an unknown option, 'expected one argument'."""
    _, _, loss, _ = parse_config(GROUPS, ["--margin", value, "--output_dir", str(tmp_path)])
    assert loss.margin == float(value)
    assert _error(["--learning_rate", value, "--output_dir", str(tmp_path)]) == (
        f"command line: --learning_rate {value}: learning_rate must be >= 0.0; got {float(value)!r}"
    )


def test_setting_sources_name_where_each_value_came_from(tmp_path: Path) -> None:
    from simcse_weince.training.config import parse_config_and_sources

    cfg = tmp_path / "c.yaml"
    cfg.write_text("max_seq_length: 100000\nseed: 3\n", encoding="utf-8")
    (_, data, _, _), sources = parse_config_and_sources(GROUPS, [str(cfg), "--seed", "4", "--output_dir", "o"])
    assert sources.describe("max_seq_length", data.max_seq_length) == f"{cfg}: max_seq_length 100000"
    assert sources.describe("seed", 4) == "command line: --seed 4"  # the flag wins over the file
    assert sources.describe("q", 0.2) == "q 0.2 (the default)"
