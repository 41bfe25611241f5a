"""The benchmark scripts run end to end at toy size (their figures are read by people, not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bench]  # subprocesses of the benchmarks: `make test-bench`

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_train_throughput_profile_splits_each_recipe_into_phases(wiki_sample: Path) -> None:
    options = "--steps 5 --profile 2 --batch 8 --layers 1 --hidden 32 --max-len 16 --variants ours-infonce".split()
    cmd = [sys.executable, "bench/train_throughput.py", *options, "--data", str(wiki_sample)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {}
    for line in proc.stdout.splitlines():
        parts = line.rsplit(maxsplit=2)  # the phase, then one column per variant
        if len(parts) == 3 and parts[0] in ("data", "encoder forward", "loss", "backward", "optimizer", "total"):
            rows[parts[0]] = [float(x) for x in parts[1:]]
    assert set(rows) == {"data", "encoder forward", "loss", "backward", "optimizer", "total"}, proc.stdout
    for phase, values in rows.items():  # ours-infonce and st-mnrl (the GPU check's smoke runs ours-weince)
        assert len(values) == 2 and all(v > 0 for v in values), (phase, values)
    for v in range(2):
        assert sum(rows[p][v] for p in ("encoder forward", "loss", "backward")) < rows["total"][v]
    assert proc.stdout.count("top ops by self time") == 2 and "ours-weince" not in proc.stdout


def scaling_rows(tmp_path: Path, lines: int, big_lines: int) -> tuple[dict[str, list[list[float]]], str]:
    """``bench/scaling.py --data-only``: its training-text rows by label, and its output."""
    cmd = [sys.executable, "bench/scaling.py", "--data-only", "--lines", str(lines), "--big-lines", str(big_lines),
           "--tmp", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows: dict[str, list[list[float]]] = {}
    for line in proc.stdout.splitlines():
        label, _, numbers = line.partition("  ")
        fields = numbers.replace(",", "").split()
        if label in ("in-memory (before)", "cache built", "cache reused", "other process (maps + 1 pass)"):
            rows.setdefault(label, []).append([float(x) for x in fields])
    assert "GB mapped file pages" in proc.stdout and not list(tmp_path.iterdir())  # temporary files removed
    return rows, proc.stdout


@pytest.mark.timeout(600)
def test_scaling_training_text_table_compares_the_cache_with_the_in_memory_path(tmp_path: Path) -> None:
    """At ``--lines`` the in-memory path and the cache (built, reused, read by another process), ratios against the
    in-memory row. One size only: each row is its own process (~10 s of imports), and ``--big-lines`` runs the
    same cache rows without the in-memory one."""
    rows, out = scaling_rows(tmp_path, 3000, 0)
    assert [len(v) for v in rows.values()] == [1, 1, 1, 1], out
    assert rows["in-memory (before)"][0][0] == 3000
    assert [r[0] for r in rows["cache built"]] == [3000] == [r[0] for r in rows["cache reused"]]
    assert rows["in-memory (before)"][0][-2:] == [1.0, 1.0]  # the reference of the ratios
    # (that a hit is not a rebuild is tested without timing in tests/text/test_token_cache.py: no tokenizer call;
    # a timed ratio here failed under load, and speed belongs to the bench's own figures, not to assertions)


# bench/eval_speed.py --classifiers runs in the GPU check's CPU smoke (tests/lab/experiments/test_gpu_check.py), which
# checks its engines and figures on stored random embeddings.


def test_eval_speed_refuses_an_unknown_engine_before_loading_anything() -> None:
    cmd = [sys.executable, "bench/eval_speed.py", "--classifiers", "--engines", "eager,fused", "--model", "/none"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "'fused' is not one of auto, eager, static, graph" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_checkpoint_digest_bench_prints_its_ratios(tmp_path: Path) -> None:
    """``bench/checkpoint_digest.py --tiny``: the save, the digest pass and their ratio, and the training file's."""
    text = tmp_path / "lines.txt"
    text.write_text("".join(f"sentence number {i}\n" for i in range(200)), encoding="utf-8")
    cmd = [sys.executable, "bench/checkpoint_digest.py", "--tiny", "--repeats", "1", "--text", str(text)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "digest / save = " in proc.stdout and "in 4 files" in proc.stdout
    assert "lines.txt (0.0 MB, 200 lines)" in proc.stdout and "digest / tokenising = " in proc.stdout


def test_bf16_linear_bench_prints_both_times_and_their_ratio() -> None:
    """``bench/bf16_linear.py``: the ratio is bf16 / fp32 of the medians it prints, and the native-bf16 line is
    torch's own reading (here in this process)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bf16_linear import main
    finally:
        sys.path.remove(str(REPO / "bench"))
    from simcse_weince.core.hardware import cpu_has_native_bf16

    res = main(["--repeats", "2"])
    assert res["fp32_ms"] > 0 and res["bf16_ms"] > 0
    assert res["ratio"] == pytest.approx(res["bf16_ms"] / res["fp32_ms"], rel=1e-12)
    assert res["native"] == float(cpu_has_native_bf16())


@pytest.mark.timeout(600)
@pytest.mark.parametrize("recipes", [["unsup"], ["sup"], ["encode", "startup"]])  # three parts: each well under 60 s
def test_st_side_by_side_runs_every_recipe_on_both_sides_in_alternating_pairs(
    recipes: list[str], tmp_path: Path
) -> None:
    """``bench/st_side_by_side.py --toy``: each recipe's figures for this project and sentence-transformers, and
    each ratio is sentence-transformers' figure over ours, pair by pair (the four recipes over the three cases)."""
    out = tmp_path / "side_by_side.json"
    cmd = [sys.executable, "bench/st_side_by_side.py", "--toy", "--recipes", *recipes, "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert list(summary) == recipes
    for recipe, row in summary.items():
        runs = row["runs"]
        assert [len(runs[s]) for s in ("ours", "st")] == [1, 1]
        for key in ("step_s", "step_cpu_s", "process_s"):
            fig = row[key]
            assert fig["ours"] > 0 and fig["st"] > 0
            assert fig["pair_ratios"] == [pytest.approx(runs["st"][0][key] / runs["ours"][0][key])]
        if recipe in ("unsup", "sup"):  # 4 steps each; ours evaluates and saves after its last step, ST does not
            assert runs["ours"][0]["steps"] == runs["st"][0]["steps"] == 4
            assert row["after_last_step_s"]["ours"] > row["after_last_step_s"]["st"]
        assert f"{recipe:<8}" in proc.stdout
    if "startup" in summary:  # the imports are timed inside the process, so they are part of it
        startup = summary["startup"]["runs"]
        assert all(r["step_s"] < r["process_s"] for side in ("ours", "st") for r in startup[side])


@pytest.mark.timeout(600)
def test_st_side_by_side_profiles_both_sides_and_passes_our_arguments(tmp_path: Path) -> None:
    """``--profile 1 --ours-args '--length_groups 1'``: each side's step split into phases; our command takes
    the extra argument (a bad one stops our side's run, so the benchmark fails naming it)."""
    base = [sys.executable, "bench/st_side_by_side.py", "--toy", "--recipes", "unsup", "--profile", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "profile.json"
    proc = subprocess.run([*base, "--ours-args=--length_groups 1", "--json", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = json.loads(out.read_text(encoding="utf-8"))["unsup"]["runs"]
    for side in ("ours", "st"):
        phases = runs[side][0]["profile"]["phases_ms"]
        assert phases["total"] > 0 and phases["encoder forward"] > 0 and phases["backward"] > 0
        assert f"{side} profile, ms per step:" in proc.stdout
    bad = subprocess.run([*base, "--ours-args=--length_groups 0"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert bad.returncode != 0 and "length_groups must be an integer >= 1, got 0" in bad.stdout + bad.stderr


def test_length_groups_bench_prints_positions_and_speed_per_group_count() -> None:
    """``bench/length_groups.py --toy``: one row per g; the token positions fall as g grows (g = 1 the
    reference), every g timed."""
    cmd = [sys.executable, "bench/length_groups.py", "--toy"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2, 4, 8], proc.stdout
    shares = [float(r[2]) for r in rows]
    assert shares[0] == 1.0 and shares == sorted(shares, reverse=True) and shares[-1] < 0.9, proc.stdout
    assert all(float(r[3]) > 0 and r[4].endswith("x") for r in rows), proc.stdout
