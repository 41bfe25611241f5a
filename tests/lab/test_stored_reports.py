"""Every stored report regenerates byte for byte from what is stored beside it: the sweeps and the decision rule
from their cells, E1–E3 from their results, the experiment drivers' tables from their summaries, the link-truth
report from its cells. The tables are built as rows and rendered by one writer (``weince_lab.report.table``)."""

from __future__ import annotations

import argparse
import json
import math
import re
import runpy
import shutil
import sys
from pathlib import Path

import pytest
from scipy import stats

from weince_lab.experiments import link_truth, which_loss_truth
from weince_lab.experiments import paper_protocol as pp
from weince_lab.experiments.common import summary_table
from weince_lab.experiments.sick_mining_ab import combine
from weince_lab.experiments.vision_batch import batch_table
from weince_lab.report import table
from weince_lab.simulate import build_parser, e2_config
from weince_lab.simulation import sweep_reports
from weince_lab.simulation.decision_rule import markdown, read_cells
from weince_lab.simulation.experiments import e1_markdown, e2_markdown, e3_markdown
from weince_lab.simulation.sweep_cells import cell_key
from weince_lab.simulation.sweep_runner import REPORTS
from weince_lab.simulation.sweep_settings import SweepSettings

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"
SWEEPS = sorted(RESULTS.rglob("*.settings.json"))
SUMMARIES = sorted(
    p for p in RESULTS.glob("*.json") if {"losses", "difference", "seeds", "base"} <= set(json.loads(p.read_text()))
)


def test_the_table_writer() -> None:
    assert table(["a", "b"], [[1, ""], ["x", "y"]]) == ["| a | b |", "|---|---|", "| 1 | |", "| x | y |"]
    with pytest.raises(ValueError, match="a table row of 1 cells under a header of 2"):
        table(["a", "b"], [["only"]])


