"""The vision experiment's loss entries: a registered loss by name or with settings, every run's command line
checked before the first run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from weince_lab.experiments import vision_cpu
from weince_lab.experiments.common import variant_folder

CONFIG = str(Path(__file__).resolve().parents[3] / "configs/vision/cpu_proxy_cifar10.yaml")


def test_a_loss_entry_is_a_registered_loss_with_its_settings() -> None:
    assert vision_cpu.loss_args("weince") == ["--loss", "weince"]  # the config's beta mode
    assert vision_cpu.loss_args("sigmoid:temperature=0.1,sigmoid_bias=-5") == [
        "--loss", "sigmoid", "--temperature", "0.1", "--sigmoid_bias", "-5"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown loss 'weince-ols'"):
        vision_cpu.loss_args("weince-ols")
    with pytest.raises(ValueError, match="key=value"):
        vision_cpu.loss_args("hcl:hcl_beta")


def test_plain_names_keep_their_run_folders_and_settings_get_their_own() -> None:
    assert variant_folder("hardness_infonce") == "hardness_infonce"  # stored runs' folders are unchanged
    assert variant_folder("sigmoid:temperature=0.1") == "sigmoid_temperature_0.1"
    assert variant_folder("sigmoid:temperature=0.1") != variant_folder("sigmoid:temperature=0.5")


def test_a_run_line_the_training_refuses_is_refused_naming_the_flag() -> None:
    vision_cpu.check_run(CONFIG, ["--loss", "hcl", "--hcl_beta", "0.5", "--num_train_epochs", "4"])
    with pytest.raises(ValueError, match="--hcl_bogus"):
        vision_cpu.check_run(CONFIG, ["--loss", "hcl", "--hcl_bogus", "1"])
    with pytest.raises(ValueError, match="'abc'"):
        vision_cpu.check_run(CONFIG, ["--loss", "hcl", "--hcl_beta", "abc"])


@pytest.mark.parametrize("losses", [["infonce", "hcl:hcl_bogus=1"], ["infonce", "nope"], ["dcl:dcl_sigma"]])
def test_bad_losses_stop_the_driver_in_one_line_before_any_run(tmp_path: Path, monkeypatch, capsys, losses) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setattr(sys, "argv", ["vision_cpu", "--losses", *losses, "--runs_dir", str(runs), "--out", "x"])
    monkeypatch.setattr(vision_cpu, "run_module", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as stop:
        vision_cpu.main()
    assert stop.value.code == 2 and not runs.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: --losses: ")


def test_each_run_of_a_setting_with_a_dot_logs_to_its_own_file(tmp_path: Path, monkeypatch) -> None:
    """``sigmoid:temperature=0.1`` runs in ``sigmoid_temperature_0.1-seed0``; its log is that name + ``.log``, one per
    seed (``with_suffix`` would have read ``.1-seed0`` as a suffix and given every seed one log)."""
    logs = []

    def fake_run(module: str, argv: list[str], log: Path) -> None:
        out = Path(argv[argv.index("--output_dir") + 1])
        out.mkdir(parents=True)
        after = dict.fromkeys(vision_cpu.METRICS, 1.0)
        (out / "results.json").write_text(json.dumps({"after": after}))
        logs.append(log)

    monkeypatch.setattr(vision_cpu, "run_module", fake_run)
    monkeypatch.setattr(vision_cpu, "plot_metrics", lambda *a, **k: None)
    runs = tmp_path / "runs"
    argv = ["vision_cpu", "--losses", "infonce", "sigmoid:temperature=0.1", "--seeds", "0", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--runs_dir", str(runs), "--out", str(tmp_path / "out")])
    vision_cpu.main()
    sigmoid = "sigmoid_temperature_0.1"
    names = ["infonce-seed0.log", f"{sigmoid}-seed0.log", "infonce-seed1.log", f"{sigmoid}-seed1.log"]
    assert [p.name for p in logs] == names
    assert all(p.parent == runs for p in logs)
