"""Does a larger batch pass the checks that a longer schedule does not? Six failing cells of this sweep again at 4×
the anchors per step.

    python experiments/results/ground_truth_annealed/negatives_16000_long_decay/larger_batch/compute.py [OUT]

The cells: WEINCE with β = 1 (``weince_unit``) under the endpoint kernel at k = 4 (all three seeds failed their
check, each moving −0.010 to −0.014 nats: still falling) and under the blend at k = 16 (two of three failed). Each is
trained exactly as the sweep trains it (its settings, ``negatives.settings.json``; the library's ``train_table`` with
its convergence check: 16,000 steps whose last 15,000 decay the rate linearly to 0, checked against 24,000 steps with
the same decay, the two sharing their first 1,000), with one change: ``batch`` = 4 × 256 = 1,024 anchors per step
(4× the pairs and negatives drawn, 4× the cost). The universe KL at both step counts and its move are set beside
the sweep's own (batch 256) for the same cell and seed. A cell passes when the KL moved by at most 0.005 nats, the
sweep's tolerance. Writes output.json and output.md beside this file (or into OUT); two cells at a time, one torch
thread each.
"""

import dataclasses
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from weince_lab.simulation.decision_rule import read_cells
from weince_lab.simulation.learning import build_loss, checked_state, train_table
from weince_lab.simulation.search import universe_gap
from weince_lab.simulation.sweep_cells import (
    KL_TOLERANCE,
    cell_key,
    check_steps,
    convergence,
    one_thread,
    train_config,
    universe_of,
)
from weince_lab.simulation.sweep_settings import SweepSettings

HERE = Path(__file__).resolve().parent
SWEEP = HERE.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
FACTOR = 4
ARMS = (("endpoint", "weince_unit", 4), ("blend", "weince_unit", 16))
CHECK_FIELDS = ("universe_gap", "check_universe_gap", "moved", "converged")  # a stored check's fields in each row


def settings() -> SweepSettings:
    return SweepSettings(**json.loads((SWEEP / "negatives.settings.json").read_text(encoding="utf-8")))


def stored() -> dict:
    """The sweep's stored records by cell (:func:`cell_key`)."""
    return {cell_key(r["cell"]): r for r in read_cells(SWEEP / "negatives.cells.jsonl")}


def run(cell: dict) -> dict:
    def work() -> dict:
        t0 = time.perf_counter()
        s = settings()
        universe = universe_of(s, cell["kernel"], cell["seed"])
        loss = build_loss(cell["loss"], cell["tau"], universe.kernel)
        cfg = dataclasses.replace(train_config(s, cell), batch=FACTOR * s.batch)
        later = check_steps(s.steps)
        result = train_table(universe, loss, cfg, check_steps=later)
        with checked_state(result, [], loss):
            check = universe_gap(universe, result.check.table, loss)
        checked = convergence(s.steps, universe_gap(universe, result.table, loss), later, check)
        return {"batch": cfg.batch, **{f: checked[f] for f in CHECK_FIELDS}, "seconds": time.perf_counter() - t0}

    return one_thread(work)


def write(rows: list[dict], s: SweepSettings, out: Path) -> None:
    """output.json and output.md of ``rows`` (one per cell: its batch-256 check as stored, its larger batch's)."""
    small, big = f"batch_{s.batch}", f"batch_{FACTOR * s.batch}"
    arms = []
    for kernel, loss, k in ARMS:
        members = [r for r in rows if (r["cell"]["kernel"], r["cell"]["loss"], r["cell"]["k"]) == (kernel, loss, k)]
        for key in (small, big):
            checks = [r[key] for r in members]
            arms.append({"kernel": kernel, "loss": loss, "k": k, "batch": key, "cells": len(checks),
                         "passed": sum(c["converged"] for c in checks),
                         "mean_universe_gap": float(np.mean([c["universe_gap"] for c in checks])),
                         "mean_move": float(np.mean([c["moved"] for c in checks])),
                         "mean_abs_move": float(np.mean([abs(c["moved"]) for c in checks]))})  # fmt: skip
    (out / "output.json").write_text(
        json.dumps({"tolerance": KL_TOLERANCE, "cells": rows, "arms": arms}, indent=2) + "\n", encoding="utf-8"
    )
    lines = [
        f"Universe KL at {s.steps:,} and {check_steps(s.steps):,} steps (a {s.anneal:,}-step final decay) and its "
        f"move, at the sweep's batch ({s.batch}) and at {FACTOR * s.batch}; a check passes when |move| <= "
        f"{KL_TOLERANCE}.",
        "",
        f"| kernel | loss | k | seed | {s.batch}: KL | check | move "
        f"| {FACTOR * s.batch}: KL | check | move | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c, a, b = r["cell"], r[small], r[big]
        lines.append(
            f"| {c['kernel']} | {c['loss']} | {c['k']} | {c['seed']} | {a['universe_gap']:.4f} | "
            f"{a['check_universe_gap']:.4f} | {a['moved']:+.4f}{'' if a['converged'] else ' ✗'} | "
            f"{b['universe_gap']:.4f} | {b['check_universe_gap']:.4f} | {b['moved']:+.4f}"
            f"{'' if b['converged'] else ' ✗'} | {b['seconds']:.0f} |"
        )
    passed = [sum(r[key]["converged"] for r in rows) for key in (small, big)]
    lines += ["", f"Checks passed: {passed[0]} of {len(rows)} at batch {s.batch}, {passed[1]} of {len(rows)} at "
              f"batch {FACTOR * s.batch} (✗: failed)."]  # fmt: skip
    lines += [
        "",
        "Per arm, means over its seeds:",
        "",
        "| kernel | loss | k | batch | passed | KL at the budget | move | abs move |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        lines.append(f"| {a['kernel']} | {a['loss']} | {a['k']} | {a['batch'].removeprefix('batch_')} | "
                     f"{a['passed']}/{a['cells']} | {a['mean_universe_gap']:.4f} | {a['mean_move']:+.4f} | "
                     f"{a['mean_abs_move']:.4f} |")  # fmt: skip
    (out / "output.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main() -> None:
    s = settings()
    before = stored()
    cells = [
        {"kernel": kernel, "loss": loss, "k": k, "tau": s.taus[0], "pairs": s.pairs[0], "seed": seed}
        for kernel, loss, k in ARMS
        for seed in s.seeds
    ]
    with Pool(2) as pool:
        larger = pool.map(run, cells)
    rows = []
    for cell, new in zip(cells, larger, strict=True):
        old = before[cell_key(cell)]["convergence"]
        rows.append({"cell": cell, "steps": s.steps, "check_steps": check_steps(s.steps), "anneal": s.anneal,
                     f"batch_{s.batch}": {f: old[f] for f in CHECK_FIELDS},
                     f"batch_{FACTOR * s.batch}": new})  # fmt: skip
    write(rows, s, OUT)


if __name__ == "__main__":
    main()
