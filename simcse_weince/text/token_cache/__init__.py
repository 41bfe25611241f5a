"""Tokenise the training text once into an on-disk Arrow cache and memory-map it afterwards.

By concern: :mod:`.store` (what a cache is: its key, folder, columns, reading it back), :mod:`.build` (tokenising
the parts into a new cache), :mod:`.rows` (counting a cache's rows, the rows a run trains on), :mod:`.admin`
(listing and removing caches); here, opening a run's cache or building it first.

One entry point, :func:`prepare_rows`, whatever the sources (:mod:`simcse_weince.text.sources`: text lines, the
column files of ``FILE_SOURCES``, Hub datasets). The sources are checked and counted in one streaming pass, then
read part by part (about 32 MB of text, or 250,000 rows, at a time, cut at a record) into a ``datasets.Dataset``
(``Dataset.from_dict``) and tokenised by a batched ``Dataset.map`` into a cache folder of Arrow files, one per
part; plus ``stats.json`` (what reading the text counted) and ``key.json`` (what the cache is for).

A one-column corpus (sentences) has three columns: ``input_ids`` (int32 lists), ``sentence_key`` (the duplicate
key of the loss) and ``truncated`` (:func:`~simcse_weince.text.data.tokenize_batch`); the rows are the same
whether the sentences come from a text file or a column. A corpus of ``n`` text columns (anchor, positive, hard
negatives) has those three for each column ``j``, suffixed ``_j`` after the first
(:func:`~simcse_weince.text.data.token_column_names`): ``input_ids``, ``sentence_key``, ``truncated``,
``input_ids_1``, ...; a row with a cell of no known token is not stored
(:func:`~simcse_weince.text.data.tokenize_columns`). Sentences (rows) with no known token (only ``[UNK]``) are
counted, and a corpus left with none is an error.

The folder's name is a hash of everything the rows depend on: each file's absolute path, size and content
digest (:func:`~simcse_weince.core.digests.file_digest`, streamed; and whether its unterminated last line is dropped;
a column file adds its format, the columns read and ``skip_bad_rows``: each source's ``identity()``), the
tokenizer's vocabulary and pipeline, ``max_length`` and the cache's format version. Anything else changes the
name and a new cache is built; the old one stays until deleted (:mod:`.admin`: the command
``python -m simcse_weince.cli.token_cache [--clear]``). A cache is built in a temporary folder and renamed into
place, so a half-written cache is never read and two builders racing on a shared disk leave one complete copy.
``digests.json`` holds the digest of each of its files: a cache damaged since (a truncated or changed Arrow file)
is found when it is next opened, and built again. A build that cannot write (a full disk, a file-size limit)
ends in one error naming the cache folder (:class:`~simcse_weince.core.file_errors.FileFault`).

Memory: the build holds one part's text and a batch of tokens at a time, whatever the file's size; the
tokens are written batch by batch and read back memory-mapped. A process that only maps the cache adds the
pages it reads to its RSS, as file-backed pages shared with every other process (the page cache).
"""

from __future__ import annotations

import functools
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets

from simcse_weince.core.file_errors import reading, writing
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import Source
from simcse_weince.text.token_cache.admin import folder_bytes, format_bytes, log_cache_root
from simcse_weince.text.token_cache.build import Tokenising, build_cache, part_text
from simcse_weince.text.token_cache.rows import finish
from simcse_weince.text.token_cache.store import (
    PART_BYTES,
    PART_ROWS,
    READ_STATS,
    cache_damage,
    cache_folder,
    cache_key,
    default_cache_root,
    is_complete,
    load_cache,
)

logger = logging.getLogger(__name__)


DAMAGED_CACHE = (
    "remove it (python -m simcse_weince.cli.token_cache --clear) and run again: it is built again from the text"
)


FULL_CACHE_DISK = (
    "nothing of the run was written yet: free some space there, or put the cache on another disk with --data_cache_dir"
)


class CacheNotBuiltError(RuntimeError):
    """A process that may not build the cache found none (the main process failed before it wrote one)."""


def _open(folder: Path, stats: TextStats, max_rows: int | None, reused: bool) -> datasets.Dataset:
    """The cache's rows (see :func:`finish`), with its saved reading counts copied into ``stats``."""
    ds, saved = load_cache(folder)
    for name in READ_STATS:
        setattr(stats, name, saved.get(name, getattr(TextStats(), name)))
    stats.cache_dir, stats.cache_reused, stats.cache_bytes = str(folder), reused, folder_bytes(folder)
    if reused:
        logger.info(
            "reusing the tokenised training text in %s (%d sentences, %s)",
            folder,
            len(ds),
            format_bytes(stats.cache_bytes),
        )
    return finish(ds, stats, max_rows)


