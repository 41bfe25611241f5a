"""The corpus of a text run as prepared for training: its counts, in the stats (``results.json``'s ``text``) and
the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from simcse_weince.text.arguments import DataArguments
from simcse_weince.text.corpus import describe_rows, drop_lone_tail, load_training_rows, log_corpus
from simcse_weince.text.reading import TextStats


@pytest.fixture(scope="module")
def tok(tiny_bert_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


ROWS = (
    "sent0,sent1,hard_neg\n"
    "a cat sits,a kitten sits,a dog runs\n"  # a triplet
    "a car,a vehicle,a car\n"  # the negative is the anchor
    "the sun,a star,A star\n"  # the positive, once lowercased by the uncased tokenizer: the same tokens
    "rain,water,\n"  # a pair (allow_missing_negatives): no negative, nothing repeated
    "snow,ice,fire\n"
)


def test_rows_whose_negative_repeats_the_anchor_or_positive_are_counted(
    tok, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Such a negative is masked as a duplicate, so the row trains as a pair though it holds a triplet."""
    f = tmp_path / "rows.csv"
    f.write_text(ROWS, encoding="utf-8")
    data = DataArguments(
        train_files=[str(f)], allow_missing_negatives=True, max_seq_length=16, data_cache_dir=str(tmp_path / "c")
    )
    stats = TextStats()
    rows = load_training_rows(data, tok, stats)
    assert (stats.rows_by_negatives, stats.repeated_negative_rows) == ([1, 4], 2)
    assert stats.to_dict()["repeated_negative_rows"] == 2  # what results.json records under "text"
    assert describe_rows(stats).endswith("(2 with a hard negative identical to their anchor or positive)")
    with caplog.at_level(logging.INFO, logger="simcse_weince.text.corpus"):
        log_corpus(rows, stats, 16)
    assert "2 row(s) hold a hard negative identical to their anchor or positive" in caplog.text
    cut = drop_lone_tail(rows, stats, batch_size=2, processes=1, gathered=False)  # 5 rows: the last one alone
    assert len(cut) == 4 and stats.repeated_negative_rows == 2
    cut = drop_lone_tail(rows.select(range(3)), stats, batch_size=2, processes=1, gathered=False)
    assert len(cut) == 2 and stats.repeated_negative_rows == 1  # recounted on the rows kept


def test_sentences_and_pairs_repeat_no_negative(tok, tmp_path: Path) -> None:
    f = tmp_path / "pairs.csv"
    f.write_text("sent0,sent1\na car,a car\nrain,water\n", encoding="utf-8")
    stats = TextStats()
    data = DataArguments(train_files=[str(f)], max_seq_length=16, data_cache_dir=str(tmp_path / "c"))
    load_training_rows(data, tok, stats)
    assert stats.repeated_negative_rows == 0 and describe_rows(stats) == "2 pairs (anchor, positive)"
