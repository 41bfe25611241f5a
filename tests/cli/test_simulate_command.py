"""``simcse-simulate``: each experiment writes its table, JSON and plots; bad options end in one line before work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcse_weince.cli.simulate import main, run
from tests.helpers import REPO


def test_e1_writes_table_json_and_plot(tmp_path: Path) -> None:
    result = run(["e1", "--replications", "200", "--sample_sizes", "100", "1000", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "e1.json").read_text())
    assert [r["n"] for r in saved["rows"]] == [100, 1000]
    assert saved["closed_forms"]["weibit_c"] == pytest.approx(7.1360262044, abs=1e-9)
    assert "| 1,000 |" in (tmp_path / "e1.md").read_text()
    assert (tmp_path / "e1_noise_floor.png").stat().st_size > 5000
    assert result["rows"] == saved["rows"]


def test_e2_and_e3_at_toy_size(tmp_path: Path) -> None:
    run(["e2", "--pot_replications", "3", "--bootstrap", "20", "--pot_sizes", "3000", "--pot_qs", "0.99",
         "--lams", "0", "1", "--scales", "2x32", "--link_replications", "3", "--out", str(tmp_path)])  # fmt: skip
    e2 = json.loads((tmp_path / "e2.json").read_text())
    assert len(e2["pot"]) == 3 and [c["lam"] for c in e2["link"]["2x32"]] == [0.0, 1.0]
    assert e2["link"]["2x32"][1]["b"]["truth"] == 3.0 and e2["link"]["2x32"][0]["a"]["truth"] == 10.0
    for name in ("e2_pot.png", "e2_link.png"):
        assert (tmp_path / name).stat().st_size > 5000
    run(["e3", "--batches", "1", "--out", str(tmp_path)])
    e3 = json.loads((tmp_path / "e3.json").read_text())
    assert len(e3["cells"]) == 5 * 2 * 2 * 3 and len(e3["knob_sweeps"]) == 5
    assert (tmp_path / "e3_lambda.png").stat().st_size > 5000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["e2", "--lams", "0", "1.5"], "lambda must be in [0, 1], got 1.5"),
        (["e2", "--tau", "nan"], "tau must be a finite number > 0, got nan"),
        (["e2", "--scales", "32y256"], "--scales: expected BATCHESxANCHORS"),
        (["e2", "--link_replications", "5"], "--link_replications needs one count per scale (2)"),
        (["e2", "--hardness", "3"], "--hardness must be in (0, 2]"),
        (["e2", "--alpha", "-1"], "alpha must be a finite number > 0"),
        (["e2", "--pot_qs", "1.0"], "--pot_qs must all be in (0, 1)"),
        (["e1", "--beta", "inf"], "beta must be a finite number > 0, got inf"),
        (["e1", "--replications", "1"], "--replications must be finite and >= 2"),
        (["e3", "--batches", "0"], "--batches must be finite and >= 1"),
        (["e1", "--seed", "-1"], "--seed must be an integer in [0, 2**62)"),
        (["e2", "--pot_sizes", "1000", "--pot_qs", "0.995"], "leaves about 5 exceedances"),
    ],
)
def test_bad_options_are_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    out = tmp_path / "never"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()  # nothing written, nothing run


@pytest.mark.slow
def test_runs_as_a_module(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "simcse_weince.cli.simulate", "e1", "--replications", "50", "--sample_sizes", "100",
           "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "E1 noise floor" in proc.stdout and (tmp_path / "e1.md").is_file()