Plan = Callable[[], tuple[TextStats, list[tuple[int, Callable[[], datasets.Dataset]]], str | None]]


@dataclass(frozen=True)
class CacheUse:
    """Where the caches live (``root``) and what this process does with one: ``build`` it when missing (the main
    process; the others read it), and keep its first ``max_rows`` rows (all by default)."""

    root: Path
    build: bool = True
    max_rows: int | None = None


def open_or_build(key: dict, plan: Plan, tokenising: Tokenising, stats: TextStats, use: CacheUse) -> datasets.Dataset:
    """The cache of ``key``: memory-mapped when complete, else built first, by the process allowed to build it.

    ``plan()`` runs on a miss, in every process before the ``build`` check (so that a bad input gives every
    process the same error), and returns the counts to fill while reading, the parts to tokenise
    (:func:`build_cache`: ``(source, part)`` pairs) and what is tokenised, for the log line (``None``: no line).

    Raises:
        CacheNotBuiltError: ``build`` is False and the cache is missing.
    """
    folder = cache_folder(use.root, key)
    if is_complete(folder) and use.build:
        damaged = cache_damage(folder)
        if damaged:
            logger.warning("the token cache %s is damaged (%s): building it again", folder, "; ".join(damaged))
            shutil.rmtree(folder)
    if is_complete(folder):
        with reading(folder, "the token cache", DAMAGED_CACHE):
            return _open(folder, stats, use.max_rows, reused=True)
    read, parts, what = plan()
    if not use.build:
        raise CacheNotBuiltError(f"no tokenised training text in {folder}: the main process did not build it")
    if what is not None:
        logger.info("tokenising %s (max_length %d) into %s", what, tokenising.max_length, folder)
    with writing(folder, "the token cache", kept=FULL_CACHE_DISK):
        use.root.mkdir(parents=True, exist_ok=True)
        build_cache(folder, parts, tokenising, read, key)
    log_cache_root(use.root)
    return _open(folder, stats, use.max_rows, reused=False)


def prepare_rows(
    sources: Sequence[Source],
    tokenizer,
    max_length: int,
    stats: TextStats,
    cache_root: str | Path | None = None,
    build: bool = True,
    max_rows: int | None = None,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """The tokenised rows of a run's sources (:func:`~simcse_weince.text.sources.open_sources`), from their
    cache (built first when missing).

    Args:
        sources: the opened sources, in order, each giving the same number ``n`` of text columns.
        tokenizer: a fast tokenizer.
        max_length: ids per sentence at most, ``[CLS]`` and ``[SEP]`` included.
        stats: filled with the counts of reading and tokenising (reloaded from the cache on a hit); ``sentences``
            counts rows, ``text_columns`` names the columns read, ``bad_rows_skipped`` the rows skipped, and
            ``rows_by_negatives`` the rows by how many hard negatives they hold (``allow_missing_negatives``).
        cache_root: the folder of caches (default :func:`default_cache_root`).
        build: whether this process may build a missing cache (the main process); the others read it.
        max_rows: keep the first ``max_rows`` rows (all by default).
        num_proc: processes of the tokenising map (default: this one).

    Returns:
        A memory-mapped ``Dataset``: ``input_ids`` and ``sentence_key`` (the anchor, or the sentence), then
        ``input_ids_j`` and ``sentence_key_j`` for ``j = 1 .. n - 1`` (the positive, then the hard negatives; an
        absent one has ids ``[]`` and key ``ABSENT_KEY``). One column gives the same rows whatever the source.

    Raises:
        ValueError: a bad row (one line naming where), no usable row.
        CacheNotBuiltError: ``build`` is False and there is no cache after the sources were found valid.
    """
    if not sources:
        raise ValueError("no training file given; expected at least one text or column file")
    n = sources[0].width
    key = cache_key([s.identity() for s in sources], tokenizer, max_length)

    def plan():
        read = TextStats(text_columns=next((s.columns for s in sources if s.columns), []))
        parts = [
            (i, functools.partial(part_text, s, part, read))
            for i, s in enumerate(sources)
            for part in s.scan(read, PART_BYTES, PART_ROWS)
        ]
        if any(s.counts_while_reading for s in sources):
            return read, parts, None  # counted as the parts are read
        if not read.text_columns:
            return read, parts, f"{read.sentences} sentences"
        return read, parts, f"{read.sentences} rows of {n} text column(s) {', '.join(read.text_columns)}"

    use = CacheUse(Path(cache_root) if cache_root else default_cache_root(), build, max_rows)
    return open_or_build(key, plan, Tokenising(tokenizer, max_length, n, num_proc), stats, use)
