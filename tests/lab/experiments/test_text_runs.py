"""weince_lab.experiments.text_runs' per-run report (issue 44) on fabricated run folders, without training: the dev
curve from
the checkpoints' log histories, the training minutes, the tables, a report without STS, the ``--diagnose`` cache,
and the mean cosine behind :func:`weince_lab.experiments.text_space.anisotropy`."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from weince_lab.experiments import text_runs
from weince_lab.experiments.text_runs import (
    curve_from_logs,
    dev_curve,
    diagnose_table,
    diagnostics,
    interval_table,
    lambda_table,
    run_folder,
    run_stats,
    score_row,
    time_table,
)
from weince_lab.experiments.text_space import mean_pair_cosine, random_pairs

SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}


def state(*entries: dict) -> dict:
    return {"global_step": max(e["step"] for e in entries), "log_history": list(entries)}


def eval_entry(step: int, score: float, metric: str = "stsb_spearman") -> dict:
    return {"step": step, "epoch": step / 100, f"eval_{metric}": score, "eval_runtime": 1.0}


def test_curve_from_logs_orders_merges_and_puts_before_at_step_zero() -> None:
    newest = [{"step": 10, "loss": 2.0}, eval_entry(20, 71.0), eval_entry(40, 73.5), {"step": 40, "lambda_mean": 0.2}]
    best = [eval_entry(20, 71.0)]  # the same evaluation in an older checkpoint's history
    assert curve_from_logs([newest, best], "stsb_spearman", before=60.25) == [[0, 60.25], [20, 71.0], [40, 73.5]]
    assert curve_from_logs([newest], "stsb_spearman") == [[20, 71.0], [40, 73.5]]
    assert curve_from_logs([newest], "sts_spearman") == []  # another metric's log key
    assert curve_from_logs([], "stsb_spearman") == []


def test_dev_curve_from_the_checkpoints_and_results(tmp_path: Path) -> None:
    for step, entries in ((20, [eval_entry(20, 70.0)]), (60, [eval_entry(20, 70.0), eval_entry(40, 72.0),
                                                                eval_entry(60, 71.5)])):  # fmt: skip
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state(*entries)))
    results = {"before": {"stsb_dev": 55.0, "stsb_test": 50.0}, "after": {"stsb_dev": 72.0},
               "validation": {"setting": "stsb", "label": "STS-B dev", "metric": "stsb_spearman"}}  # fmt: skip
    assert dev_curve(tmp_path, results) == [[0, 55.0], [20, 70.0], [40, 72.0], [60, 71.5]]
    # without eval_before_training and without a validation record (older runs): the STS-B dev default, no step 0
    assert dev_curve(tmp_path, {"before": {}}) == [[20, 70.0], [40, 72.0], [60, 71.5]]
    # another validation set: its metric and train_text's "validation" key for the score before training
    other = {"before": {"validation": 40.0}, "validation": {"setting": "sts:x.csv", "metric": "sts_spearman"},
             "log_history": [eval_entry(80, 45.0, "sts_spearman")]}  # fmt: skip
    assert dev_curve(tmp_path, other) == [[0, 40.0], [80, 45.0]]
    assert dev_curve(tmp_path / "checkpoint-20", {}) == []  # no checkpoint below it


def test_run_stats_train_minutes_and_lambda() -> None:
    r = run_stats({"train_seconds": 330.0, "mean_lambda": 0.25, "mean_rho": 0.1, "link_a_final": 18.0, "steps": 9})
    assert r["train_minutes"] == pytest.approx(5.5)
    assert r["lambda"] == 0.25 and r["rho"] == 0.1 and r["link_a_final"] == 18.0
    assert r["delta_aic"] is None and r["link_b_final"] is None
    assert run_stats({})["train_minutes"] is None


def test_score_row_without_sts_or_transfer() -> None:
    transfer_only = {"transfer": {"SST2": {"test_acc": 80.5, "dev_acc": 81.0}}, "transfer_avg": 80.5}
    assert score_row(transfer_only, "test", SHORT) == {"SST2": 80.5, "transfer avg": 80.5}
    assert score_row(transfer_only, "dev", SHORT) == {"SST2": 81.0, "transfer avg": 80.5}
    sts_only = {"sts": {"STSBenchmark": {"spearman": {"all": 77.0}}, "STS12": {"spearman": {"all": 60.0}}},
                "sts_avg": 68.5}  # fmt: skip
    assert score_row(sts_only, "test", SHORT) == {"STS-B": 77.0, "STS12": 60.0, "STS avg": 68.5}
    assert score_row({}, "test", SHORT) == {}


def test_time_table() -> None:
    stats = {"infonce": {0: {"train_minutes": 4.0}, 1: {"train_minutes": 6.0}},
             "weince-ols": {0: {"train_minutes": 5.0}, 1: {"train_minutes": None}}}  # fmt: skip
    assert time_table(stats).splitlines() == [
        "| variant | minutes per run | runs |",
        "|---|---|---|",
        "| infonce | 5.0 ± 1.4 | 2 |",
        "| weince-ols | 5.0 ± 0.0 | 1 |",
    ]
    assert time_table({"infonce": {0: {"train_minutes": None}}}) == ""


def test_interval_table_is_the_student_t_interval_of_the_paired_differences() -> None:
    from weince_lab.experiments.common import summary_table

    per_run = {"infonce": {0: {"STS-B": 70.0}, 1: {"STS-B": 72.0}, 2: {"STS-B": 71.0}},
               "weince-ols": {0: {"STS-B": 71.0}, 1: {"STS-B": 72.0}, 2: {"STS-B": 73.0}}}  # fmt: skip
    _, summary = summary_table(per_run, ["STS-B"], "infonce")
    lines = interval_table(summary, ["STS-B"]).splitlines()
    # differences 1, 0, 2: mean 1, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051 = 2.484138
    assert lines[-1] == "| weince-ols − infonce | +1.00 [-1.48, +3.48] |"
    low, high = summary["difference"]["weince-ols"]["STS-B"]["interval95"]
    assert math.isclose(high - 1.0, 4.302652729749464 / math.sqrt(3), rel_tol=1e-9)
    assert math.isclose(1.0 - low, high - 1.0, rel_tol=1e-12)
    one_seed = summary_table({k: {0: v[0]} for k, v in per_run.items()}, ["STS-B"], "infonce")[1]
    assert interval_table(one_seed, ["STS-B"]) == ""  # no interval from one seed


def test_diagnose_table_lists_the_diagnosed_runs_only() -> None:
    per_run = {"infonce": {0: {"STS-B": 70.0, "anisotropy": 0.4321}, 1: {"STS-B": 71.0}}}
    stats = {"infonce": {0: {"diag_xi": -0.25, "diag_a": 20.5, "diag_a_ci": [19.0, 22.0], "diag_b": 0.1234,
                             "diag_b_ci": None}, 1: {"lambda": None}}}  # fmt: skip
    assert diagnose_table(per_run, stats).splitlines()[2:] == [
        "| infonce | 0 | 0.432 | -0.250 | 20.50 [19.000, 22.000] | 0.123 – | yes |"
    ]
    assert diagnose_table(per_run, {"infonce": {1: {"lambda": None}}}) == ""
    # the λ table ignores the added stats
    assert lambda_table(stats).splitlines()[2] == "| infonce | – | – | – | – |"


def test_diagnostics_computed_once_then_read_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    calls = []

    def fake_run_function(target, model_dir: Path, cache: Path) -> None:
        calls.append((target, model_dir, cache))
        cache.write_text(json.dumps({"anisotropy": 0.5, "xi": 0.1, "a": 20.0, "a_ci": [1, 2], "b": 0.0, "b_ci": None}))

    monkeypatch.setattr(text_runs, "run_function", fake_run_function)
    cache = tmp_path / "diagnose.json"
    assert diagnostics(tmp_path / "model", cache)["anisotropy"] == 0.5
    assert calls == [(text_runs.write_diagnostics, tmp_path / "model", cache)]
    assert diagnostics(tmp_path / "model", cache)["a"] == 20.0 and len(calls) == 1  # cached


def test_random_pairs_distinct_and_the_original_stream() -> None:
    i, j = random_pairs(7, 500, seed=3)
    assert i.shape == j.shape == (500,) and (i != j).all() and 0 <= min(i.min(), j.min()) and max(i.max(), j.max()) < 7
    rng = np.random.default_rng(3)  # what pretrain_mlm.anisotropy drew before the move
    i0 = rng.integers(0, 7, 500)
    j0 = (i0 + rng.integers(1, 7, 500)) % 7
    assert (i == i0).all() and (j == j0).all()


def test_mean_pair_cosine_closed_forms() -> None:
    same = np.tile(np.array([[0.3, -1.2, 2.0]]), (5, 1)) * np.arange(1, 6)[:, None]  # one direction, any length
    i, j = random_pairs(5, 50, seed=0)
    assert mean_pair_cosine(same, i, j) == pytest.approx(1.0)
    emb = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]])
    pairs = np.array([0, 0, 1]), np.array([1, 2, 2])  # cosines 0, 1/√2, 1/√2
    assert mean_pair_cosine(emb, *pairs) == pytest.approx(math.sqrt(2) / 3)
    zero_row = np.array([3, 0]), np.array([0, 2])  # cosines 0 (a zero row) and 1/√2
    assert mean_pair_cosine(emb, *zero_row) == pytest.approx(1 / (2 * math.sqrt(2)))
    assert mean_pair_cosine(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0]), np.array([1])) == pytest.approx(-1.0)


def fabricate_run(folder: Path, seed: int, sts_b: float, diagnosed: bool) -> None:
    (folder / "eval").mkdir(parents=True)
    (folder / "checkpoint-40").mkdir()
    (folder / "checkpoint-40" / "trainer_state.json").write_text(
        json.dumps(state(eval_entry(20, sts_b - 2), eval_entry(40, sts_b - 1)))
    )
    results = {"steps": 40, "train_seconds": 120.0 + 60 * seed, "before": {"stsb_dev": 30.0},
               "validation": {"setting": "stsb", "metric": "stsb_spearman"}}  # fmt: skip
    (folder / "results.json").write_text(json.dumps(results))
    report = {"sts": {"STSBenchmark": {"spearman": {"all": sts_b}}}, "sts_avg": sts_b}
    (folder / "eval" / "eval_test.json").write_text(json.dumps(report))
    (folder / "eval" / "geometry.json").write_text(json.dumps({"alignment": 0.3, "uniformity": -3.0}))
    if diagnosed:
        diag = {"anisotropy": 0.2 + seed / 10, "xi": -0.1, "a": 19.0, "a_ci": [18.0, 20.0], "b": 0.05,
                "b_ci": [0.0, 0.1], "link_identifiable": seed == 0}  # fmt: skip
        (folder / "eval" / "diagnose.json").write_text(json.dumps(diag))


def stub_the_driver(monkeypatch) -> None:
    """text_runs.main without its run server, plots or the real STS names (that module imports torch: seconds)."""
    monkeypatch.setattr(text_runs, "start_runs", lambda: None)
    monkeypatch.setattr(text_runs, "plot_metrics", lambda *a, **k: None)
    sts = types.ModuleType("simcse_weince.evaluation.families.sts")
    sts.STS_SHORT = SHORT
    monkeypatch.setitem(sys.modules, "simcse_weince.evaluation.families.sts", sts)


@pytest.mark.parametrize("diagnose", [False, True])
def test_main_reports_time_dev_curve_and_diagnosis_of_finished_runs(tmp_path: Path, monkeypatch, diagnose) -> None:
    runs = tmp_path / "runs"
    for v, base in (("infonce", 70.0), ("weince-ols", 71.0)):
        for seed in (0, 1):
            fabricate_run(runs / f"{v}-seed{seed}", seed, base + seed, diagnosed=True)  # cached: never computed
    stub_the_driver(monkeypatch)
    monkeypatch.setattr(text_runs, "run_function", lambda *a: pytest.fail(f"computed {a}"))
    monkeypatch.setattr(text_runs, "run_module", lambda *a: pytest.fail(f"ran {a}"))
    out = tmp_path / "ab"
    argv = ["text_runs", "--config", "x.yaml", "--variants", "infonce", "weince-ols", "--seeds", "0", "1",
            "--runs_dir", str(runs), "--out", str(out), *(["--diagnose"] if diagnose else [])]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    text_runs.main()
    summary = json.loads(out.with_suffix(".json").read_text())
    md = out.with_suffix(".md").read_text()
    assert summary["dev_curve"]["weince-ols"]["1"] == [[0, 30.0], [20, 70.0], [40, 71.0]]
    assert Path(f"{out}_dev.png").is_file()
    assert summary["lambda"]["infonce"]["1"]["train_minutes"] == pytest.approx(3.0)
    assert "| infonce | 2.5 ± 0.7 | 2 |" in md
    assert "train_minutes" not in summary["losses"]["infonce"]  # not a score with paired differences
    assert summary["difference"]["weince-ols"]["STS-B"]["mean"] == pytest.approx(1.0)
    if diagnose:
        assert summary["losses"]["infonce"]["anisotropy"]["runs"] == pytest.approx([0.2, 0.3])
        assert summary["lambda"]["weince-ols"]["0"]["diag_a_ci"] == [18.0, 20.0]
        assert summary["lambda"]["weince-ols"]["0"]["diag_identified"] is True
        assert "anisotropy and simcse-diagnose (a, b) of each final model" in md
        assert "| weince-ols | 1 | 0.300 | -0.100 | 19.00 [18.000, 20.000] | 0.050 [0.000, 0.100] | no |" in md
    else:  # the report of before: no anisotropy, no diagnosis
        assert "anisotropy" not in summary["losses"]["infonce"] and "anisotropy" not in md
        assert "diag_a" not in summary["lambda"]["infonce"]["0"]


def test_main_resumes_a_killed_run_and_restarts_one_killed_before_its_first_checkpoint(
    tmp_path: Path, monkeypatch
) -> None:
    runs = tmp_path / "runs"
    fabricate_run(runs / "infonce-seed0", 0, 70.0, diagnosed=False)  # finished: reused, not trained
    killed, early = runs / "weince-ols-seed0", runs / "infonce-seed1"
    (killed / "checkpoint-20").mkdir(parents=True)
    (killed / "checkpoint-20" / "trainer_state.json").write_text("{}")  # complete (an earlier version's save)
    early.mkdir(parents=True)
    (early / "run_config.yaml").write_text("training: {}\n")  # killed before its first checkpoint
    trained: dict[str, list[str]] = {}

    def train(module: str, argv: list[str], log: Path) -> None:  # records the command, then leaves a finished run
        assert module == "simcse_weince.cli.train_text"
        folder = Path(argv[argv.index("--output_dir") + 1])
        trained[folder.name] = list(argv)
        fabricate_run(folder, int(argv[argv.index("--seed") + 1]), 71.0, diagnosed=False)

    stub_the_driver(monkeypatch)
    monkeypatch.setattr(text_runs, "run_module", train)
    argv = ["text_runs", "--config", "x.yaml", "--variants", "infonce", "weince-ols", "--seeds", "0", "1",
            "--runs_dir", str(runs), "--out", str(tmp_path / "ab"), "--extra", "--max_steps", "40"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    text_runs.main()
    assert sorted(trained) == ["infonce-seed1", "weince-ols-seed0", "weince-ols-seed1"]
    assert trained["weince-ols-seed0"][-4:] == ["--max_steps", "40", "--resume_from_checkpoint", "last"]
    assert trained["infonce-seed1"][-4:] == ["--max_steps", "40", "--overwrite_output_dir", "true"]
    fresh = trained["weince-ols-seed1"]
    assert fresh[-2:] == ["--max_steps", "40"] and "--resume_from_checkpoint" not in fresh
    assert "--overwrite_output_dir" not in fresh


def test_a_variant_is_a_registered_loss_with_settings() -> None:
    """``NAME`` or ``NAME:key=value,...``: one configuration of a tuning budget, as the training's flags."""
    assert text_runs.variant_args("infonce") == ["--loss", "infonce"]
    assert text_runs.variant_args("weince-ols") == ["--loss", "weince", "--beta_mode", "ols"]
    assert text_runs.variant_args("hcl:hcl_beta=2,temperature=0.1") == [
        "--loss", "hcl", "--hcl_beta", "2", "--temperature", "0.1"
    ]  # fmt: skip
    assert text_runs.variant_args("weince-unit:q=0.3") == ["--loss", "weince", "--beta_mode", "unit", "--q", "0.3"]
    for bad in ("softmax", "weince", "hcl:beta", "hcl:=2"):
        with pytest.raises(ValueError, match="variant"):
            text_runs.variant_args(bad)


