"""The known-truth loss comparison at one tuning budget: six configurations per arm, the selection rule, the chosen
configurations trained on the test seeds, and a rerun that trains nothing and writes the same report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from weince_lab.experiments import which_loss_truth as driver


def test_every_arm_has_six_configurations_and_one_knob() -> None:
    assert all(len(configs) == 6 for configs in driver.CONFIGS.values())
    assert {a for a, _ in driver.CONFIGS["infonce"]} == {"infonce"}
    for name, configs in driver.CONFIGS.items():
        if name != "infonce":
            knobs = {arm.partition(":")[2].partition("=")[0] for arm, _ in configs}
            assert len(knobs) == 1 and len({arm for arm, _ in configs}) == 2 and len({t for _, t in configs}) == 3
    settings = driver.settings_for(quick=False)
    assert (settings.steps, settings.anneal, settings.ks) == (6000, 2000, (64,))


def test_the_lowest_validation_kl_among_converged_configurations_is_chosen() -> None:
    scored = [(0.10, False, "a", 0.1), (0.20, True, "b", 0.1), (0.15, True, "b", 0.2)]
    assert driver.choose(scored) == ("b", 0.2)  # the lowest KL (0.10) did not converge
    assert driver.choose([(0.3, False, "a", 0.1), (0.2, False, "a", 0.5)]) == ("a", 0.5)  # none did: all


def test_the_pipeline_chooses_on_validation_reports_on_test_and_reruns_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(driver, "KERNELS", ("vmf",))
    monkeypatch.setattr(
        driver, "CONFIGS", {"infonce": [("infonce", 0.1), ("infonce", 0.5)], "hcl": [("hcl:hcl_beta=0.5", 0.5)]}
    )
    assert driver.main(["--out", str(tmp_path), "--quick", "--workers", "1"]) == 0
    records = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert len(records) == 3 + 2 * 2  # validation: 3 configurations × seed 100; test: 2 arms × seeds 0, 1
    val = {(r["cell"]["loss"], r["cell"]["tau"]): r for r in records if r["cell"]["seed"] == 100}
    summary = json.loads((tmp_path / "output.json").read_text())
    scored = [(v["universe_gap"], v["convergence"]["converged"], *c) for c, v in val.items() if c[0] == "infonce"]
    assert summary["chosen"]["vmf/infonce"] == list(driver.choose(scored))
    test = {r["cell"]["loss"]: r for r in records if r["cell"]["seed"] == 0}
    assert test["infonce"]["cell"]["tau"] == summary["chosen"]["vmf/infonce"][1]
    assert all(r["convergence"]["anneal"] == 50 for r in records)
    report = (tmp_path / "output.md").read_text()
    assert "decaying linearly to 0 over the last 50" in report and "## Validation" in report
    capsys.readouterr()
    assert driver.main(["--out", str(tmp_path), "--quick", "--workers", "1"]) == 0
    assert "running 0" in capsys.readouterr().out.splitlines()[0]
    assert (tmp_path / "output.md").read_text() == report


def test_a_bad_worker_count_is_one_line_before_any_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert driver.main(["--out", str(tmp_path / "never"), "--workers", "0"]) == 2
    assert capsys.readouterr().err == "error: --workers must be >= 1, got 0\n"
    assert not (tmp_path / "never").exists()


def test_k_sets_the_cells_and_the_stored_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert driver.settings_for(quick=False, k=16).ks == (16,)
    assert driver.settings_for(quick=False).to_dict() | {"ks": [16]} == driver.settings_for(False, 16).to_dict()
    monkeypatch.setattr(driver, "KERNELS", ("vmf",))
    monkeypatch.setattr(driver, "CONFIGS", {"infonce": [("infonce", 0.5)]})
    assert driver.main(["--out", str(tmp_path), "--quick", "--workers", "1", "--k", "5"]) == 0
    assert {json.loads(line)["cell"]["k"] for line in (tmp_path / "cells.jsonl").read_text().splitlines()} == {5}
    assert "--out experiments/results/which_loss_tuned_k5 --k 5 --workers 2" in (tmp_path / "output.md").read_text()
    assert driver.main(["--out", str(tmp_path / "never"), "--k", "2"]) == 2
    assert capsys.readouterr().err == "error: --k must be an integer >= 3, got 2\n"
    assert not (tmp_path / "never").exists()


def test_steps_anneal_and_kernels_set_the_cells_and_name_the_folder(tmp_path: Path, monkeypatch) -> None:
    assert driver.folder(64) == "experiments/results/which_loss_tuned"
    assert driver.folder(16, 16000, 15000, ["endpoint"]) == "experiments/results/which_loss_tuned_k16_16000_endpoint"
    assert driver.folder(64, 16000, 2000, ["blend", "vmf"]).endswith("which_loss_tuned_16000_a2000_vmf_blend")
    assert driver.folder(64, 6000, 2000, ["blend", "endpoint", "vmf"]) == driver.folder(64)
    constant = driver.command(argparse.Namespace(k=None, steps=None, anneal=0, kernels=None))
    assert constant == "--out experiments/results/which_loss_tuned_a0 --anneal 0 --workers 2"  # 0 is given, not unset
    settings = driver.settings_for(False, steps=16000, anneal=15000, kernels=["blend", "vmf"])
    assert (settings.steps, settings.anneal, settings.kernels, settings.ks) == (16000, 15000, ("vmf", "blend"), (64,))
    monkeypatch.setattr(driver, "CONFIGS", {"infonce": [("infonce", 0.5)], "hcl": [("hcl:hcl_beta=0.5", 0.5)]})
    budget = ["--kernels", "blend", "--steps", "40", "--anneal", "20"]
    argv = ["--out", str(tmp_path), "--quick", "--workers", "1", *budget]
    assert driver.main(argv) == 0
    records = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert {r["cell"]["kernel"] for r in records} == {"blend"} and len(records) == 2 + 2 * 2  # 2 arms: seed 100; 0, 1
    assert {(r["convergence"]["steps"], r["convergence"]["anneal"]) for r in records} == {(40, 20)}
    report = (tmp_path / "output.md").read_text()
    assert (
        "--out experiments/results/which_loss_tuned_40_a20_blend --steps 40 --anneal 20 --kernels blend --workers 2`"
        in report
    )
    assert "## Kernel blend" in report and "## Kernel vmf" not in report and "4 paired intervals" in report


def test_the_filter_section_sets_a_skipped_lowest_configuration_beside_the_chosen_one() -> None:
    k, pairs, seeds = 16, 1000, (0, 1)
    chosen = {("vmf", "infonce"): ("infonce", 0.5), ("vmf", "hcl"): ("hcl:hcl_beta=0.5", 0.5)}
    skipped = {("vmf", "hcl"): ("hcl:hcl_beta=1", 0.1)}
    figures = {  # (loss, τ) → per seed (universe KL, top-1, converged)
        ("infonce", 0.5): [(1.0, 0.5, True), (1.2, 0.6, True)],
        ("hcl:hcl_beta=0.5", 0.5): [(1.5, 0.4, True), (1.7, 0.5, True)],
        ("hcl:hcl_beta=1", 0.1): [(0.9, 0.55, False), (1.0, 0.6, True)],
    }
    records = {
        driver.key(driver.cell("vmf", k, loss, tau, s, pairs)): {
            "universe_gap": kl, "top1": top1, "convergence": {"converged": ok}
        }
        for (loss, tau), per_seed in figures.items() for s, (kl, top1, ok) in zip(seeds, per_seed, strict=True)
    }  # fmt: skip
    summary: dict = {}
    lines = driver.filter_section(skipped, chosen, records, k, pairs, seeds, summary)
    (row,) = summary["filter"]
    assert row["skipped"]["minus_infonce_universe_gap"][0] == pytest.approx(-0.15)  # (0.9 − 1.0 + 1.0 − 1.2) / 2
    assert row["chosen"]["minus_infonce_universe_gap"][0] == pytest.approx(0.5)
    assert row["skipped"]["minus_infonce_top1"][0] == pytest.approx(0.025) and row["skipped_converged"] == 1
    assert any(line.startswith("| vmf | hcl | hcl_beta=1, τ 0.1 | 1/2 | -0.1500") for line in lines)
    none: dict = {}
    assert driver.filter_section({}, chosen, records, k, pairs, seeds, none)[-1].startswith("None:")
    assert none["filter"] == []
