"""weince_lab/experiments/paper_protocol.py: its options, its selection rule, its restarts, and --quick end to end."""

from __future__ import annotations

import json

import pytest

from tests.helpers import write_cifar10_zips
from weince_lab.experiments import paper_protocol as pp


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--arms", "a", "z"], "--arms: unknown arm 'z'; expected some of a, b, c, d, e, f, e0"),
        (["--arms", "d", "--grid_kappa_rho"], "--grid_kappa_rho: the grid of arm (d) is empty"),
        (["--arms", "f", "--grid_temperature", "0"], "--grid_temperature: expected numbers > 0"),
        (["--seeds"], "--seeds: expected distinct integers >= 0, got none"),
        (["--eval_seeds", "1", "-1"], "--eval_seeds: expected distinct integers >= 0, got [1, -1]"),
        (["--arms", "a", "--extra", "--margin", "3"], "--extra --margin: set by the protocol's arms"),
        (["--arms", "a", "--extra", "--margin=3"], "--extra --margin=3: set by the protocol's arms"),
        (["--quick", "--extra", "--data_dir", "/nonexistent/cifar"], "data_dir /nonexistent/cifar"),
        (["--quick", "--extra", "--topm_weibit_m", "0"], "topm_weibit_m must be an integer >= 1, got 0"),
        (["--arms", "x", "--nonsense"], "unrecognized arguments: --nonsense"),
    ],
)
def test_a_bad_option_is_one_error_line_before_any_run(options, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        pp.main([*options[:1], *options[1:], "--runs_dir", str(tmp_path / "runs")] if "--extra" not in options
                else ["--runs_dir", str(tmp_path / "runs"), *options])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "runs").exists()


def _scores(val: dict[tuple[str, int], float], test: dict[tuple[str, int], float]) -> dict:
    return {key: {"mean": {"val": {m: v for m in pp.METRICS}, "test": {m: test[key] for m in pp.METRICS}}}
            for key, v in val.items()}  # fmt: skip


def test_the_best_of_arm_takes_the_best_mean_validation_figure_among_complete_configurations() -> None:
    settings = [pp.Setting("weince", False, (("margin", m),)) for m in (0.0, 2.0, 6.0)]
    names = [s.name for s in settings]
    # margin 6 has the best validation mean but lacks seed 1: the complete ones are chosen among
    val = {(names[0], 0): 50.0, (names[0], 1): 54.0, (names[1], 0): 53.0, (names[1], 1): 52.0, (names[2], 0): 90.0}
    test = {key: 10.0 * i for i, key in enumerate(val)}
    chosen = pp.select(settings, _scores(val, test), seeds=[0, 1])
    assert chosen["R@1"]["run"] == names[1] and chosen["R@1"]["complete"]  # 52.5 > 52.0
    assert chosen["R@1"]["test"] == {0: 20.0, 1: 30.0} and chosen["R@1"]["config"] == "margin 2"
    # without any complete configuration: the best of all that exist
    partial = {k: v for k, v in val.items() if k[1] == 0}
    chosen = pp.select(settings, _scores(partial, {k: 1.0 for k in partial}), seeds=[0, 1])
    assert chosen["R@1"]["run"] == names[2] and not chosen["R@1"]["complete"]


