"""Supervised SimCSE rows from SICK's training split, the offline stand-in for SimCSE's NLI data.

SICK pairs (sentence_A, sentence_B) carry an entailment judgement. Reading sentence_A as the premise, as SimCSE
reads NLI: an ENTAILMENT sentence_B is a positive; a sentence in a CONTRADICTION pair with the premise (either
way round: contradiction is symmetric) is a hard negative; NEUTRAL pairs are not used. Each premise gives one
row per positive: a triplet ``(sent0, sent1, hard_neg)`` when it has contradictions (cycled over its
positives), else a pair ``(sent0, sent1)``. Only the training split is read; SICK-R's sentences share SICK's
pool, so SICK-R scores of models trained on these rows are marked, not averaged.

    python -m weince_lab.experiments.sick_nli --out outputs/sick_nli  # writes triplets.csv and pairs.csv, prints counts
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from simcse_weince.core.paths import senteval_root  # noqa: E402

LABELS = ("ENTAILMENT", "CONTRADICTION")


def read_sick(path: Path) -> list[tuple[str, str, str]]:
    """(sentence_A, sentence_B, judgement) of every row of a SICK file (header skipped)."""
    rows = []
    with path.open(encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, start=1):
            cols = line.rstrip("\r\n").split("\t")
            if lineno == 1:
                continue
            if len(cols) < 5:
                raise ValueError(f"{path}:{lineno}: expected 5 TAB-separated columns (SICK layout), got {len(cols)}")
            rows.append((cols[1].strip(), cols[2].strip(), cols[4].strip()))
    return rows


def build_rows(sick: list[tuple[str, str, str]]) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(triplets, pairs) in file order of their premises."""
    positives: dict[str, dict[str, None]] = defaultdict(dict)  # ordered sets: SICK repeats some pairs
    negatives: dict[str, dict[str, None]] = defaultdict(dict)
    for a, b, label in sick:
        if label == "ENTAILMENT":
            positives[a][b] = None
        elif label == "CONTRADICTION":  # contradiction is symmetric: either sentence negates the other
            negatives[a][b] = None
            negatives[b][a] = None
    triplets, pairs = [], []
    for premise, pos in positives.items():
        neg = list(negatives.get(premise, ()))
        for i, p in enumerate(pos):
            if neg:
                triplets.append((premise, p, neg[i % len(neg)]))
            else:
                pairs.append((premise, p))
    return triplets, pairs


def write_csv(path: Path, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="outputs/sick_nli", help="folder for triplets.csv and pairs.csv")
    ap.add_argument("--data_dir", default=None, help="SentEval data/downstream folder (default: the shared data)")
    args = ap.parse_args(argv)
    root = senteval_root(args.data_dir)
    if root is None:
        print("error: no SentEval data folder: pass --data_dir or set SIMCSE_WEINCE_DATA", file=sys.stderr)
        return 2
    sick = read_sick(Path(root) / "SICK" / "SICK_train.txt")
    triplets, pairs = build_rows(sick)
    out = Path(args.out)
    write_csv(out / "triplets.csv", ("sent0", "sent1", "hard_neg"), triplets)
    write_csv(out / "pairs.csv", ("sent0", "sent1"), pairs)
    counts = {label: sum(1 for *_, j in sick if j == label) for label in (*LABELS, "NEUTRAL")}
    print(
        f"SICK train: {len(sick)} pairs ({counts['ENTAILMENT']} entailment, {counts['CONTRADICTION']} contradiction, "
        f"{counts['NEUTRAL']} neutral, unused); {len(triplets)} triplets -> {out / 'triplets.csv'}, "
        f"{len(pairs)} pairs (premises without a contradiction) -> {out / 'pairs.csv'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
