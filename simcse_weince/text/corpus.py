"""The training corpus of a text run: the configured files (or Hub text) tokenised once through the token
cache, described in one log line, and cut so that no batch scores a sentence alone."""

from __future__ import annotations

import logging

import numpy as np
from datasets import Dataset
from transformers import TrainingArguments

from simcse_weince.core.paths import resolve_data_path
from simcse_weince.losses.duplicates import ABSENT_KEY
from simcse_weince.text.arguments import DataArguments
from simcse_weince.text.data import single_row_tail, token_column_names
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import ReadOptions, open_sources
from simcse_weince.text.token_cache import prepare_rows
from simcse_weince.text.token_cache.admin import format_bytes
from simcse_weince.text.token_cache.rows import count_negatives, num_text_columns
from simcse_weince.training.source_batches import SourceOrder, batches_per_source, check_sources, source_ranges

logger = logging.getLogger(__name__)


def load_training_rows(data: DataArguments, tokenizer, stats: TextStats, build: bool = True) -> Dataset:
    """The training rows, tokenised: a memory-mapped ``Dataset`` of ``input_ids`` and ``sentence_key`` (and
    ``input_ids_j``, ``sentence_key_j`` for the positive and hard negatives of rows read by column).

    The sources are chosen and opened once (:func:`~simcse_weince.text.sources.open_sources`: the configured local
    files, else the Hub dataset), then go through the token cache (:mod:`simcse_weince.text.token_cache`):
    tokenised once by the process allowed to ``build``, memory-mapped by the others and by later runs.
    """
    sources = open_sources(
        [resolve_data_path(f) for f in data.train_files or ()],
        ReadOptions.of(data.text_columns, data.skip_bad_rows, data.allow_missing_negatives),
        data.drop_unterminated_last_line,
        data.hub_dataset,
        data.hub_data_file,
    )
    rows = prepare_rows(
        sources,
        tokenizer,
        data.max_seq_length,
        stats,
        cache_root=resolve_data_path(data.data_cache_dir) if data.data_cache_dir else None,
        build=build,
        max_rows=data.max_train_samples,
        num_proc=data.preprocessing_num_workers,
    )
    if data.allow_missing_negatives and stats.rows_by_negatives and not any(stats.rows_by_negatives[1:]):
        raise ValueError(
            f"no row of {', '.join(stats.files)} has a hard negative ({', '.join(stats.text_columns[2:])} empty or "
            "missing in every row); expected some triplets with allow_missing_negatives, or pairs without it"
        )
    stats.repeated_negative_rows = count_repeated_negatives(rows)
    return rows


def count_repeated_negatives(dataset: Dataset) -> int:
    """How many rows hold a hard negative that is their own anchor or positive (the same tokens: the same
    duplicate key, as the loss's duplicate mask sees them). Such a negative is masked out of the row's candidates
    (``mask_duplicates``), so the row trains as a pair. Read in column batches from the memory map; 0 for
    sentences and pairs."""
    keys = [token_column_names(j)[1] for j in range(num_text_columns(dataset))]
    if len(keys) < 3:
        return 0
    count = 0
    for batch in dataset.select_columns(keys).with_format("numpy").iter(batch_size=100_000):
        anchor, positive = np.asarray(batch[keys[0]]), np.asarray(batch[keys[1]])
        repeated = np.zeros(len(anchor), dtype=bool)
        for name in keys[2:]:
            negative = np.asarray(batch[name])
            repeated |= (negative != ABSENT_KEY) & ((negative == anchor) | (negative == positive))
        count += int(np.count_nonzero(repeated))
    return count


def log_corpus(dataset: Dataset, stats: TextStats, max_length: int) -> None:
    """One line on what the corpus is (sentences, skipped lines, truncation, the cache and its size), and a
    warning when sentences were skipped for having no known token."""
    logger.info(
        "training text: %d %s from %s; %d blank lines, %d lines of invisible characters only "
        "(NUL, zero-width) and %d sentences with no known token skipped; %d truncated to %d tokens; "
        "cache %s (%s, %s)",
        len(dataset),
        "rows" if len(stats.text_columns) > 1 else "sentences",
        ", ".join(stats.files),
        stats.blank_lines_skipped,
        stats.invisible_lines_skipped,
        stats.unknown_sentences_skipped,
        stats.truncated,
        max_length,
        stats.cache_dir,
        "reused" if stats.cache_reused else "built",
        format_bytes(stats.cache_bytes),
    )
    if stats.rows_by_negatives:
        logger.info("training rows by hard negatives held: %s", describe_rows(stats))
    if stats.repeated_negative_rows:
        logger.warning(
            "%d row(s) hold a hard negative identical to their anchor or positive: the duplicate mask (mask_duplicates)"
            " takes it out of their candidates, so they train as pairs (without the mask, as a negative equal to the "
            "positive)",
            stats.repeated_negative_rows,
        )
    if stats.unknown_sentences_skipped:
        logger.warning(
            "skipped %d sentence(s) with no token known to the tokenizer (only [UNK], e.g. emoji, or nothing once "
            "normalised): every one would be the same input to the encoder",
            stats.unknown_sentences_skipped,
        )