def test_a_run_is_skipped_when_finished_resumed_when_killed_and_restarted_when_it_saved_nothing(
    tmp_path, monkeypatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(pp, "run_module", lambda module, argv, log: calls.append(list(argv)))
    args = pp.parse_args(["--quick", "--runs_dir", str(tmp_path)])
    setting = pp.arm_settings(pp.ARMS["a"], args, 0.5)[0]
    done, killed, early, fresh = (tmp_path / n for n in ("done", "killed", "early", "fresh"))
    done.mkdir()
    (done / "results.json").write_text("{}")
    ckpt = killed / "checkpoint-3"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text("{}")  # a checkpoint of an earlier version: complete
    early.mkdir()
    (early / "train.log").write_text("killed before its first checkpoint\n")
    statuses = []
    for folder in (done, killed, early, fresh):
        argv = pp.run_argv(args, setting, 0, folder)
        statuses.append(pp.train_if_needed(folder, argv, pp.parse_run(argv)))
    assert statuses == ["trained before", "resumed", "restarted", "trained"]
    assert calls[0][-2:] == ["--resume_from_checkpoint", "last"]
    assert calls[1][-2:] == ["--overwrite_output_dir", "true"]
    assert "--resume_from_checkpoint" not in calls[2] and "--overwrite_output_dir" not in calls[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_runs_every_arm_and_a_second_call_reuses_every_run(tmp_path, capsys) -> None:
    data = write_cifar10_zips(tmp_path / "data", train_per_class=10, test_per_class=4)
    out = tmp_path / "protocol"
    # every arm but (h) and (i), which run like (g) (a registered loss started at the base τ): their runs are named
    # below without training, keeping this test within its time
    arms = ["--arms", "a", "b", "c", "d", "e", "f", "g", "j"]
    argv = ["--quick", *arms, "--runs_dir", str(tmp_path / "runs"), "--out", str(out)]
    argv += ["--extra", "--data_dir", str(data)]
    assert pp.main(argv) == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    assert list(summary["arms"]) == ["a", "b", "c", "d", "e", "f", "g", "j"]
    assert set(summary["differences"]) == {"(c)-(a)", "(b)-(a)", "(e)-(b)", "(d)-(c)", "(e)-(f)", "(g)-(a)",
                                           "(j)-(a)"}  # fmt: skip
    # the link losses' arms: one run each of their registered loss (τ from the base config; arctanh has none)
    runs_of = {arm: summary["arms"][arm]["selected"]["R@1"]["run"] for arm in ("g", "j")}
    assert runs_of == {"g": "learned_link_temperature0p5", "j": "arctanh"}
    args = pp.parse_args(["--quick"])
    named = {arm: [s.name for s in pp.arm_settings(pp.ARMS[arm], args, 0.5)] for arm in ("h", "i")}
    assert named == {"h": ["learned_temperature_temperature0p5"], "i": ["profiled_link_temperature0p5"]}
    # (c) is (d)'s one-point grid: the same run; (f) selects between its two points, (b) is one of them
    c, d = summary["arms"]["c"]["selected"], summary["arms"]["d"]["selected"]
    assert c["R@1"]["run"] == d["R@1"]["run"] == "weince_margin2_kappa_rho10_kappa_aic1"
    f = summary["arms"]["f"]["selected"]["R@1"]
    assert f["config"].endswith(("topm_weibit_weight 0.25", "topm_weibit_weight 0.5")) and f["complete"]
    diff = summary["differences"]["(c)-(a)"]["R@1"]
    a_test, c_test = summary["arms"]["a"]["selected"]["R@1"]["test"], c["R@1"]["test"]
    assert diff["per_seed"] == [c_test[s] - a_test[s] for s in ("0", "1")]
    assert "| (e)−(f): WEINCE vs InfoNCE at the same tuning budget |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").stat().st_size > 5000
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert len(runs) == 14  # 2 seeds × (a, b, c = d, e0 = e, f's other point, g, j)
    scores = json.loads((tmp_path / "runs" / runs[0] / "protocol.json").read_text())
    assert scores["eval_seeds"] == [1, 2] and set(scores["per_seed"]) == {"1", "2"}
    first = out.with_suffix(".json").read_text()
    capsys.readouterr()
    assert pp.main(argv) == 0  # restarted: every run is reused, the same table
    assert capsys.readouterr().out.count("trained before") == 14
    assert out.with_suffix(".json").read_text() == first


def test_a_folder_of_other_settings_is_refused_not_reused(tmp_path, monkeypatch, capsys) -> None:
    """A finished run whose run_config.yaml records another setting (here the epochs of another --extra) is one
    error line, not a silent reuse."""
    import yaml

    from simcse_weince.training.config import to_plain

    monkeypatch.setattr(pp, "run_module", lambda *a: pytest.fail("nothing should train"))
    args = pp.parse_args(["--quick", "--runs_dir", str(tmp_path)])
    setting = pp.arm_settings(pp.ARMS["a"], args, 0.5)[0]
    folder = tmp_path / "run"
    argv = pp.run_argv(args, setting, 0, folder)
    groups = pp.parse_run(argv)
    saved = {name: to_plain(g) for name, g in groups.items()}
    folder.mkdir()
    (folder / "results.json").write_text("{}")
    (folder / "run_config.yaml").write_text(yaml.safe_dump(saved))
    assert pp.train_if_needed(folder, argv, groups) == "trained before"  # the same settings: reused
    saved["training"]["max_steps"] = 7
    (folder / "run_config.yaml").write_text(yaml.safe_dump(saved))
    with pytest.raises(SystemExit):
        pp.train_if_needed(folder, argv, groups)
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "max_steps 7, not 1 as now" in err and "\n" not in err


def test_quick_keeps_the_seeds_and_grids_given_on_the_command_line(tmp_path) -> None:
    args = pp.parse_args(["--quick", "--seeds", "3", "4", "--runs_dir", str(tmp_path)])
    assert args.seeds == [3, 4] and args.eval_seeds == pp.QUICK["eval_seeds"]
    assert args.grid_kappa_aic == pp.QUICK["grid_kappa_aic"]


def test_a_diverged_configuration_is_never_selected() -> None:
    settings = [pp.Setting("weince", False, (("margin", m),)) for m in (0.0, 2.0)]
    val = {(settings[0].name, 0): float("nan"), (settings[1].name, 0): 10.0}
    chosen = pp.select(settings, _scores(val, dict.fromkeys(val, 1.0)), seeds=[0])
    assert chosen["R@1"]["run"] == settings[1].name
