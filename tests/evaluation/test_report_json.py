"""The evaluation report is strict JSON: a value that is not a number (an undefined correlation, a timing gone
wrong) is written as null, never as the bare word NaN that jq and JSON.parse refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.evaluation.runner import EvaluationReport, write_report


def strict_load(path: Path) -> dict:
    def refuse(word: str) -> None:
        raise ValueError(f"{path} holds {word}, which is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_a_nan_in_the_report_is_written_as_null(tmp_path: Path) -> None:
    report = EvaluationReport(model="m", mode="test", seconds=float("nan"), encode_seconds=float("inf"))
    js, _ = write_report(report, tmp_path)
    saved = strict_load(js)
    assert saved["seconds"] is None and saved["encode_seconds"] is None


def test_the_strict_loader_refuses_bare_nan(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": NaN}')
    with pytest.raises(ValueError, match="NaN"):
        strict_load(path)
