"""The prepared GPU check: its figures are checked (a diverged run is a failed row), and the whole script runs
at toy sizes on the CPU (``--cpu-smoke``), every check ok or skipped, one table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from weince_lab.experiments.gpu_check import check_text

REPO = Path(__file__).resolve().parents[3]


def _results(path: Path, loss: float, lam: float | None) -> Path:
    res = {"train_loss": loss, "mean_lambda": lam, "before": {"stsb_dev": 80.0}, "after": {"stsb_dev": 81.5}}
    path.write_text(json.dumps(res), encoding="utf-8")
    return path


def test_text_figures_and_failures(tmp_path: Path) -> None:
    ok = check_text(_results(tmp_path / "a.json", 0.25, 0.4))
    assert "loss 0.250" in ok and "mean λ 0.400" in ok and "80.00 → 81.50" in ok
    with pytest.raises(RuntimeError, match="loss is nan"):
        check_text(_results(tmp_path / "b.json", float("nan"), 0.4))
    with pytest.raises(RuntimeError, match="not in"):
        check_text(_results(tmp_path / "c.json", 0.25, 1.5))
    with pytest.raises(RuntimeError, match="not in"):
        check_text(_results(tmp_path / "d.json", 0.25, None))


def test_without_cuda_the_gpu_run_stops_with_one_line(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = subprocess.run(
        [sys.executable, "-m", "weince_lab.experiments.gpu_check", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout.strip().startswith("error: no CUDA device")


SKIPPED_ON_THE_CPU = ("text fp16", "grad cache tests", "classifier graph tests", "2 processes")
RUN_ON_THE_CPU = ("text bf16", "throughput", "grad cache", "vision", "eval bf16", "transfer classifiers")


def cpu_smoke(out: Path, *checks: str, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """``gpu_check.sh --cpu-smoke [EXTRA] --only CHECKS``: the status of each row of its table."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["bash", "experiments/gpu_check.sh", "--cpu-smoke", "--out", str(out), *extra, "--only", *checks],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    return {r.split(" | ")[0][2:]: r.split(" | ")[1] for r in rows}


def test_the_cpu_smoke_covers_every_check() -> None:
    from weince_lab.experiments.gpu_check import CHECKS

    assert sorted(SKIPPED_ON_THE_CPU + RUN_ON_THE_CPU) == sorted(CHECKS)


def test_cpu_smoke_skips_what_needs_cuda(tmp_path: Path) -> None:
    assert cpu_smoke(tmp_path, *SKIPPED_ON_THE_CPU) == dict.fromkeys(SKIPPED_ON_THE_CPU, "skipped")


def check_grad_cache(out: Path) -> None:
    """``bench/grad_cache.py``'s ratios against their definitions (the measured figures are not asserted): peak
    against the first point's peak; time as ms per sentence against the uncached step at the same batch, ``None``
    (printed ``-``) where no uncached step of that batch was measured (points 8:0, 8:3, 6:2)."""
    rows = json.loads((out / "grad_cache.json").read_text())
    assert [(r["batch"], r["chunk"]) for r in rows] == [(8, 0), (8, 3), (6, 2)]
    assert all(r["peak_mb"] > 0 and r["step_s"] > 0 for r in rows)
    uncached, cached, unmatched = rows
    for r in rows:
        assert r["ms_per_sentence"] == pytest.approx(1e3 * r["step_s"] / r["batch"], rel=1e-12)
        assert r["peak_ratio"] == pytest.approx(r["peak_mb"] / uncached["peak_mb"], rel=1e-12)
    assert cached["time_ratio"] == pytest.approx(cached["ms_per_sentence"] / uncached["ms_per_sentence"], rel=1e-12)
    assert unmatched["time_ratio"] is None  # no uncached step at batch 6
    printed = (out / "grad_cache.log").read_text()
    assert "peak / base" in printed and "time / uncached" in printed
    table = [line.split() for line in printed.splitlines() if line.split()[:2] in (["8", "3"], ["6", "2"])]
    assert [row[-2:] for row in table] == [
        [f"{cached['peak_ratio']:.2f}", f"{cached['time_ratio']:.2f}"],
        [f"{unmatched['peak_ratio']:.2f}", "-"],
    ]


def check_transfer(out: Path) -> None:
    """``bench/eval_speed.py --classifiers``: scikit-learn and two SentEval engines timed in one run on the same
    embeddings; the engines fit the same models (same accuracies)."""
    res = json.loads((out / "transfer.json").read_text())
    assert set(res["engine_totals"]) == {"eager", "static"} and res["totals"]["senteval"] > 0
    (row,) = res["tasks"]
    eager, static = row["engines"]["eager"], row["engines"]["static"]
    assert (eager["dev_acc"], eager["test_acc"]) == (static["dev_acc"], static["test_acc"])
    assert row["senteval"]["classifier"] == "senteval" and row["sklearn"]["classifier"] == "sklearn"
    printed = (out / "transfer.log").read_text()
    assert "CR" in printed and "target: sklearn / senteval >= 5" in printed


