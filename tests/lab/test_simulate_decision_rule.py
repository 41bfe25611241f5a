"""``simcse-simulate decision-rule`` end to end on a --quick temperature sweep: the tables it retrains are the sweep's,
its files hold the command, a second run reproduces the first, and bad options fail before any work."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from weince_lab.simulate import main, run
from weince_lab.simulation.decision_rule import infonce_table, load_sweep, retrained_gap, stored_gap

ARGS = ["--sizes", "2x8", "3x8", "--draws", "2", "--off_taus", "0.5"]


@pytest.fixture(scope="module")
def quick_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep")
    run(["temperature", "--quick", "--kernels", "endpoint", "--taus", "0.1", "0.2", "0.5", "--out", str(folder)])
    return folder


@pytest.mark.slow
def test_decision_rule_retrains_the_sweeps_tables_and_reproduces_itself(quick_sweep: Path, tmp_path: Path) -> None:
    argv = ["decision-rule", "--sweep", str(quick_sweep), *ARGS, "--out", str(tmp_path / "a")]
    first = run(argv)
    assert first["complete"] and first["pairs"] == 4000 and first["seeds"] == [0, 1]
    taus = sorted({t["tau"] for t in first["truths"]})
    assert 0.5 in taus and len(taus) in (1, 2)  # the best τ, and 0.5 when it is not the best
    assert len(first["rows"]) == 2 * len(taus) and all(r["runs"] == 2 * 2 for r in first["rows"])  # seeds × draws
    for table in first["tables"]:  # bit for bit the sweep's InfoNCE table: the same universe KL
        assert table["universe_gap"] == pytest.approx(table["stored"], rel=1e-9)
    for row in first["rows"]:
        assert row["right"] == (row["fires"] if row["helps"] else row["runs"] - row["fires"])
    md = (tmp_path / "a" / "decision_rule.md").read_text()
    assert "Command: `simcse-simulate decision-rule --sweep" in md and "| endpoint |" in md
    assert "match its universe KL within" in md
    assert json.loads((tmp_path / "a" / "decision_rule.json").read_text())["command"].endswith("/a")
    second = run([*argv[:-1], str(tmp_path / "b")])
    assert second["rows"] == first["rows"]
    third = run([*argv[:-1], str(tmp_path / "c"), "--problem_seed", "1"])
    assert [r["median_b"] for r in third["rows"]] != [r["median_b"] for r in first["rows"]]
    # cells finish in any order in the workers: the same rows; design (A) adds rows without a truth
    parallel = run([*argv[:-1], str(tmp_path / "d"), "--workers", "2", "--true_cosines"])
    learned = [r for r in parallel["rows"] if r["tau"] != "true cosines"]
    assert sorted(learned, key=str) == sorted(first["rows"], key=str)
    true_cosines = [r for r in parallel["rows"] if r["tau"] == "true cosines"]
    assert sorted(r["size"] for r in true_cosines) == ["2x8", "3x8"] and all("right" not in r for r in true_cosines)


def test_the_retrained_table_is_the_annealed_sweeps_own(tmp_path: Path) -> None:
    """A sweep trained with a final decay of the rate: the rule's retrained InfoNCE table has the stored cell's KL
    exactly (without the decay it would not)."""
    argv = ["temperature", "--quick", "--kernels", "endpoint", "--taus", "0.5", "--losses", "infonce"]
    run([*argv, "--pairs", "1000", "--anneal", "50", "--out", str(tmp_path)])
    settings, records = load_sweep(tmp_path)
    universe, table = infonce_table(settings, "endpoint", 0.5, 1000, 0)
    stored = stored_gap(records, "endpoint", 0.5, 1000, 0)
    assert retrained_gap(universe, table, 0.5) == pytest.approx(stored, rel=1e-9)
    constant = dataclasses.replace(settings, anneal=0)
    assert retrained_gap(*infonce_table(constant, "endpoint", 0.5, 1000, 0), 0.5) != pytest.approx(stored, rel=1e-6)


@pytest.mark.parametrize(
    "bad",
    [
        ["--sizes", "1x8"],
        ["--sizes", "2by8"],
        ["--draws", "0"],
        ["--sweep", "/nonexistent/sweep"],
        ["--workers", "0"],
    ],
)
def test_bad_options_fail_in_one_line_before_any_work(bad: list[str], tmp_path: Path, capsys) -> None:
    code = main(["decision-rule", "--out", str(tmp_path / "out"), *bad])
    assert code != 0
    assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "out").exists()
