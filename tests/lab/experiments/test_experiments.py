"""The experiment drivers end to end with tiny models and data (the paper-scale script's own code path)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import argv, write_cifar10_zips
from weince_lab.experiments.common import _main_of, summary_table

pytestmark = pytest.mark.slow  # subprocesses and end-to-end runs

REPO = Path(__file__).resolve().parents[3]


def test_summary_table_paired_difference() -> None:
    runs = {
        "a": {0: {"m": 1.0}, 1: {"m": 3.0}},
        "b": {0: {"m": 2.0}, 1: {"m": 6.0}},
        "c": {0: {"m": 0.0}, 1: {"m": 3.0}, 2: {"m": 9.0}},  # seed 2 is not common to all: left out
    }
    table, summary = summary_table(runs, ["m"], "a")
    assert summary["seeds"] == [0, 1] and summary["base"] == "a"
    assert summary["losses"]["a"]["m"]["mean"] == 2.0 and summary["losses"]["b"]["m"]["mean"] == 4.0
    assert summary["difference"]["b"]["m"]["per_seed"] == [1.0, 3.0]
    assert summary["difference"]["b"]["m"]["mean"] == 2.0
    assert summary["difference"]["b"]["m"]["std"] == pytest.approx(2**0.5)
    assert summary["difference"]["c"]["m"]["per_seed"] == [-1.0, 0.0] and "a" not in summary["difference"]
    assert "| b − a (paired by seed) | +2.00 ± 1.41 |" in table
    assert "| c − a (paired by seed) | -0.50 ± 0.71 |" in table


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHON": sys.executable}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.timeout(900)
def test_paper_scale_script_with_a_tiny_model(tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "paper"
    driver = argv(
        "bash", "experiments/paper_scale.sh", seeds=[0, 1], eval_tasks="STSB,CR", eval_mode="fast",
        runs_dir=tmp_path / "runs", out=out,
    )  # fmt: skip
    training = argv(
        model_name_or_path=tiny_bert_dir, init_from_config=True, train_files=wiki_sample,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=64, max_seq_length=16,
        per_device_train_batch_size=16, max_steps=2, eval_steps=2, save_steps=2, eval_max_pairs=40,
        min_tail_points=10, eval_test_at_end=False,
    )  # fmt: skip
    _run([*driver, "--extra", *training])  # --extra passes the rest to every training run
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["seeds"] == [0, 1] and set(summary["losses"]) == {"infonce", "weince-ols"}
    for metric in ("STS-B", "CR", "alignment", "uniformity"):
        assert len(summary["difference"]["weince-ols"][metric]["per_seed"]) == 2
    assert "weince-ols − infonce (paired by seed)" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").stat().st_size > 5000


@pytest.mark.timeout(900)
def test_vision_experiment_with_tiny_data(tmp_path: Path) -> None:
    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "vision"
    driver = argv(
        sys.executable, "-m", "weince_lab.experiments.vision_cpu", seeds=[0, 1], runs_dir=tmp_path / "runs", out=out
    )
    training = argv(
        data_dir=root, train_per_class=8, probe_train_per_class=8, probe_test_per_class=4, num_train_epochs=1,
        per_device_train_batch_size=8, per_device_eval_batch_size=8, min_tail_points=10, dataloader_num_workers=0,
    )  # fmt: skip
    _run([*driver, "--extra", *training])  # --extra passes the rest to every training run
    summary = json.loads(out.with_suffix(".json").read_text())
    assert set(summary["losses"]) == {"infonce", "weince"} and summary["seeds"] == [0, 1]
    assert len(summary["difference"]["weince"]["linear_probe"]["per_seed"]) == 2


def test_a_run_log_is_appended_after_a_line_naming_the_command(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "tiny_cmd.py").write_text("def main(args):\n    print('ran', *args)\n    return len(args) - 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "run.log"
    codes = []
    for args in (["a"], ["b", "c"]):  # a killed run, then its resume: the first output is kept
        driver = os.getpid()
        proc = multiprocessing.get_context("fork").Process(
            target=_main_of, args=("tiny_cmd", args, str(log), {}, driver)
        )
        proc.start()
        proc.join()
        codes.append(proc.exitcode)
    assert codes == [0, 1]
    assert log.read_text().splitlines() == ["$ python -m tiny_cmd a", "ran a", "$ python -m tiny_cmd b c", "ran b c"]