@pytest.mark.parametrize("settings_file", SWEEPS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_sweep_report_regenerates_from_its_cells(settings_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = settings_file.name.removesuffix(".settings.json")
    stored = settings_file.with_name(f"{name}.md").read_text(encoding="utf-8")
    machine = re.search(r"\d+ CPU cores, torch \S+, 1 thread per cell", stored).group(0)  # where the cells ran
    monkeypatch.setattr(sweep_reports, "machine", lambda: machine)
    settings = SweepSettings(**json.loads(settings_file.read_text(encoding="utf-8")))
    records = read_cells(settings_file.with_name(f"{name}.cells.jsonl"))
    _, text = REPORTS[settings.sweep](settings, records)
    compute = sum(r["seconds"] for r in records)
    text += f"\nCompute: {compute:.0f} s in cells ({len(records)} cells); plot {name}.png.\n"  # as write_report adds
    assert text == stored


@pytest.mark.parametrize("sweep", ["proposition", "encoder"])
def test_the_reports_read_the_cells_in_seed_order(sweep: str) -> None:
    """A sweep's cells are stored in the order they finished; the report (its convergence table included) is the
    same for any order."""
    settings_file = RESULTS / "ground_truth" / f"{sweep}.settings.json"
    settings = SweepSettings(**json.loads(settings_file.read_text(encoding="utf-8")))
    records = read_cells(settings_file.with_name(f"{sweep}.cells.jsonl"))
    assert REPORTS[sweep](settings, records)[1] == REPORTS[sweep](settings, records[::-1])[1]


@pytest.mark.parametrize("folder", ["decision_rule", "decision_rule_annealed", "decision_rule_long_decay"])
def test_the_decision_rule_report_regenerates(folder: str) -> None:
    stored = (RESULTS / folder / "decision_rule.md").read_text(encoding="utf-8")
    result = json.loads((RESULTS / folder / "decision_rule.json").read_text(encoding="utf-8"))
    header = stored[: stored.index("\n\n| kernel |")]  # the run's own line (its seconds), as written then
    assert markdown(result["rows"], result["truths"], header) == stored


@pytest.mark.parametrize("experiment", ["e1", "e2", "e3"])
def test_an_experiment_report_regenerates_from_its_result(experiment: str) -> None:
    result = json.loads((RESULTS / "simulation" / f"{experiment}.json").read_text(encoding="utf-8"))
    args = build_parser().parse_args(result["argv"])
    text = {
        "e1": lambda: e1_markdown(result, args.replications, args.seed, args.beta),
        "e2": lambda: e2_markdown(result, e2_config(args)),
        "e3": lambda: e3_markdown(result, args.batches, args.seed),
    }[experiment]()
    assert text == (RESULTS / "simulation" / f"{experiment}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("summary_file", SUMMARIES, ids=lambda p: p.name)
def test_a_driver_table_regenerates_from_its_summary(summary_file: Path) -> None:
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    seeds, losses = summary["seeds"], summary["losses"]
    metrics = list(next(iter(losses.values())))
    per_run = {
        loss: {seed: {m: by_metric[m]["runs"][i] for m in metrics} for i, seed in enumerate(seeds)}
        for loss, by_metric in losses.items()
    }
    text, _ = summary_table(per_run, metrics, summary["base"])
    assert text in summary_file.with_suffix(".md").read_text(encoding="utf-8")


def test_the_batch_and_protocol_and_negatives_tables_regenerate() -> None:
    stored = json.loads((RESULTS / "vision_batch.json").read_text(encoding="utf-8"))
    runs = {}
    for key, columns in stored["arms"].items():
        loss, batch = key.rsplit("-b", 1)
        runs[loss, int(batch)] = {s: {c: v[i] for c, v in columns.items()} for i, s in enumerate(stored["seeds"])}
    assert batch_table(runs, stored["seeds"])[0] in (RESULTS / "vision_batch.md").read_text(encoding="utf-8")
    for name in ("paper_protocol_cpu", "paper_protocol_links", "paper_protocol_links_a"):
        stored = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
        args = argparse.Namespace(seeds=stored["seeds"], eval_seeds=stored["eval_seeds"])
        text, _ = pp.summarise(args, {arm: a["selected"] for arm, a in stored["arms"].items()})
        assert text in (RESULTS / f"{name}.md").read_text(encoding="utf-8")
    arms = {}
    for arm in ("sick", "mined", "none"):
        stored = json.loads((RESULTS / f"sup_sick_negatives-{arm}.json").read_text(encoding="utf-8"))
        for part in ("per_run", "lambda"):  # JSON keys are strings; the runs' seeds are ints
            stored[part] = {v: {int(s): r for s, r in runs.items()} for v, runs in stored[part].items()}
        arms[arm] = stored
    text, _ = combine(arms, list(arms["sick"]["per_run"]))
    assert text in (RESULTS / "sup_sick_negatives.md").read_text(encoding="utf-8")


def long_decay(*k: str, kernel: str) -> list[str]:
    """A known-truth driver's options for the long decay (16,000 steps, the last 15,000 decaying) under one kernel,
    after its option for the numbers of negatives, if any (``"--ks", "16"`` or ``"--k", "16"``)."""
    return [*k, "--steps", "16000", "--anneal", "15000", "--kernels", kernel]


@pytest.mark.parametrize(
    ("folder", "options"),
    [
        ("link_truth", []),
        ("link_truth_annealed", ["--ks", "64", "--steps", "6000", "--anneal", "2000"]),
        ("link_truth_annealed_k16", ["--ks", "16", "--steps", "6000", "--anneal", "2000"]),
        ("link_truth_annealed_k256", ["--ks", "256", "--steps", "6000", "--anneal", "2000"]),
        ("link_truth_annealed_16000_endpoint", long_decay("--ks", "64", kernel="endpoint")),
        ("link_truth_annealed_k16_16000_endpoint", long_decay("--ks", "16", kernel="endpoint")),
        ("link_truth_annealed_k256_16000_endpoint", long_decay("--ks", "256", kernel="endpoint")),
        ("link_truth_annealed_k16_16000_vmf", long_decay("--ks", "16", kernel="vmf")),
        ("link_truth_annealed_k16_16000_blend", long_decay("--ks", "16", kernel="blend")),
        ("link_truth_annealed_16000_vmf", long_decay("--ks", "64", kernel="vmf")),
        ("link_truth_annealed_16000_blend", long_decay("--ks", "64", kernel="blend")),
        ("link_truth_annealed_k256_16000_blend", long_decay("--ks", "256", kernel="blend")),
        ("link_truth_annealed_k256_16000_vmf", long_decay("--ks", "256", kernel="vmf")),
    ],
)
def test_the_link_truth_report_regenerates_from_its_cells(folder: str, options: list[str], tmp_path: Path) -> None:
    for name in ("cells.jsonl", "settings.json"):
        shutil.copy(RESULTS / folder / name, tmp_path / name)
    assert link_truth.main(["--out", str(tmp_path), "--workers", "1", *options]) == 0  # every cell stored: none runs
    stored = RESULTS / folder
    assert (tmp_path / "output.md").read_text(encoding="utf-8") == (stored / "output.md").read_text(encoding="utf-8")
    made, kept = (json.loads((f / "output.json").read_text(encoding="utf-8")) for f in (tmp_path, stored))
    assert _same(made, kept)


@pytest.mark.parametrize(
    ("folder", "options"),
    [
        ("which_loss_tuned", []),
        ("which_loss_tuned_k16", ["--k", "16"]),
        ("which_loss_tuned_k256", ["--k", "256"]),
        ("which_loss_tuned_16000_endpoint", long_decay(kernel="endpoint")),
        ("which_loss_tuned_k16_16000_endpoint", long_decay("--k", "16", kernel="endpoint")),
        ("which_loss_tuned_k16_16000_vmf", long_decay("--k", "16", kernel="vmf")),
        ("which_loss_tuned_k16_16000_blend", long_decay("--k", "16", kernel="blend")),
    ],
)
def test_the_tuned_loss_comparison_regenerates_from_its_cells(folder: str, options: list[str], tmp_path: Path) -> None:
    """The known-truth loss comparison at one tuning budget: its choices and tables from the stored cells alone."""
    for name in ("cells.jsonl", "settings.json"):
        shutil.copy(RESULTS / folder / name, tmp_path / name)
    assert which_loss_truth.main(["--out", str(tmp_path), "--workers", "1", *options]) == 0  # nothing runs
    stored = RESULTS / folder
    assert (tmp_path / "output.md").read_text(encoding="utf-8") == (stored / "output.md").read_text(encoding="utf-8")
    # the summary's unrounded floats to 1e-9 relative (the lowest scipy allowed gives t quantiles 1e-12 apart)
    made, kept = (json.loads((folder / "output.json").read_text(encoding="utf-8")) for folder in (tmp_path, stored))
    assert _same(made, kept)


def _same(made: object, kept: object, rel: float = 1e-9) -> bool:
    if isinstance(made, float) and isinstance(kept, float):
        return math.isclose(made, kept, rel_tol=rel, abs_tol=1e-12)
    if isinstance(made, dict) and isinstance(kept, dict):
        return made.keys() == kept.keys() and all(_same(made[k], kept[k], rel) for k in made)
    if isinstance(made, list) and isinstance(kept, list):
        return len(made) == len(kept) and all(_same(m, k, rel) for m, k in zip(made, kept, strict=True))
    return made == kept


CELL_STORES = sorted(RESULTS.rglob("*cells.jsonl"))
# Trained before the convergence check existed (superseded by the re-runs with a final decay); their reports say so.
UNCHECKED = {
    "ground_truth/negatives.cells.jsonl",
    "ground_truth/temperature_d16/temperature.cells.jsonl",
    "ground_truth/temperature_d4/temperature.cells.jsonl",
    "ground_truth/encoder_item8/encoder.cells.jsonl",
    "link_truth/cells.jsonl",
}
UNTRAINED = {"ground_truth/proposition.cells.jsonl"}  # fixed embeddings: nothing is trained, nothing to converge


def _checks(record: dict) -> list[dict]:
    """A cell's convergence checks: one, or the encoder's two (trained and held-out items)."""
    check = record["convergence"]
    return [check["train"], check["heldout"]] if "train" in check else [check]


@pytest.mark.parametrize("cells", CELL_STORES, ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_every_stored_training_cell_carries_its_check_and_the_report_counts_them(cells: Path) -> None:
    """A cell of a checked store holds its budget's and its 1.5x check's universe KL and a verdict that is theirs
    (moved by at most the tolerance); its report's count of passed checks is the cells' own, and every cell that failed
    its check is named in the report's table of unconverged arms (nothing ranked off it unmarked). A store trained
    before the check holds none and its report says 'not checked'."""
    name = cells.relative_to(RESULTS).as_posix()
    records = [json.loads(line) for line in cells.read_text(encoding="utf-8").splitlines() if line.strip()]
    report = cells.with_name("output.md" if cells.name == "cells.jsonl" else cells.name.replace(".cells.jsonl", ".md"))
    text = report.read_text(encoding="utf-8")
    if name in UNTRAINED or name in UNCHECKED:
        assert not any("convergence" in r for r in records)
        assert name in UNTRAINED or "not checked" in text.lower()
        return
    checks = [c for r in records for c in _checks(r)]
    for c in checks:
        assert c["check_steps"] == c["steps"] * 3 // 2
        assert math.isclose(c["moved"], c["check_universe_gap"] - c["universe_gap"], abs_tol=1e-12)
        assert c["converged"] == (abs(c["moved"]) <= c["tolerance"]) and c["tolerance"] == 0.005
    passed = sum(c["converged"] for c in checks)
    assert f"{passed:,} of {len(checks):,} checks passed" in text
    # every cell that failed its check is named (its arm's row in the report's convergence table): none unmarked
    table_text = text[text.index("**Convergence**") :].split("\n\n")
    rows = [line.strip("|").split(" | ") for part in table_text for line in part.splitlines() if line.startswith("|")]
    rows = [[v.strip() for v in row] for row in rows]
    names = rows[0][: rows[0].index("converged")] if rows else []
    named = {tuple(row[: len(names)]) for row in rows[2:]}
    for record in records:
        check = record["convergence"]
        for part, c in (
            {"train": check["train"], "heldout": check["heldout"]} if "train" in check else {"": check}
        ).items():
            if not c["converged"]:
                fields = {**record["cell"], "part": part}
                assert tuple(str(fields[n]) for n in names) in named, (name, record["cell"], part)


@pytest.mark.parametrize(
    "sweep",
    [
        "ground_truth",
        "ground_truth_annealed/negatives_6000",
        "ground_truth_annealed/negatives_12000_endpoint",
        "ground_truth_annealed/negatives_12000_vmf",
        "ground_truth_annealed/negatives_12000_blend",
        "ground_truth_annealed/negatives_16000_long_decay",
        "ground_truth_annealed/negatives_32000_batch1024",
        "ground_truth_annealed/negatives_32000_batch1024_k64",
        "ground_truth_annealed/negatives_32000_batch1024_k256",
    ],
)
def test_the_negatives_ranking_regenerates_from_its_cells(
    sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A negatives sweep's ranking (arm − InfoNCE, paired by seed) from its stored cells, by the one script (beside the
    constant-rate sweep's), for the constant-rate and the decayed sweep."""
    stored = RESULTS / sweep
    shutil.copy(stored / "negatives.cells.jsonl", tmp_path / "negatives.cells.jsonl")
    script = RESULTS / "ground_truth" / "negatives_ranking" / "compute.py"
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path)])
    runpy.run_path(str(script), run_name="__main__")
    made, kept = (folder / "negatives_ranking" for folder in (tmp_path, stored))
    assert (made / "output.md").read_text(encoding="utf-8") == (kept / "output.md").read_text(encoding="utf-8")
    # the unrounded floats to 1e-6 relative: with the lowest numpy and scipy allowed, a difference of two nearly equal
    # KLs and its interval come out up to 1.2e-9 relative apart
    assert _same(*(json.loads((f / "output.json").read_text(encoding="utf-8")) for f in (made, kept)), rel=1e-6)


def _sweep_store(folder: Path, sweep: str) -> tuple[dict[str, dict], dict]:
    """A sweep folder's stored records keyed by :func:`cell_key`, and its settings as stored."""
    records = {cell_key(r["cell"]): r for r in read_cells(folder / f"{sweep}.cells.jsonl")}
    return records, json.loads((folder / f"{sweep}.settings.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("k", [64, 256])
def test_a_larger_k_folders_k16_cells_are_the_32000_folders(k: int) -> None:
    """A larger-k folder (k = 64, k = 256) holds its kernels' k = 16 cells of the 32,000-step folder (a sweep needs two
    k for its slope): every one of them, the same records, and the same settings but for the kernels and k trained."""
    folders = [RESULTS / "ground_truth_annealed" / f"negatives_32000_batch1024{tail}" for tail in ("", f"_k{k}")]
    (main, main_settings), (larger, larger_settings) = (_sweep_store(f, "negatives") for f in folders)
    settings = [main_settings, larger_settings]
    kernels = settings[1]["kernels"]
    assert set(kernels) <= set(settings[0]["kernels"]) and settings[1]["ks"] == [16, k]
    shared = {key for key, r in larger.items() if r["cell"]["k"] == 16}
    assert shared == {key for key, r in main.items() if r["cell"]["k"] == 16 and r["cell"]["kernel"] in kernels}
    per_kernel = len(settings[1]["losses"]) * len(settings[1]["seeds"])
    assert len(shared) == per_kernel * len(kernels) and all(larger[key] == main[key] for key in shared)
    assert {key for key, r in larger.items() if r["cell"]["k"] == k} and len(larger) == 2 * len(shared)
    assert {**settings[1], "kernels": None, "ks": None} == {**settings[0], "kernels": None, "ks": None}


def test_the_long_decay_temperature_folders_tau_01_cells_are_the_negatives_sweeps() -> None:
    """The temperature sweep with the long decay holds InfoNCE's and WEINCE's τ = 0.1 cells of the negatives sweep with
    the long decay (the same training cell at the same settings: copied, not trained twice): every one of them, the
    same records, and the same settings but for the sweep's name and the grid (k, τ, losses) each trains."""
    folder = RESULTS / "ground_truth_annealed"
    tau = folder / "temperature_16000_long_decay"
    neg = folder / "negatives_16000_long_decay"
    temperature, tau_settings = _sweep_store(tau, "temperature")
    negatives, neg_settings = _sweep_store(neg, "negatives")
    settings = [tau_settings, neg_settings]
    shared = {key for key, r in temperature.items() if r["cell"]["tau"] == 0.1}
    wanted = {
        key
        for key, r in negatives.items()
        if r["cell"]["k"] == 64 and r["cell"]["loss"] in settings[0]["losses"] and r["cell"]["tau"] == 0.1
    }
    assert shared == wanted and len(shared) == 3 * 2 * 3 and all(temperature[key] == negatives[key] for key in shared)
    assert len(temperature) == 3 * len(shared) and settings[0]["ks"] == [64] and 0.1 in settings[0]["taus"]
    grid = {"sweep": None, "ks": None, "taus": None, "losses": None}
    assert {**settings[0], **grid} == {**settings[1], **grid}


def test_the_long_decay_spread_regenerates_from_the_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedule-to-schedule spread of the few-negative cells, from the long-decay sweep's cells and the 12,000-step
    sweeps' cells as stored, by its own script."""
    kept = RESULTS / "ground_truth_annealed" / "negatives_16000_long_decay" / "spread"
    monkeypatch.setattr(sys, "argv", [str(kept / "compute.py"), str(tmp_path)])
    runpy.run_path(str(kept / "compute.py"), run_name="__main__")
    assert (tmp_path / "output.md").read_text(encoding="utf-8") == (kept / "output.md").read_text(encoding="utf-8")
    made, stored = (json.loads((f / "output.json").read_text(encoding="utf-8")) for f in (tmp_path, kept))
    assert _same(made, stored, rel=1e-9)
    # four tables per cell; the pass share is P(|X - Y| <= 0.005) for X - Y ~ N(0, 2 s_w^2), by scipy's normal law
    assert all(len(c["tables"]) == 4 for c in made["cells"])
    for row in made["summary"]:
        law = stats.norm(scale=math.sqrt(2) * row["pooled_within_sd"])
        assert row["pass_share_by_chance"] == pytest.approx(law.cdf(0.005) - law.cdf(-0.005), rel=1e-9)


def test_the_larger_batch_checks_are_the_sweeps_and_regenerate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The six long-decay cells of two failing β = 1 arms trained again at 4× the batch: each row's batch-256 check is
    the sweep's stored one for that cell, every move is check − budget and every pass flag is |move| <= the
    tolerance, the larger runs used 1,024 anchors a step, and the report regenerates from output.json by the
    script's own writer."""
    kept = RESULTS / "ground_truth_annealed" / "negatives_16000_long_decay" / "larger_batch"
    monkeypatch.setattr(sys, "argv", [str(kept / "compute.py")])
    script = runpy.run_path(str(kept / "compute.py"), run_name="larger_batch")
    made = json.loads((kept / "output.json").read_text(encoding="utf-8"))
    sweep = script["stored"]()
    assert len(made["cells"]) == 6 and made["tolerance"] == 0.005
    for row in made["cells"]:
        c = row["cell"]
        stored = sweep[script["cell_key"](c)]["convergence"]
        assert row["batch_256"] == {f: stored[f] for f in script["CHECK_FIELDS"]}
        assert row["batch_1024"]["batch"] == 1024
        for check in (row["batch_256"], row["batch_1024"]):
            assert check["moved"] == pytest.approx(check["check_universe_gap"] - check["universe_gap"], abs=1e-12)
            assert check["converged"] == (abs(check["moved"]) <= made["tolerance"])
    script["write"](made["cells"], script["settings"](), tmp_path)
    assert (tmp_path / "output.md").read_text(encoding="utf-8") == (kept / "output.md").read_text(encoding="utf-8")


def test_the_strict_start_tau_003_pairing_regenerates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """InfoNCE at τ 0.03 from the strict 90-minute start, paired by seed with that start's stored arms: the table and
    its intervals regenerate from the two stored summaries, the pairing is against τ 0.03 over 5 seeds, and the
    stored InfoNCE run trained again came out the same (the condition for pairing runs of two sessions)."""
    kept = RESULTS / "mlm_mini90_strict_tau003_paired"
    monkeypatch.setattr(sys, "argv", [str(kept / "compute.py"), str(tmp_path)])
    runpy.run_path(str(kept / "compute.py"), run_name="__main__")
    assert (tmp_path / "output.md").read_text(encoding="utf-8") == (kept / "output.md").read_text(encoding="utf-8")
    made = json.loads((tmp_path / "output.json").read_text(encoding="utf-8"))
    assert _same(made, json.loads((kept / "output.json").read_text(encoding="utf-8")))
    assert made["base"] == "infonce:temperature=0.03" and made["seeds"] == [0, 1, 2, 3, 4]
    assert len(made["difference"]) == 7 and made["reproduced_max_abs_difference"] < 1e-6
