"""The link-truth driver's budget options: one k on the temperature sweep's settings (the same cells), a final
decay stated in the report, and a store that refuses cells made with other settings in one line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from weince_lab.experiments import link_truth as driver


def test_one_k_gives_the_same_cells_as_the_negatives_sweep_at_that_k() -> None:
    many, one = driver.settings_for(False).to_dict(), driver.settings_for(False, [64], 6000, 2000).to_dict()
    assert (one["sweep"], one["ks"], one["steps"], one["anneal"]) == ("temperature", [64], 6000, 2000)
    assert "anneal" not in many  # the stored constant-rate sweep's settings are as they were
    differ = {k for k in many.keys() | one.keys() if many.get(k) != one.get(k)}
    assert differ == {"sweep", "ks", "steps", "anneal"}  # pairs, items, τ, losses: the negatives sweep's


def test_the_report_states_the_decay_and_every_cell_carries_its_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--out", str(tmp_path), "--quick", "--workers", "1", "--ks", "16", "--steps", "100", "--anneal", "50"]
    assert driver.main([*argv, "--kernels", "endpoint"]) == 0  # one kernel: a third of the cells
    records = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert {(r["cell"]["k"], r["cell"]["kernel"]) for r in records} == {(16, "endpoint")}
    assert all(r["convergence"]["anneal"] == 50 and r["convergence"]["check_steps"] == 150 for r in records)
    report = (tmp_path / "output.md").read_text()
    assert "--ks 16 --steps 100 --anneal 50" in report and "decaying linearly to 0 over the last 50" in report
    assert "## Kernel endpoint" in report and "## Kernel vmf" not in report and "## Kernel blend" not in report
    assert "learned link − oracle, paired by seed: KL" in report and "vMF, its KL" not in report
    assert json.loads((tmp_path / "settings.json").read_text())["anneal"] == 50
    capsys.readouterr()
    assert driver.main([*argv, "--kernels", "endpoint"]) == 0  # every cell stored: the same report again
    assert "running 0" in capsys.readouterr().out.splitlines()[0]
    assert (tmp_path / "output.md").read_text() == report


def test_a_store_made_with_other_settings_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "run"
    driver.claim_store(store, driver.settings_for(True, [16], 100, 50))
    (store / "cells.jsonl").write_text("{}\n")
    before = (store / "settings.json").read_text()
    assert driver.main(["--out", str(store), "--quick", "--ks", "16", "--steps", "100", "--anneal", "40"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other settings (anneal)" in err and str(store) in err
    assert (store / "settings.json").read_text() == before and (store / "cells.jsonl").read_text() == "{}\n"
    (store / "settings.json").unlink()
    assert driver.main(["--out", str(store), "--quick", "--ks", "16", "--steps", "100", "--anneal", "50"]) == 2
    assert "has no settings.json beside it" in capsys.readouterr().err


def test_a_bad_budget_is_one_line_before_any_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert driver.main(["--out", str(tmp_path / "never"), "--steps", "100", "--anneal", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --anneal must be < --steps") and err.count("\n") == 1
    assert not (tmp_path / "never").exists()


def test_the_report_names_each_stored_folder() -> None:
    def command(ks: list[int] | None, steps: int | None, anneal: int | None, kernels: list[str] | None = None) -> str:
        return driver.command(argparse.Namespace(ks=ks, steps=steps, anneal=anneal, kernels=kernels))

    assert command(None, None, None) == "--out experiments/results/link_truth"
    assert (
        command([64], 6000, 2000) == "--out experiments/results/link_truth_annealed --ks 64 --steps 6000 --anneal 2000"
    )
    assert command([16], 6000, 2000).startswith("--out experiments/results/link_truth_annealed_k16 --ks 16 ")
    assert command([64], 16000, 15000, ["endpoint"]) == (
        "--out experiments/results/link_truth_annealed_16000_endpoint --ks 64 --steps 16000 --anneal 15000 "
        "--kernels endpoint"
    )
    assert command([16], 16000, 15000, ["endpoint"]).startswith(
        "--out experiments/results/link_truth_annealed_k16_16000_endpoint "
    )
    # other budgets never take a stored folder's name; the order options are given in does not matter
    assert command([256, 16], 6000, 2000).startswith(
        "--out experiments/results/link_truth_annealed_k16_256 --ks 16 256"
    )
    assert command([64], None, 1000) == "--out experiments/results/link_truth_annealed_2000_a1000 --ks 64 --anneal 1000"
    assert command([64], 6000, 3000).startswith("--out experiments/results/link_truth_annealed_a3000 ")
    assert command(None, 16000, None) == "--out experiments/results/link_truth_16000 --steps 16000"
    assert command([64], None, None) == "--out experiments/results/link_truth_k64 --ks 64"
    assert command(None, None, None, ["blend", "vmf"]) == command(None, None, None, ["vmf", "blend"])
    assert command(None, None, None, ["blend", "vmf"]).endswith("link_truth_vmf_blend --kernels vmf blend")
    assert command(None, None, None, ["blend", "endpoint", "vmf"]).startswith("--out experiments/results/link_truth ")


def test_kernels_narrow_the_settings_and_nothing_else() -> None:
    every, one = driver.settings_for(False, [64], 6000, 2000), driver.settings_for(False, [64], 6000, 2000, ["blend"])
    assert one.kernels == ("blend",) and every.kernels == driver.KERNELS
    assert {k for k, v in one.to_dict().items() if every.to_dict()[k] != v} == {"kernels"}
    two = [driver.settings_for(False, [64], 6000, 2000, kernels) for kernels in (["blend", "vmf"], ["vmf", "blend"])]
    assert two[0].to_dict() == two[1].to_dict() and two[0].kernels == ("vmf", "blend")  # the same cells, one store


def test_a_kernel_not_known_is_refused_before_any_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        driver.main(["--out", str(tmp_path / "never"), "--kernels", "gauss"])
    assert stop.value.code == 2 and "invalid choice: 'gauss'" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_the_targets_are_the_stated_ratios_on_the_kernels_run() -> None:
    """Closed form: InfoNCE 0.4, learned link 0.1, oracle 0.0 nats → the learned link closes (0.4 − 0.1) / 0.4 = 75 %
    of the oracle's gain (missed); top-1 +0.01 on every seed → met; learned − oracle +0.1 nats, top-1 −0.01; under
    vMF the learned link costs 0.01 (missed)."""
    values = {
        ("endpoint", "infonce", "universe_gap"): 0.4, ("endpoint", "learned_link", "universe_gap"): 0.1,
        ("endpoint", "oracle", "universe_gap"): 0.0, ("endpoint", "infonce", "top1"): 0.80,
        ("endpoint", "learned_link", "top1"): 0.81, ("endpoint", "oracle", "top1"): 0.82,
        ("vmf", "infonce", "universe_gap"): 0.03,
        ("vmf", "learned_link", "universe_gap"): 0.04,
    }  # fmt: skip

    def figures(kernel: str, k: int, arm: str, field: str) -> list[float]:
        return [values[kernel, arm, field] + 1e-4 * s for s in range(5)]

    endpoint, vmf = driver.targets(figures, ("vmf", "endpoint", "blend"), 64)
    assert "closes 75 % of the oracle's KL gain" in endpoint and "(target ≥ 80 %: missed)" in endpoint
    assert "top-1 − InfoNCE's +0.010 [+0.010, +0.010] (target: not worse: met)" in endpoint
    assert endpoint.endswith("paired by seed: KL +0.1000 [+0.1000, +0.1000], top-1 -0.010 [-0.010, -0.010]")
    assert vmf == "vMF, its KL − InfoNCE's +0.010 [+0.010, +0.010] (target ≤ +0.005: missed)"
    assert driver.targets(figures, ("vmf",), 64) == [vmf]
    assert driver.targets(figures, ("blend",), 64) == ["no target is stated for the blend alone"]
