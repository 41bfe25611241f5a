"""Counting a cache's rows, read in column batches from the memory map: truncated sentences, hard negatives per
row; and the rows a run trains on."""

from __future__ import annotations

import datasets
import numpy as np

from simcse_weince.losses.duplicates import ABSENT_KEY
from simcse_weince.text.data import token_column_names
from simcse_weince.text.reading import TextStats
from simcse_weince.text.token_cache.store import WRITER_BATCH


def truncated_columns(ds: datasets.Dataset) -> list[str]:
    """The ``truncated`` flags of a cache's rows, one per text column."""
    return [token_column_names(j)[2] for j in range(num_text_columns(ds))]


def num_text_columns(ds: datasets.Dataset) -> int:
    """How many text columns the token rows hold: 1 (sentences), 2 (pairs), 3 or more (hard negatives)."""
    return sum(token_column_names(j)[0] in ds.column_names for j in range(len(ds.column_names)))


def count_truncated(ds: datasets.Dataset) -> int:
    """How many sentences (cells) have ``truncated`` set, read in column batches from the memory map."""
    total, names = 0, truncated_columns(ds)
    for batch in ds.select_columns(names).with_format("numpy").iter(batch_size=WRITER_BATCH * 10):
        total += sum(int(np.count_nonzero(batch[n])) for n in names)
    return total


def finish(ds: datasets.Dataset, stats: TextStats, max_rows: int | None) -> datasets.Dataset:
    """The first ``max_rows`` rows (all by default) as training rows: ``input_ids`` and ``sentence_key`` (and
    ``input_ids_j``, ``sentence_key_j`` for the further text columns).

    ``stats.truncated`` counts the truncated sentences (cells) among the rows kept.
    """
    if max_rows is not None and max_rows < len(ds):
        ds = ds.select(range(max_rows))  # a contiguous slice of the memory map: nothing is copied
    stats.truncated = count_truncated(ds)
    stats.rows_by_negatives = count_negatives(ds)
    return ds.remove_columns(truncated_columns(ds))


def count_negatives(ds: datasets.Dataset) -> list[int]:
    """How many rows hold 0, 1, ..., k hard negatives (not :data:`ABSENT_KEY`), for rows of k ≥ 1 negative
    columns; ``[]`` for sentences and pairs. Read in column batches from the memory map."""
    names = [token_column_names(j)[1] for j in range(2, num_text_columns(ds))]
    if not names:
        return []
    counts = np.zeros(len(names) + 1, dtype=np.int64)
    for batch in ds.select_columns(names).with_format("numpy").iter(batch_size=WRITER_BATCH * 10):
        present = sum((np.asarray(batch[n]) != ABSENT_KEY).astype(np.int64) for n in names)
        counts += np.bincount(present, minlength=len(names) + 1)
    return counts.tolist()
