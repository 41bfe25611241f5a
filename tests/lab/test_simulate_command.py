"""``simcse-simulate``: each experiment writes its table, JSON and plots; bad options end in one line before work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from weince_lab.simulate import main, run


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
        (["e2", "--lams", "0", "1.5"], "--lams: lambda must be in [0, 1], got 1.5"),
        (["e2", "--tau", "nan"], "--tau must be a finite number > 0, got nan"),
        (["e2", "--scales", "32y256"], "--scales: expected BATCHESxANCHORS"),
        (["e2", "--link_replications", "5"], "--link_replications needs one count per scale (2)"),
        (["e2", "--hardness", "3"], "--hardness must be in (0, 2]"),
        (["e2", "--alpha", "-1"], "--alpha must be a finite number > 0"),
        (["e2", "--pot_qs", "1.0"], "--pot_qs must all be in (0, 1)"),
        (["e1", "--beta", "inf"], "--beta must be a finite number > 0, got inf"),
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
    if message.startswith("--"):  # a flag is named as a flag, the laws' own parameters too
        assert err.startswith(f"error: {message}"), err
    assert not out.exists()  # nothing written, nothing run


@pytest.mark.slow
def test_runs_as_a_module(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "weince_lab.simulate", "e1", "--replications", "50", "--sample_sizes", "100",
           "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "E1 noise floor" in proc.stdout and (tmp_path / "e1.md").is_file()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["e1", "--replications", "10000000000000"], "--replications 10000000000000"),
        (["e2", "--scales", "100000x100000", "--link_replications", "2"], "--scales 100000x100000"),
        (["e2", "--pot_sizes", "1000000000000", "--bootstrap", "10"], "--pot_sizes 1000000000000"),
        (["e3", "--batches", "1000000000000"], "--batches 1000000000000"),
    ],
)
def test_a_size_that_needs_more_memory_than_there_is_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, args: list[str], flag: str
) -> None:
    from weince_lab import simulate

    for name in ("run_e1", "run_e2", "run_e3"):
        monkeypatch.setattr(simulate, name, lambda *a, **k: pytest.fail("the experiment started"))
    out = tmp_path / "never"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag} needs about ") and "\n" not in err, err
    assert "of memory" in err and "available on this machine" in err
    assert err.endswith(f"expected a smaller {flag.split()[0]}")
    assert not out.exists()


@pytest.mark.parametrize("where", ["the file", "inside the file"])
def test_out_on_a_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture, where: str) -> None:
    """Once: ``[Errno 17] File exists`` (or ``[Errno 20] Not a directory``) from mkdir, after the experiment."""
    file = tmp_path / "results.txt"
    file.write_text("keep me\n")
    out = file if where == "the file" else file / "e3"
    assert main(["e3", "--batches", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --out {out}: {file} is a file") and "\n" not in err, err
    assert "Errno" not in err and "expected a folder" in err
    assert file.read_text() == "keep me\n"


def test_a_stop_says_what_was_kept_and_that_the_same_command_runs_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import time

    from weince_lab import simulate

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    out = tmp_path / "sim"
    argv = ["e1", "--replications", "50", "--sample_sizes", "100", "--out", str(out)]
    with monkeypatch.context() as patch:
        patch.setattr(simulate, "run_e1", terminated)
        assert main(argv) == 130
    assert capsys.readouterr().err.strip() == (
        f"stopped: SIGTERM: nothing was written into {out} (the results are written at the end); run the same "
        "command to run e1 again from the start"
    )
    assert not out.exists()
    with monkeypatch.context() as patch:
        patch.setattr(simulate.Path, "write_text", lambda *a, **k: terminated())
        assert main(argv) == 130
    assert capsys.readouterr().err.strip() == (
        f"stopped: SIGTERM: kept e1_noise_floor.png in {out}, the rest not written; run the same command to run e1 "
        "again from the start (it replaces them)"
    )
    assert main(argv) == 0 and (out / "e1.md").is_file()
