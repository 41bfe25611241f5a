"""The task-family registry: a new family is one object and one registry entry (nothing else in the runner,
the report or the task spec changes), and the retrieval family's reports label the tasks constructed here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from simcse_weince.evaluation.families import FAMILIES
from simcse_weince.evaluation.family import RunOptions, TaskFamily
from simcse_weince.evaluation.runner import load_tasks, resolve_tasks, run_evaluation


class HashEncoder:
    """A fixed pseudo-random 8-d vector per sentence (from its hash): a model-free encoder."""

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        seeds = [int.from_bytes(hashlib.sha1(s.encode()).digest()[:4], "little") for s in sentences]
        return np.stack([np.random.default_rng(s).standard_normal(8) for s in seeds]).astype(np.float32)


@dataclass
class LengthResult:
    task: str
    mean_norm: float

    def to_dict(self) -> dict:
        return {"task": self.task, "mean_norm": self.mean_norm}


class LengthFamily(TaskFamily):
    """A toy family: the mean embedding norm of a few words."""

    name = "lengths"
    average_label = "Lengths Avg."

    @property
    def builtin_tasks(self) -> tuple[str, ...]:
        return ("short", "long")

    def load(self, task: str, mode: str, data_dir: Path | None) -> list[str]:
        return ["a", "b"] if task == "short" else ["a long sentence", "another long one"]

    def run(self, encoder, task: str, loaded: list[str], options: RunOptions) -> LengthResult:
        return LengthResult(task, float(np.linalg.norm(encoder.encode(loaded), axis=1).mean()))

    def headline(self, result: LengthResult, mode: str) -> float:
        return result.mean_norm

    def measure(self, mode: str) -> str:
        return "lengths: mean norm"


def test_a_new_family_is_one_object_and_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAMILIES, "lengths", LengthFamily())
    assert resolve_tasks("lengths,STSB")["lengths"] == ["short", "long"]
    assert resolve_tasks("LONG")["lengths"] == ["long"]  # task names case-insensitively, as every family's
    loaded = load_tasks("lengths", "test", None)
    seen = []
    report = run_evaluation(HashEncoder(), "m", loaded, on_task=lambda r: seen.append(r.missing_tasks()))
    assert seen[0] == ["short", "long"] and seen[-1] == []  # saved before the first task and after each
    norms = [report.lengths[t].mean_norm for t in ("short", "long")]
    js = report.to_dict()
    assert js["lengths"]["short"]["mean_norm"] == norms[0] and js["lengths_avg"] == pytest.approx(np.mean(norms))
    table = report.markdown().splitlines()
    assert table[2] == "| short | long | Lengths Avg. |" and "lengths: mean norm" in table
    with pytest.raises(ValueError, match="unknown task 'medium'"):
        resolve_tasks("medium")


def test_retrieval_reports_label_the_tasks_constructed_here(shared_data: Path, tmp_path: Path) -> None:
    from simcse_weince.evaluation.runner import write_report

    data = shared_data / "senteval" / "downstream"
    loaded = load_tasks("retrieval", "dev", data)
    assert list(loaded.retrieval) == ["STSB-paraphrase", "MRPC-paraphrase", "SICK-entailment"]
    report = run_evaluation(HashEncoder(), "hash", loaded)
    js = json.loads(write_report(report, tmp_path)[0].read_text())
    for name, res in js["retrieval"].items():
        assert res["published_benchmark"] is False and res["construction"].startswith("queries: ")
        assert 0 <= res["metrics"]["ndcg@10"] < 0.2, name  # random vectors find almost nothing
    assert res["split"] == "dev" and js["retrieval_avg"] is not None
    text = report.markdown()
    assert "constructed by this project from SentEval's files, not published benchmarks" in text
    assert "| task | queries | documents | ndcg@10 |" in text  # the detail table


def test_an_sts_file_is_a_task_spec_as_a_retrieval_folder_is(tmp_path: Path) -> None:
    """``sts:PATH`` (the training validation's spelling) runs in every mode, a comma in its path kept, and its
    report column is the file's name."""
    from simcse_weince.evaluation.sts import evaluate_sts
    from simcse_weince.evaluation.sts_data import load_sts_file

    path = tmp_path / "pairs,v2.csv"
    rows = [("A man plays.", "Someone plays.", 4.5), ("A cat.", "A car.", 0.5), ("Rain.", "It rains.", 3.0)]
    path.write_text("sentence1,sentence2,score\n" + "".join(f'"{a}","{b}",{s}\n' for a, b, s in rows))
    assert resolve_tasks(f"sts:{path},STSB")["sts"] == [f"sts:{path}", "STSBenchmark"]
    assert resolve_tasks(f"STS: {path}")["sts"] == [f"sts:{path}"]
    with pytest.raises(ValueError, match="task 'sts:' names no file; expected sts:PATH"):
        resolve_tasks("sts:")
    for mode in ("dev", "test"):
        report = run_evaluation(HashEncoder(), "hash", load_tasks(f"sts:{path}", mode, None))
        assert report.scores("sts") == {"pairs,v2": evaluate_sts(HashEncoder(), load_sts_file(path)).main}
