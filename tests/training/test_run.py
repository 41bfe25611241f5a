"""The run skeleton: resuming from the newest complete checkpoint, the λ curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcse_weince.losses import WeinceLoss
from simcse_weince.training.config import ConfigError
from simcse_weince.training.run_folder import latest_complete_checkpoint, resume_value


def _checkpoint(folder: Path, *files: str) -> Path:
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text("x")
    return folder


def test_last_skips_and_cleans_incomplete_checkpoints(tmp_path: Path) -> None:
    good = _checkpoint(tmp_path / "checkpoint-20", "model.safetensors", "trainer_state.json")
    _checkpoint(tmp_path / "checkpoint-100", "model.safetensors", "trainer_state.json")
    (tmp_path / "checkpoint-100" / "optimizer.pt.tmp3f").write_text("partial")  # killed while saving
    _checkpoint(tmp_path / "checkpoint-120", "tmpab12")  # killed right at the start of a save
    _checkpoint(tmp_path / "checkpoint-90", "model.safetensors")  # no trainer state: never finished
    _checkpoint(tmp_path / "checkpoint-5", "model.safetensors", "trainer_state.json")
    assert latest_complete_checkpoint(tmp_path, clean=False) == good
    assert (tmp_path / "checkpoint-100" / "optimizer.pt.tmp3f").exists()  # nothing touched without clean
    assert resume_value("last", tmp_path) == str(good)
    assert not (tmp_path / "checkpoint-120").exists()  # only a temporary file: removed
    assert sorted(p.name for p in (tmp_path / "checkpoint-100-incomplete").iterdir()) == [
        "model.safetensors",
        "trainer_state.json",
    ]
    assert (tmp_path / "checkpoint-90-incomplete").is_dir()
    assert resume_value("checkpoint-5", tmp_path) == "checkpoint-5" and resume_value(None, tmp_path) is None


def test_last_without_a_complete_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    _checkpoint(tmp_path / "checkpoint-3", "tmp1")
    with pytest.raises(ConfigError, match=r"no complete checkpoint-N folder in"):
        resume_value("last", tmp_path)
    with pytest.raises(ConfigError):
        resume_value("latest", tmp_path / "missing")


def test_lambda_curve() -> None:
    history = [
        {"step": 1, "loss": 2.0, "lambda_mean": 0.25},
        {"step": 2, "eval_x": 1.0},
        {"step": 3, "lambda_mean": 0.5},
    ]
    assert WeinceLoss.run_summary(history)["lambda_curve"] == [(1, 0.25), (3, 0.5)]


def test_a_checkpoint_whose_digests_were_not_written_is_incomplete(tmp_path: Path) -> None:
    """The save's last write is the record's digests: a checkpoint cut short after its trainer state (record written
    with ``files: null``) is skipped by ``last``; one saved by an earlier version (no ``files`` key) still counts."""
    from simcse_weince.training.run_record import save_record

    old = _checkpoint(tmp_path / "checkpoint-2", "model.safetensors", "trainer_state.json")
    save_record(old, {"training.seed": 1})
    (old / "run_record.json").write_text('{"training.seed": 1}')  # an earlier version's record: no digests at all
    done = _checkpoint(tmp_path / "checkpoint-4", "model.safetensors", "trainer_state.json")
    save_record(done, {"training.seed": 1}, with_digests=True)
    cut = _checkpoint(tmp_path / "checkpoint-6", "model.safetensors", "trainer_state.json")
    save_record(cut, {"training.seed": 1})  # the digests never came
    assert latest_complete_checkpoint(tmp_path, clean=False) == done
    (done / "trainer_state.json").unlink()
    assert latest_complete_checkpoint(tmp_path, clean=False) == old


def test_results_are_strict_json_with_null_for_what_is_not_a_number(tmp_path: Path) -> None:
    """A NaN score (an undefined correlation) and an infinite one were written as ``NaN`` / ``-Infinity``, which no
    strict JSON reader accepts: they are ``null``, and the file parses without Python's extensions."""
    import json

    import numpy as np

    from simcse_weince.training.run import write_results

    path = write_results(
        tmp_path,
        {"after": {"validation": float("nan")}, "best_metric_during_training": float("-inf"), "curve": [(1, np.nan)],
         "steps": 6, "loss": 0.5, "where": tmp_path},
    )  # fmt: skip

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-JSON constant {constant} in results.json")

    got = json.loads(path.read_text(), parse_constant=refuse)
    assert got == {"after": {"validation": None}, "best_metric_during_training": None, "curve": [[1, None]],
                   "steps": 6, "loss": 0.5, "where": str(tmp_path)}  # fmt: skip