def test_each_seed_of_a_variant_with_a_dot_logs_to_its_own_file(tmp_path: Path, monkeypatch) -> None:
    """``sigmoid:loss_learning_rate=0.001`` trains in ``sigmoid_loss_learning_rate_0.001-seed0``; its log is that name
    + ``.train.log``, one per seed (``with_suffix`` read ``.001-seed0`` as a suffix and gave every seed one log)."""
    logs: list[Path] = []

    def train(module: str, argv: list[str], log: Path) -> None:
        folder = Path(argv[argv.index("--output_dir") + 1])
        fabricate_run(folder, int(argv[argv.index("--seed") + 1]), 71.0, diagnosed=False)
        logs.append(log)

    stub_the_driver(monkeypatch)
    monkeypatch.setattr(text_runs, "run_module", train)
    runs, variant = tmp_path / "runs", "sigmoid:loss_learning_rate=0.001"
    argv = ["text_runs", "--config", "x.yaml", "--variants", "infonce", variant, "--seeds", "0", "1",
            "--runs_dir", str(runs), "--out", str(tmp_path / "ab")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    text_runs.main()
    assert [p.name for p in logs] == [
        "infonce-seed0.train.log", "sigmoid_loss_learning_rate_0.001-seed0.train.log",
        "infonce-seed1.train.log", "sigmoid_loss_learning_rate_0.001-seed1.train.log",
    ]  # fmt: skip


def test_run_folder_names_a_variant_without_separators_and_reuses_a_raw_named_run(tmp_path: Path) -> None:
    assert run_folder(tmp_path, "infonce", 3) == tmp_path / "infonce-seed3"
    assert run_folder(tmp_path, "weince-ols:learning_rate=1e-3", 0) == tmp_path / "weince-ols_learning_rate_1e-3-seed0"
    raw = tmp_path / "weince-ols:learning_rate=1e-3-seed0"
    raw.mkdir()  # a run stored under the earlier naming is the run's folder
    assert run_folder(tmp_path, "weince-ols:learning_rate=1e-3", 0) == raw
    assert run_folder(tmp_path, "weince-ols:learning_rate=1e-3", 1) == tmp_path / "weince-ols_learning_rate_1e-3-seed1"
    (tmp_path / "weince-ols_learning_rate_1e-3-seed0").mkdir()  # both present: the new name wins
    assert run_folder(tmp_path, "weince-ols:learning_rate=1e-3", 0).name == "weince-ols_learning_rate_1e-3-seed0"
