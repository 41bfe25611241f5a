"""Transfer loaders (sizes, bad rows), the classifier protocol, and the task runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from simcse_weince.evaluation.runner import CachingEncoder, resolve_tasks
from simcse_weince.evaluation.transfer import cv_protocol, evaluate_transfer, pair_features, select_c
from simcse_weince.evaluation.transfer_data import Split, TransferTask, load_transfer_task


@pytest.fixture(scope="module")
def senteval(shared_data: Path) -> Path:
    return shared_data / "senteval" / "downstream"


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("MR", {"all": 10662}),
        ("CR", {"all": 3775}),
        ("SUBJ", {"all": 10000}),
        ("MPQA", {"all": 10606}),
        ("SST2", {"train": 67349, "dev": 872, "test": 1821}),
        ("TREC", {"train": 5452, "test": 500}),
        ("MRPC", {"train": 4076, "test": 1725}),
    ],
)
def test_task_sizes(senteval: Path, name: str, sizes: dict[str, int]) -> None:
    task = load_transfer_task(name, senteval)
    assert {k: len(v) for k, v in task.splits.items()} == sizes
    assert task.empty_sentences == {"CR": 4, "MPQA": 3}.get(name, 0)
    labels = np.concatenate([s.labels for s in task.splits.values()])
    assert set(np.unique(labels)) == set(range(task.num_classes))


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "TREC").mkdir()
    (tmp_path / "TREC" / "train_5500.label").write_text("NUM:dist How far ?\nWHAT:x odd label\n")
    (tmp_path / "TREC" / "TREC_10.label").write_text("NUM:dist How far ?\n")
    with pytest.raises(ValueError, match=r"train_5500\.label:2: expected 'COARSE:fine question'"):
        load_transfer_task("TREC", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"rt-polarity\.pos"):
        load_transfer_task("MR", tmp_path)
    with pytest.raises(FileNotFoundError, match="no SentEval data folder"):
        load_transfer_task("MR", None)


def _blobs(n: int, d: int, classes: int, sep: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centers = rng.normal(size=(classes, d)) * sep
    return centers[y] + rng.normal(size=(n, d)), y


def test_classifier_on_separable_data() -> None:
    x, y = _blobs(200, 5, 2, sep=10.0)
    dev, test, chosen = cv_protocol(x, y, k=5, seed=1)
    assert dev == pytest.approx(100.0) and test == pytest.approx(100.0) and len(chosen) == 5
    x, y = _blobs(200, 5, 2, sep=0.0)  # no signal: chance level, so the check above can fail
    assert cv_protocol(x, y, k=5, seed=1)[1] < 70


def test_fold_logic_counts() -> None:
    y = np.array([0] * 30 + [1] * 20)
    folds = list(StratifiedKFold(n_splits=10, shuffle=True, random_state=1111).split(np.zeros(50), y))
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(50))  # every sample is tested exactly once
    assert all(len(te) == 5 and y[te].sum() == 2 for _, te in folds)  # stratified: 3:2 in each fold
    x, yy = _blobs(60, 3, 2, sep=10.0)
    c, acc = select_c(x, yy, k=3, seed=0)
    assert c == 0.25 and acc == pytest.approx(1.0)  # ties go to the smallest penalty on the grid


class _Lookup:
    """A fake encoder: fixed vectors per sentence."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.calls = 0

    def encode(self, sentences):
        self.calls += 1
        return np.stack([self.table[s] for s in sentences]).astype(np.float32)


def test_evaluate_transfer_protocols() -> None:
    x, y = _blobs(120, 4, 3, sep=8.0)
    names = [f"s{i}" for i in range(120)]
    enc = _Lookup(dict(zip(names, x, strict=True)))
    test_task = TransferTask("T", "test", {"train": Split(names[:80], y[:80]), "test": Split(names[80:], y[80:])}, 3)
    res = evaluate_transfer(enc, test_task, k=4)
    assert res.test_acc == pytest.approx(100.0) and res.test_f1 is None and (res.num_train, res.num_test) == (80, 40)
    dev_task = TransferTask(
        "D",
        "dev",
        {"train": Split(names[:60], y[:60]), "dev": Split(names[60:90], y[60:90]), "test": Split(names[90:], y[90:])},
        3,
    )
    assert evaluate_transfer(enc, dev_task).test_acc == pytest.approx(100.0)
    is0 = (y == 0).astype(int)
    pairs = {"train": Split(names[:60], is0[:60], names[60:120]), "test": Split(names[:30], is0[:30], names[30:60])}
    pair_task = TransferTask("P", "test", pairs, 2)
    res = evaluate_transfer(enc, pair_task, k=3)
    assert res.test_f1 is not None and 0 <= res.test_f1 <= 100