CHECKED = {
    "text bf16": lambda out: (out / "text_bf16" / "results.json").is_file(),
    "vision": lambda out: (out / "vision" / "results.json").is_file(),
    "grad cache": check_grad_cache,
    "transfer classifiers": check_transfer,
}


# The rows that run a benchmark script (bench/train_throughput.py, bench/grad_cache.py, bench/eval_speed.py): with
# the benchmarks' own tests in `make test-bench`, not `make test` (a minute each on an AVX2-only CPU).
BENCH_ROWS = ("throughput", "grad cache", "transfer classifiers")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "check", [pytest.param(c, marks=pytest.mark.bench) if c in BENCH_ROWS else c for c in RUN_ON_THE_CPU]
)
def test_cpu_smoke_runs_each_check(check: str, tmp_path: Path, tiny_bert_weights_dir: Path) -> None:
    """Each check at toy sizes on the CPU, one at a time (the transfer row on stored random embeddings of the
    CR sentences: its classifiers, not MiniLM's encoding, are what it times), then what it wrote. The text row
    trains the tests' tiny BERT (``--text-model``): MiniLM in bf16 took 4 min on an AVX2-only CPU, where bf16 is
    emulated."""
    if check == "transfer classifiers":
        write_random_embeddings(tmp_path / "transfer_embeddings.pkl", "CR")
    extra = ("--text-model", str(tiny_bert_weights_dir)) if check.startswith("text") else ()
    assert cpu_smoke(tmp_path, check, extra=extra) == {check: "ok"}
    if check in CHECKED:
        assert CHECKED[check](tmp_path) is not False


def write_random_embeddings(path: Path, task: str) -> None:
    """Seeded random 8-d vectors for every sentence of ``task`` (fast mode), as ``bench/eval_speed.py
    --embeddings`` stores them for the model the GPU check uses."""
    import pickle

    import numpy as np

    from simcse_weince.core.paths import senteval_root
    from simcse_weince.evaluation.runner import load_tasks
    from weince_lab.experiments.gpu_check import MINILM

    loaded = load_tasks(task, "fast", senteval_root()).transfer[task]
    sentences = sorted({s for split in loaded.splits.values() for s in split.sentences})
    rng = np.random.default_rng(0)
    cache = {s: rng.standard_normal(8).astype(np.float32) for s in sentences}
    path.write_bytes(pickle.dumps({"model": MINILM, "cache": cache}))


def test_unknown_check_name_is_one_line_error(capsys: pytest.CaptureFixture) -> None:
    from weince_lab.experiments.gpu_check import main

    assert main(["--cpu-smoke", "--only", "vision", "text bf17"]) == 2
    out = capsys.readouterr().out.strip()
    assert (
        out.startswith("error: --only: unknown check(s) 'text bf17'; expected some of: text fp16") and "\n" not in out
    )


def test_run_keeps_the_callers_pythonpath_and_ends_a_timed_out_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from weince_lab.experiments.gpu_check import run

    monkeypatch.setenv("PYTHONPATH", "/somewhere/site")
    out = run([sys.executable, "-c", "import os; print(os.environ['PYTHONPATH'])"], tmp_path / "a.log")
    assert out.strip() == os.pathsep.join([str(REPO), "/somewhere/site"])
    # a child that starts a grandchild writing a file after 3 s: the timeout must end both
    marker = tmp_path / "late"
    grandchild = f"import time, pathlib; time.sleep(3); pathlib.Path({str(marker)!r}).write_text('x')"
    child = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(60)"
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="timed out after 1 s"):
        run([sys.executable, "-c", child], tmp_path / "b.log", timeout=1)
    assert time.perf_counter() - t0 < 30
    time.sleep(4)
    assert not marker.exists()


def test_bad_check_timeout_is_one_line_error(capsys: pytest.CaptureFixture) -> None:
    from weince_lab.experiments.gpu_check import main

    assert main(["--cpu-smoke", "--check-timeout", "0"]) == 2
    assert capsys.readouterr().out.strip() == "error: --check-timeout 0: expected a number of seconds >= 1"


def test_bad_model_is_one_line_error_before_any_check(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from weince_lab.experiments.gpu_check import main

    assert main(["--cpu-smoke", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("error: --model: model ") and "no such path" in out and "\n" not in out
    assert not (tmp_path / "out").exists()