def describe_rows(stats: TextStats, rows: int | None = None) -> str:
    """The ``rows`` (default: ``stats.sentences``) of the corpus by kind, e.g. ``1,284 rows: 251 triplets (anchor,
    positive, hard negative) and 1,033 pairs (anchor, positive)``; rows of more negative columns by how many
    they hold."""
    rows = stats.sentences if rows is None else rows
    if len(stats.text_columns) < 2:
        return f"{rows:,} sentences"
    if not stats.rows_by_negatives:
        return f"{rows:,} pairs (anchor, positive)"
    total, k = sum(stats.rows_by_negatives), len(stats.rows_by_negatives) - 1
    kinds = []
    for held in range(k, -1, -1):
        n = stats.rows_by_negatives[held]
        if not n:
            continue
        if held == 0:
            kinds.append(f"{n:,} pairs (anchor, positive)")
        elif k == 1:
            kinds.append(f"{n:,} triplets (anchor, positive, hard negative)")
        else:
            kinds.append(f"{n:,} rows with {held} hard negative(s)")
    repeated = stats.repeated_negative_rows
    same = f" ({repeated:,} with a hard negative identical to their anchor or positive)" if repeated else ""
    return f"{total:,} rows: " + " and ".join(kinds) + same


def drop_lone_tail(dataset: Dataset, stats: TextStats, batch_size: int, processes: int, gathered: bool) -> Dataset:
    """``dataset`` without the trailing rows that would leave one sentence alone in the epoch's last batch
    (:func:`~simcse_weince.text.data.single_row_tail`); the count goes into ``stats``."""
    drop = single_row_tail(len(dataset), batch_size, processes, gathered)
    if not drop:
        return dataset
    logger.warning("dropping the last %d sentence(s): the epoch's last batch would score one sentence alone", drop)
    stats.tail_sentences_dropped = drop
    dataset = dataset.select(range(len(dataset) - drop))
    if stats.rows_by_negatives:
        stats.rows_by_negatives = count_negatives(dataset)
    stats.repeated_negative_rows = count_repeated_negatives(dataset)
    return dataset


def prepare_corpus(
    data: DataArguments, tokenizer, args: TrainingArguments, gathered: bool
) -> tuple[Dataset, TextStats, SourceOrder | None]:
    """The run's tokenised corpus, its counts and its order (:func:`source_order`).

    The main process of each machine tokenises the text into the on-disk cache (once: later runs reuse it) while
    the others wait, then every process memory-maps it; the lone-sentence tail is dropped unless the data loader
    drops its last batch anyway, or every batch is a full one of a single source (``source_batches``)."""
    stats = TextStats()
    with args.main_process_first(desc="tokenising the training text"):
        corpus = load_training_rows(data, tokenizer, stats, build=args.local_process_index == 0)
    log_corpus(corpus, stats, data.max_seq_length)
    if not args.dataloader_drop_last and data.source_batches == "mixed":
        corpus = drop_lone_tail(corpus, stats, args.per_device_train_batch_size, args.world_size, gathered)
    return corpus, stats, source_order(data, stats, len(corpus), args)


def source_order(data: DataArguments, stats: TextStats, rows: int, args: TrainingArguments) -> SourceOrder | None:
    """The order of the training rows when each global batch comes from one source (``source_batches``
    proportional or round_robin; :mod:`simcse_weince.training.source_batches`), seeded by ``data_seed`` (else
    ``seed``); ``None`` for ``mixed`` (the Trainer's shuffle). One log line says what an epoch draws.

    Raises:
        ValueError: a source has fewer rows than one global batch.
    """
    if data.source_batches == "mixed":
        return None
    ranges = source_ranges(stats.rows_by_source, rows)
    processes, per_device = args.world_size, args.per_device_train_batch_size
    global_batch = per_device * processes
    check_sources(ranges, stats.files, global_batch, f"{per_device} × {processes} process(es)")
    seed = args.data_seed if args.data_seed is not None else args.seed
    order = SourceOrder(ranges, global_batch, data.source_batches, seed)
    counts = batches_per_source(ranges, global_batch, data.source_batches)
    held = ", ".join(
        f"{name} ({b - a:,} rows): {k}" for name, (a, b), k in zip(stats.files, ranges, counts, strict=True)
    )
    logger.info(
        "batches from one source at a time (%s): global batches of %d rows per epoch from %s; %s rows per epoch "
        "left out (each source's rows short of a full batch%s)",
        data.source_batches, global_batch, held, f"{rows - len(order):,}",
        ", and round_robin's batches beyond the smallest source's" if data.source_batches == "round_robin" else "",
    )  # fmt: skip
    return order
