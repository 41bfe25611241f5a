"""SICK's training split as supervised SimCSE rows: every positive is an entailment of its premise, every hard
negative contradicts it, and the counts are those of the real file."""

from __future__ import annotations

import csv
from pathlib import Path

from weince_lab.experiments.sick_nli import build_rows, main, read_sick


def test_rows_from_the_real_training_split(shared_data: Path, tmp_path: Path, capsys) -> None:
    sick = read_sick(shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt")
    assert len(sick) == 4500
    entails = {(a, b) for a, b, j in sick if j == "ENTAILMENT"}
    contradicts = {frozenset((a, b)) for a, b, j in sick if j == "CONTRADICTION"}
    triplets, pairs = build_rows(sick)
    assert (len(triplets), len(pairs)) == (251, 1033)  # 1,299 entailment rows, 1,284 distinct
    assert len(triplets) + len(pairs) == len(entails)  # every distinct entailment is used once
    for premise, positive, negative in triplets:
        assert (premise, positive) in entails and frozenset((premise, negative)) in contradicts
    premises_with_negatives = {p for p, _, _ in triplets}
    assert all((p, q) in entails and p not in premises_with_negatives for p, q in pairs)

    assert main(["--out", str(tmp_path), "--data_dir", str(shared_data / "senteval" / "downstream")]) == 0
    assert "251 triplets" in capsys.readouterr().out
    with (tmp_path / "triplets.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["sent0", "sent1", "hard_neg"] and [tuple(r) for r in rows[1:]] == triplets


def test_contradiction_counts_both_ways() -> None:
    sick = [("a", "b", "ENTAILMENT"), ("c", "a", "CONTRADICTION"), ("d", "e", "ENTAILMENT"), ("a", "f", "NEUTRAL")]
    assert build_rows(sick) == ([("a", "b", "c")], [("d", "e")])
