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
    assert driver.main(argv) == 0
    records = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert {r["cell"]["k"] for r in records} == {16}
    assert all(r["convergence"]["anneal"] == 50 and r["convergence"]["check_steps"] == 150 for r in records)
    report = (tmp_path / "output.md").read_text()
    assert "--ks 16 --steps 100 --anneal 50" in report and "decaying linearly to 0 over the last 50" in report
    assert json.loads((tmp_path / "settings.json").read_text())["anneal"] == 50
    capsys.readouterr()
    assert driver.main(argv) == 0  # every cell stored: the same report again
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
    def command(ks: list[int] | None, steps: int | None, anneal: int | None) -> str:
        return driver.command(argparse.Namespace(ks=ks, steps=steps, anneal=anneal))

    assert command(None, None, None) == "--out experiments/results/link_truth"
    assert (
        command([64], 6000, 2000) == "--out experiments/results/link_truth_annealed --ks 64 --steps 6000 --anneal 2000"
    )
    assert command([16], 6000, 2000).startswith("--out experiments/results/link_truth_annealed_k16 --ks 16 ")
    assert command([16, 256], 6000, 2000).startswith("--out experiments/results/link_truth_annealed --ks 16 256 ")
