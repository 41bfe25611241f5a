"""``simcse-simulate proposition|negatives|temperature|encoder``, the Ground truth II sweeps at their --quick size:
outputs, the known slope, resuming, and one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from weince_lab import simulate
from weince_lab.simulate import main, run
from weince_lab.simulation import sweep_runner
from weince_lab.simulation.sweep_cells import cell_key
from weince_lab.simulation.sweep_memory import memory_needs

QUICK_NEGATIVES = ["negatives", "--quick", "--kernels", "endpoint", "--ks", "4", "16", "--steps", "60"]


@pytest.mark.slow
def test_a_quick_proposition_sweep_recovers_the_one_over_k_rate(tmp_path: Path) -> None:
    """At the true vectors CE − R_k is O(1/k) (both of its parts are): the fitted slope is −1 within 0.15."""
    summary = run(["proposition", "--quick", "--kernels", "vmf", "--out", str(tmp_path)])
    (group,) = summary["groups"]
    assert group["slope"][0] == pytest.approx(-1.0, abs=0.15)
    for cell in summary["cells"]:
        rows = cell["rows"]
        assert all(r["inside"] for r in rows) and [r["k"] for r in rows] == [16, 64, 256, 1024]
        last = rows[-1]
        # k·gap at the largest k is the exact first-order constant, within the Monte Carlo noise and the O(1/k) rest.
        assert abs(last["k"] * last["gap"] - cell["first_order_constant"]) < 4 * last["k"] * last["se"] + 0.05 * abs(
            cell["first_order_constant"]
        )
    for name in ("proposition.md", "proposition.json", "proposition.png", "proposition.cells.jsonl"):
        assert (tmp_path / name).stat().st_size > 0
    assert "Whiteley lower" in (tmp_path / "proposition.md").read_text()


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_recomputing_finished_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path)
    first = run([*QUICK_NEGATIVES, "--out", out])
    store = tmp_path / "negatives.cells.jsonl"
    lines = store.read_text().splitlines()
    assert len(lines) == len(first["cells"]) == 2 * 2 * 2  # losses × ks × seeds
    # A kill: the last two cells never finished, one of them torn mid-write.
    store.write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:25])
    ran: list[dict] = []
    real = sweep_runner.run_cell
    monkeypatch.setattr(sweep_runner, "run_cell", lambda s, c: ran.append(c) or real(s, c))
    second = run([*QUICK_NEGATIVES, "--out", out])
    assert [cell_key(c) for c in ran] == [cell_key(json.loads(line)["cell"]) for line in lines[-2:]]
    same = {cell_key(r["cell"]): r["universe_gap"] for r in first["cells"]}
    assert {cell_key(r["cell"]): r["universe_gap"] for r in second["cells"]} == same  # seeded cells
    after = store.read_text().splitlines()
    assert after[6] == lines[-2][:25] and len(after) == 9  # the torn line was ended, the 2 new cells follow it
    assert [json.loads(x)["cell"] for x in after[7:]] == [json.loads(x)["cell"] for x in lines[-2:]]
    ran.clear()
    run([*QUICK_NEGATIVES, "--out", out])  # all done: nothing runs again
    assert ran == []
    table = (tmp_path / "negatives.md").read_text()
    assert "weince − infonce" in table and "Slope of log(universe KL)" in table


@pytest.mark.slow
def test_a_quick_temperature_sweep_writes_its_report(tmp_path: Path) -> None:
    summary = run(
        ["temperature", "--quick", "--kernels", "vmf", "--losses", "infonce", "--steps", "40", "--out", str(tmp_path)]
    )
    assert {b["tau"] for b in summary["best"]} <= {0.1, 0.5}
    assert (tmp_path / "temperature.png").stat().st_size > 0
    assert "small − large n" in (tmp_path / "temperature.md").read_text()
    for cell in summary["cells"]:  # ranking beside KL, and the KL under the link refitted on the table
        assert 0 <= cell["top1"] <= cell["recall10"] <= 1 and cell["best_link_gap"] >= 0
        assert set(cell["link"]) >= {"a", "b", "converged"}


@pytest.mark.slow
def test_a_quick_temperature_sweep_pairs_every_figure_and_says_where_kl_and_ranking_disagree(tmp_path: Path) -> None:
    summary = run(["temperature", "--quick", "--kernels", "endpoint", "--taus", "0.5", "--steps", "40",
                   "--out", str(tmp_path)])  # fmt: skip
    table = (tmp_path / "temperature.md").read_text()
    assert "| universe KL | top-1 | recall@10 | best-link KL |" in table
    assert "Where KL and ranking disagree" in table and "β̂, N − 1 items" in table
    for row in summary["paired"]:
        assert len(row["universe_gap"]) == len(row["top1"]) == len(row["recall10"]) == len(row["best_link_gap"]) == 2
        words = row["disagreement"]
        assert words is None or words in table
    assert [x["seed"] for x in summary["true_vector_statistics"]["per_seed"]] == [0, 1]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--taus", "-1"], "--taus must be finite numbers > 0"),
        (["--kernels", "gauss"], "--kernels must be of"),
        (["--losses", "triplet"], "--losses: loss must be one of"),
        (["--seeds", "1", "1"], "--seeds must be distinct"),
        (["--ks", "2", "4"], "--ks must be integers >= 3"),
        (["--ks", "4", "4"], "--ks must not repeat a value"),
        (["--taus", "0.1", "0.2"], "the negatives sweep takes one value"),
        (["--eval_sizes", "2"], "--eval_sizes must be integers >= 3"),
        (["--ks", "8"], "a slope needs at least 2 values of k"),
        (["--blend_lambda", "1.5"], "--blend_lambda: the blend's lambda must be in (0, 1)"),
        (
            ["--kernels", "vmf", "--blend_lambda", "nan"],
            "--blend_lambda: the blend's lambda must be in (0, 1)",
        ),  # checked though not run
        (["--workers", "0"], "--workers must be >= 1"),
        (["--noise", "-0.1"], "--noise must be a finite number >= 0"),
    ],
)
def test_bad_options_are_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    out = tmp_path / "never"
    assert main(["negatives", "--quick", *options, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    if message.startswith("--"):  # every message names its flag as a flag
        assert err.startswith(f"error: {message}"), err
    assert not out.exists()


def test_changed_settings_in_the_same_folder_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path)
    run([*QUICK_NEGATIVES, "--out", out])
    assert main([*QUICK_NEGATIVES, "--lr", "0.01", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a negatives sweep with other settings (lr)" in err and "\n" not in err
    # An option the sweep does not read (the proposition's Monte Carlo samples) does not stop the resume.
    assert main([*QUICK_NEGATIVES, "--samples", "999", "--out", out]) == 0
    assert "resuming: 8 of 8 cells" in capsys.readouterr().out
    (tmp_path / "negatives.settings.json").unlink()  # cells without the settings they were made with
    assert main([*QUICK_NEGATIVES, "--out", out]) == 2
    assert "has no settings file beside it" in capsys.readouterr().err


@pytest.mark.slow
def test_a_quick_encoder_sweep_scores_held_out_items(tmp_path: Path) -> None:
    summary = run(["encoder", "--quick", "--kernels", "vmf", "--steps", "60", "--out", str(tmp_path)])
    cell = summary["cells"][0]
    assert set(cell) >= {"train", "heldout", "lambda_mean"} and 0 <= cell["heldout"]["top1"] <= 1
    assert cell["heldout"]["universe_gap"] > 0 and summary["settings"]["items"] == 128  # the sweep's own size
    held = cell["heldout"]
    assert held["top1"] <= held["recall10"] <= 1 and held["best_link_gap"] >= 0 and "a" in held["link"]
    assert cell["train"]["top1"] <= cell["train"]["recall10"]
    assert set(summary["paired"][0]["heldout"]) == {"universe_gap", "top1", "recall10", "best_link_gap"}
    assert "held-out items" in (tmp_path / "encoder.md").read_text()


# ---- sizes against memory, the pool's workers, stops -------------------------------------------------------------
TINY_PROPOSITION = ["proposition", "--quick", "--kernels", "vmf", "--ks", "16", "64", "--samples", "2000"]


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (["--items", "10000000000"], "--items 10000000000"),  # once: torch.randn(1e10, 4) float64, 320 GB
        (["--dim", "100000000000"], "--dim 100000000000"),
        (["--pairs", "100000000000"], "--pairs 100000000000"),
        (["--samples", "1000000000000"], "--samples 1000000000000"),
    ],
)
def test_a_size_that_needs_more_memory_than_there_is_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, options: list[str], flag: str
) -> None:
    monkeypatch.setattr(simulate, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    out = tmp_path / "never"
    sweep = ["proposition", "--quick"] if flag.startswith("--samples") else ["negatives", "--quick"]
    assert main([*sweep, *options, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag} needs about ") and "\n" not in err, err
    assert "GB of memory" in err and "available on this machine" in err
    assert err.endswith(f"expected a smaller {flag.split()[0]}")
    assert not out.exists()


def test_the_memory_check_counts_every_worker(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch):
    from simcse_weince.core import memory

    monkeypatch.setattr(simulate, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    one = memory_needs(simulate.sweep_settings(simulate.build_parser().parse_args(
        ["negatives", "--quick", "--out", "x"])), workers=1)  # fmt: skip
    total = sum(b for _, b in one.values())
    monkeypatch.setattr(memory, "available_bytes", lambda: int(3 * total))
    assert main(["negatives", "--quick", "--workers", "4", "--out", str(tmp_path / "never")]) == 2
    assert capsys.readouterr().err.startswith("error: --workers 4 needs about ")


def test_a_stopped_sweep_says_what_it_kept_and_the_same_command_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal
    import time

    real = sweep_runner.run_cell
    calls: list[dict] = []

    def second_is_killed(settings: dict, cell: dict) -> dict:
        calls.append(cell)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        return real(settings, cell)

    out = tmp_path / "sweep"
    argv = [*TINY_PROPOSITION, "--out", str(out)]
    with monkeypatch.context() as patch:
        patch.setattr(sweep_runner, "run_cell", second_is_killed)
        assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"stopped: SIGTERM: kept 1 of 2 cells in {out / 'proposition.cells.jsonl'} (the cells in progress are "
        "dropped); run the same command to resume from there"
    )
    assert main(argv) == 0
    assert f"resuming: 1 of 2 cells already done in {out / 'proposition.cells.jsonl'}" in capsys.readouterr().out
