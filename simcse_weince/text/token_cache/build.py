"""Building a token cache: the parts' text tokenised by a batched ``Dataset.map`` into Arrow files in a temporary
folder, renamed into place when complete."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from simcse_weince.core.digests import folder_digests
from simcse_weince.text.data import tokenize_batch, tokenize_columns
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import Part, Source
from simcse_weince.text.token_cache.rows import count_truncated
from simcse_weince.text.token_cache.store import (
    DIGESTS,
    MAP_BATCH,
    READ_STATS,
    TOKEN_FEATURES,
    WRITER_BATCH,
    is_complete,
    token_features,
)

logger = logging.getLogger(__name__)


def part_text(source: Source, part: Part, read: TextStats) -> datasets.Dataset:
    """One part's cells as an in-memory dataset of text columns, in order (one part: bounded by ``PART_BYTES``).

    ``Dataset.from_dict`` on the part's cells, not ``Dataset.from_generator``: one Python dict per line into an
    Arrow file cost several times as much (bench/scaling.py times the whole build).
    """
    return datasets.Dataset.from_dict({f"text_{j}": col for j, col in enumerate(source.read(part, read))})


def _map_tokenize(batch: dict, tokenizer, max_length: int) -> dict:
    (texts,) = batch.values()  # the one text column
    return tokenize_batch(texts, tokenizer, max_length)


def _map_tokenize_columns(batch: dict, tokenizer, max_length: int) -> dict:
    return tokenize_columns(list(batch.values()), tokenizer, max_length)  # the text columns, in order


@dataclass(frozen=True)
class Tokenising:
    """How a cache's text is tokenised: a fast ``tokenizer``, ``max_length`` ids per sentence at most (``[CLS]`` and
    ``[SEP]`` included), ``columns`` text columns per row, and ``num_proc`` processes of the map (default: this
    one)."""

    tokenizer: Any
    max_length: int
    columns: int = 1
    num_proc: int | None = None


def build_cache(
    folder: Path,
    parts: Sequence[tuple[int, Callable[[], datasets.Dataset]]],
    tokenising: Tokenising,
    read: TextStats,
    key: dict,
) -> None:
    """Tokenise the text of ``parts`` into ``folder``, one Arrow file of tokens per part, in order.

    ``parts`` are ``(source, part)`` pairs, the parts of source 0 first, then those of source 1, ...; each part
    returns a dataset of ``columns`` text columns (one: sentences; more: the cells of pairs or triplets), blank and
    invisible lines and bad rows already skipped and counted in ``read``, by the reading pass or by the part itself;
    the map tokenises it (:func:`token_features`) to ``tokens-<part>.arrow`` and the part's text is released before
    the next one, so a build holds the text of one part at a time. Everything is written to a temporary sibling of
    ``folder`` that is renamed into place when complete; if another builder got there first, its copy is kept and
    this one discarded. ``stats.json`` holds the counts of ``read`` and of the map: the sentences are the rows it
    wrote, the sentences with no known token the rows it dropped, ``rows_by_source`` the rows it wrote of each
    source (the row ranges that batches from one source at a time draw from,
    :mod:`simcse_weince.training.source_batches`).

    Raises:
        ValueError: no sentence is left (every one has no known token); nothing is written.
    """
    tokenizer, columns = tokenising.tokenizer, tokenising.columns
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        source_rows = rows = truncated = 0
        by_source = [0] * (max((s for s, _ in parts), default=-1) + 1)
        for i, (source, part) in enumerate(parts):
            text = part()
            if not len(text):  # a part of blank lines only
                continue
            tokens = text.map(
                _map_tokenize if columns == 1 else _map_tokenize_columns,
                batched=True,
                batch_size=MAP_BATCH,
                writer_batch_size=WRITER_BATCH,
                remove_columns=text.column_names,
                features=TOKEN_FEATURES if columns == 1 else token_features(columns),
                fn_kwargs={"tokenizer": tokenizer, "max_length": tokenising.max_length},
                cache_file_name=str(tmp / f"tokens-{i:05d}.arrow"),
                load_from_cache_file=False,
                keep_in_memory=False,
                new_fingerprint=f"{folder.name}-{i:05d}",
                num_proc=tokenising.num_proc,
                desc=f"tokenising the training text ({i + 1}/{len(parts)})",
            )
            source_rows, rows, truncated = (
                source_rows + len(text),
                rows + len(tokens),
                truncated + count_truncated(tokens),
            )
            by_source[source] += len(tokens)
            del text, tokens  # released: the next part's text replaces this one's
        if not rows and columns > 1:
            raise ValueError(
                f"no usable row in {', '.join(read.files)}: {source_rows} row(s) read, none with a token known to "
                f"the tokenizer {getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__} in every "
                "column (only [UNK], e.g. emoji or a script outside its vocabulary, or nothing once normalised); "
                "expected text in the tokenizer's language"
            )
        if not rows:
            raise ValueError(
                f"no usable sentence in {', '.join(read.files)}: {source_rows} sentence(s) read, none with a token "
                f"known to the tokenizer {getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__} "
                "(only [UNK], e.g. emoji or a script outside its vocabulary, or nothing once normalised); expected "
                "text in the tokenizer's language, one sentence per line"
            )
        unknown = {"sentences": rows, "unknown_sentences_skipped": source_rows - rows, "rows_by_source": by_source}
        stats = {n: getattr(read, n) for n in READ_STATS} | unknown | {"rows": rows, "truncated": truncated}
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
        (tmp / "key.json").write_text(json.dumps(key, indent=1), encoding="utf-8")
        (tmp / DIGESTS).write_text(json.dumps(folder_digests(tmp), indent=1), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp's folder is private; the cache is for every process and user
        try:
            os.rename(tmp, folder)  # atomic: readers see no cache or a complete one
        except OSError:
            if not is_complete(folder):
                raise
            logger.info("another process built %s first; keeping its copy", folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
