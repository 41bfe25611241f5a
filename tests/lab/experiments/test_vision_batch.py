"""The batch-size experiment's table: arms mean ± std and the paired difference 512 − 128."""

from __future__ import annotations

import pytest

from weince_lab.experiments.vision_batch import batch_table


def _row(probe: float, lam: float | None, steps: int) -> dict:
    aic = None if lam is None else 300.0
    return {"linear_probe": probe, "knn200": probe - 1, "R@1": probe / 2, "lambda": lam, "delta_aic": aic} | {
        "rho": 0.1,
        "steps": steps,
    }


def test_paired_difference_and_missing_statistics() -> None:
    runs = {
        ("weince", 512): {0: _row(30.0, 0.25, 45), 1: _row(32.0, 0.35, 45)},
        ("weince", 128): {0: _row(35.0, 0.20, 195), 1: _row(36.0, 0.20, 195)},
        ("infonce", 128): {0: _row(36.0, None, 195), 1: _row(37.0, None, 195)},
    }
    table, summary = batch_table(runs, [0, 1])
    lines = table.splitlines()
    assert lines[0].startswith("| loss | batch | steps | linear_probe | knn200 | R@1 | mean λ | mean ΔAIC |")
    assert lines[2].startswith("| weince | 512 | 45 | 31.00 ± 1.41 |")
    assert "| infonce | 128 | 195 | 36.50 ± 0.71 |" in lines[4] and lines[4].endswith("| – | – | 0.100 ± 0.000 |")
    assert summary["difference"]["weince"]["linear_probe"] == [-5.0, -4.0]
    assert summary["difference"]["weince"]["lambda"] == pytest.approx([0.05, 0.15])
    assert "infonce" not in summary["difference"]  # no 512 arm: no paired row
    assert lines[-2].startswith("| weince | 512 − 128 (paired) | | -4.500 ± 0.707 |")
    assert lines[-1].startswith("| weince − infonce (paired) | 128 | | -1.000 ± 0.000 |")  # no 512 A/B, no interaction
    assert "interaction" not in summary


def test_weince_minus_infonce_at_each_batch_and_the_interaction() -> None:
    runs = {
        ("weince", 128): {0: _row(35.0, 0.20, 195), 1: _row(36.0, 0.20, 195)},
        ("weince", 512): {0: _row(30.0, 0.25, 45), 1: _row(32.0, 0.35, 45)},
        ("infonce", 128): {0: _row(36.0, None, 195), 1: _row(38.0, None, 195)},
        ("infonce", 512): {0: _row(29.0, None, 45), 1: _row(30.0, None, 45)},
    }
    table, summary = batch_table(runs, [0, 1])
    assert summary["weince_minus_infonce"]["128"]["linear_probe"] == [-1.0, -2.0]
    assert summary["weince_minus_infonce"]["512"]["linear_probe"] == [1.0, 2.0]
    assert summary["interaction"]["linear_probe"] == [2.0, 4.0]
    lines = table.splitlines()
    assert lines[-3].startswith("| weince − infonce (paired) | 128 | | -1.500 ± 0.707 |")
    assert lines[-2].startswith("| weince − infonce (paired) | 512 | | 1.500 ± 0.707 |")
    assert lines[-1].startswith("| (weince − infonce) at 512 − at 128 | | | 3.000 ± 1.414 |")
    assert lines[-1].endswith("| – | – | – |")  # no λ / ΔAIC / ρ contrast: InfoNCE has none