def test_pair_features() -> None:
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    np.testing.assert_allclose(pair_features(u, v), [[2.0, 3.0, 3.0, -2.0]])


def test_resolve_tasks_and_cache() -> None:
    assert (
        resolve_tasks("sts")["sts"][-2:] == ["STSBenchmark", "SICKRelatedness"]
        and resolve_tasks("sts")["transfer"] == []
    )
    assert resolve_tasks("all")["transfer"] == ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
    assert resolve_tasks("STSB,sick-r,SST-2,TREC") == {
        "sts": ["STSBenchmark", "SICKRelatedness"],
        "transfer": ["SST2", "TREC"],
        "retrieval": [],
    }
    with pytest.raises(ValueError, match="unknown task 'STS17'"):
        resolve_tasks("STS17")
    inner = _Lookup({"a": np.ones(2), "b": np.zeros(2)})
    cache = CachingEncoder(inner)
    cache.encode(["a", "b", "a"])
    out = cache.encode(["b", "a"])
    assert inner.calls == 1 and out.tolist() == [[0, 0], [1, 1]]


class _TableEncoder:
    """An encoder that looks sentences up in a table (the synthetic features of a task)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, sentences):
        return np.stack([self.table[s] for s in sentences]).astype(np.float32)


def test_senteval_protocol_equals_the_per_model_reference() -> None:
    import torch

    from simcse_weince.evaluation.senteval_classifier import ClassifierConfig
    from simcse_weince.evaluation.transfer_data import senteval_order
    from tests.evaluation.senteval_reference import reference_inner_kfold

    x, y = _blobs(90, 5, 2, 0.6, seed=3)  # overlapping classes: the penalty and folds matter
    words = ["w"] * 12
    sentences = [" ".join(words[: 1 + (i * 7) % 11]) + f" s{i}" for i in range(len(y))]  # varied lengths
    task = TransferTask("toy", "cv", {"all": Split(sentences, y)}, 2)
    cfg = ClassifierConfig("adam", 16, 2, 2, max_epoch=10)
    res = evaluate_transfer(_TableEncoder(dict(zip(sentences, x, strict=True))), task, k=3, classifier="senteval",
                            config=cfg, device="cpu")  # fmt: skip
    order = senteval_order(task.splits["all"])  # SentEval's sort by (tokens, label)
    assert [len(sentences[i].split()) for i in order] == sorted(len(s.split()) for s in sentences)
    xs, ys = torch.as_tensor(x[order], dtype=torch.float32), torch.as_tensor(y[order])
    dev, test, chosen = reference_inner_kfold(xs, ys, 2, 3, cfg)
    assert (res.dev_acc, res.test_acc, res.chosen_c) == (dev, test, chosen)
    assert res.classifier == "senteval" and res.classifier_seconds > 0


@pytest.mark.parametrize("protocol", ["test", "dev"])
def test_senteval_split_protocols_equal_the_per_model_reference(protocol: str) -> None:
    import torch

    from simcse_weince.evaluation.senteval_classifier import ClassifierConfig
    from tests.evaluation.senteval_reference import reference_kfold, reference_split

    x, y = _blobs(150, 4, 3, 0.7, seed=4)
    sentences = [f"{'w ' * (i % 6)}s{i}" for i in range(len(y))]  # SentEval's order is by token count
    parts = {"train": slice(0, 90), "dev": slice(90, 120), "test": slice(120, 150)}
    if protocol == "test":
        parts = {"train": slice(0, 110), "test": slice(110, 150)}
    splits = {k: Split(sentences[s], y[s]) for k, s in parts.items()}
    task = TransferTask("toy", protocol, splits, 3)
    cfg = ClassifierConfig("rmsprop", 16, 2, 2, max_epoch=10)
    res = evaluate_transfer(_TableEncoder(dict(zip(sentences, x, strict=True))), task, k=3, classifier="senteval",
                            config=cfg, device="cpu")  # fmt: skip
    from simcse_weince.evaluation.transfer_data import senteval_order

    def tensors(name: str):
        order = senteval_order(splits[name])
        return torch.as_tensor(x[parts[name]][order], dtype=torch.float32), torch.as_tensor(y[parts[name]][order])

    if protocol == "test":
        expected = reference_kfold(tensors("train"), tensors("test"), 3, 3, cfg)
    else:
        expected = reference_split(tensors("train"), tensors("dev"), tensors("test"), 3, cfg)
    assert (res.dev_acc, res.test_acc, res.chosen_c) == (expected[0], expected[1], [expected[2]])


@pytest.mark.parametrize("sep", [10.0, 0.0])
def test_senteval_classifier_on_separable_and_on_noise(sep: float) -> None:
    from simcse_weince.evaluation.senteval_classifier import FAST_CONFIG

    x, y = _blobs(200, 5, 2, sep=sep)
    sentences = [f"s{i}" for i in range(len(y))]
    task = TransferTask("toy", "cv", {"all": Split(sentences, y)}, 2)
    res = evaluate_transfer(_TableEncoder(dict(zip(sentences, x, strict=True))), task, k=5, classifier="senteval",
                            config=FAST_CONFIG, device="cpu")  # fmt: skip
    if sep:
        assert res.dev_acc == pytest.approx(100.0) and res.test_acc == pytest.approx(100.0)
    else:
        assert res.test_acc < 70  # chance level: the check above can fail
    assert len(res.chosen_c) == 5 and set(res.chosen_c) <= {1e-5, 1e-4, 1e-3, 1e-2}


def test_runner_shows_classifier_progress_and_one_table(capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.evaluation.runner import TaskSet, run_evaluation
    from simcse_weince.evaluation.sts import STSResult

    x, y = _blobs(90, 4, 2, sep=6.0)
    names = [f"s{i}" for i in range(90)]
    task = TransferTask("T", "test", {"train": Split(names[:60], y[:60]), "test": Split(names[60:], y[60:])}, 2)
    loaded = TaskSet.of("fast", transfer={"T": task})
    report = run_evaluation(_TableEncoder(dict(zip(names, x, strict=True))), "m", loaded, show_progress_bar=True)
    bars = capsys.readouterr().err
    assert "T: penalty search" in bars and "T: refit on the training set" in bars
    report.sts["STSBenchmark"] = STSResult("STSBenchmark", 10, 0, {"all": 80.0})
    report.sts["SICKRelatedness"] = STSResult("SICKRelatedness", 10, 0, {"all": 70.0})
    table = report.markdown().splitlines()
    acc = report.transfer["T"].test_acc
    assert table[2] == "| STS-B | SICK-R | STS Avg. | T | Transfer Avg. |"
    assert table[4] == f"| 80.00 | 70.00 | 75.00 | {acc:.2f} | {acc:.2f} |"


def test_sklearn_fits_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scikit-learn path pins BLAS to one thread during its fits (measured: 2 threads 19× slower on 2 cores,
    and a 16-core GPU machine never finished CR in test mode), and restores the caller's setting after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import simcse_weince.evaluation.transfer as transfer

    seen: list[int] = []
    real_fit = transfer._fit

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(transfer, "_fit", spy)
    x, y = _blobs(60, 4, 2, sep=8.0)
    names = [f"s{i}" for i in range(60)]
    task = TransferTask("T", "test", {"train": Split(names[:40], y[:40]), "test": Split(names[40:], y[40:])}, 2)
    with threadpool_limits(limits=2, user_api="blas"):
        evaluate_transfer(_Lookup(dict(zip(names, x, strict=True))), task, k=2, classifier="sklearn")
        after = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert seen and set(seen) == {1}
    assert after and set(after) == {2}
