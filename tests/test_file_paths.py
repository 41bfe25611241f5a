"""Paths in messages: a relative training file is shown resolved (against the working directory), and a folder
given where a file is expected is called a folder, whatever the command."""

from __future__ import annotations

from pathlib import Path

import pytest


def _one_error_line(capsys: pytest.CaptureFixture) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in captured.out + captured.err, err
    return err


def test_a_relative_training_file_is_shown_resolved_against_the_working_directory(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcse_weince.cli.train_text import main

    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path / "runs")
    argv = ["--model_name_or_path", str(tiny_bert_dir), "--init_from_config", "true", "--train_files",
            "data/nli.csv", "--output_dir", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = _one_error_line(capsys)
    assert err.startswith(
        f"error: training file not found: data/nli.csv (a relative path, resolved against the working directory: "
        f"{tmp_path / 'runs' / 'data' / 'nli.csv'})"
    ), err


def test_a_folder_where_a_file_is_expected_is_called_a_folder(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from simcse_weince.cli.mine import main
    from simcse_weince.evaluation.sts_data import load_sts_file
    from simcse_weince.text.row_files import write_rows

    folder = tmp_path / "triplets"
    folder.mkdir()
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\na cat,a kitten\na dog,a puppy\n")
    assert main(["--model", str(tiny_bert_dir), "--pairs", str(pairs), "--output", str(folder)]) == 2
    err = _one_error_line(capsys)
    assert err.startswith(f"error: --output {folder} is a folder; expected a file (.csv, .parquet)"), err
    with pytest.raises(IsADirectoryError, match=rf"^{folder} is a folder; expected a file \(\.csv, \.parquet\)"):
        write_rows(folder, ["sent0"], [["a"]])
    with pytest.raises(IsADirectoryError, match=rf"^STS file {folder} is a folder; expected a file \(\.csv, \.tsv"):
        load_sts_file(folder)
