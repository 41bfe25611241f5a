"""Tokenise the training text once into an on-disk Arrow cache and memory-map it afterwards.

The text files are checked and counted in one streaming pass, then read part by part (32 MB of text at a
time, cut after a newline) into a ``datasets.Dataset`` (``Dataset.from_dict``) and tokenised by a batched
``Dataset.map``
(:func:`~simcse_weince.text.data.tokenize_batch`) into a cache folder of Arrow files, one per part, with
three columns: ``input_ids`` (int32 lists), ``sentence_key`` (the duplicate key of the loss) and
``truncated``; plus ``stats.json`` (what reading the text counted) and ``key.json`` (what the cache is for).
Sentences with no known token (only ``[UNK]``) are not stored; they are counted, and a corpus left with no
sentence is an error.

Column files (:func:`prepare_column_files`: CSV, TSV, JSON Lines, Parquet, read by
:mod:`simcse_weince.text.columns`; :func:`prepare_hub_columns` for a Hub dataset's named columns) go through the
same cache. A one-column corpus has the three columns above, the rows a text file of the same sentences gives. A
corpus of ``n`` text columns (anchor, positive, hard negatives) has those three for each column ``j``, suffixed
``_j`` after the first (:func:`~simcse_weince.text.data.token_column_names`): ``input_ids``, ``sentence_key``,
``truncated``, ``input_ids_1``, ``sentence_key_1``, ``truncated_1``, ...; a row with a cell of no known token is not
stored. The key of a column file adds its format, the columns read and ``skip_bad_rows``.

The folder's name is a hash of everything the rows depend on: each file's absolute path, size and
modification time (and whether its unterminated last line is dropped), the tokenizer's vocabulary and
pipeline, ``max_length`` and the cache's format version. Anything else changes the name and a new cache is
built; the old one stays until deleted (:func:`list_caches`, :func:`remove_caches`: the command
``python -m simcse_weince.cli.token_cache [--clear]``). A cache is built in a temporary folder and renamed into
place, so a half-written cache is never read and two builders racing on a shared disk leave one complete copy.

Memory: the build holds one part's text and a batch of tokens at a time, whatever the file's size; the
tokens are written batch by batch and read back memory-mapped. A process that only maps the cache adds the
pages it reads to its RSS, as file-backed pages shared with every other process (the page cache).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from simcse_weince.losses.duplicates import ABSENT_KEY
from simcse_weince.text.columns import (
    ColumnFile,
    check_negative_columns,
    check_text_columns,
    choose_columns,
    hub_rows,
    open_column_file,
    read_part,
    scan,
)
from simcse_weince.text.data import (
    TextStats,
    check_fast,
    check_sentences,
    check_text_file,
    iter_range_sentences,
    keep_sentences,
    line_ranges,
    token_column_names,
    tokenize_batch,
    tokenize_columns,
)

logger = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the columns or their meaning change: old caches are then ignored
# 2: lines split at \n only; invisible-only lines and sentences with no known token (only [UNK]) skipped.
# Multi-column caches (input_ids_1, ...) came without a bump: the one-column rows did not change.
PART_BYTES = 1 << 25  # text tokenised per part (32 MB, ~250k Wikipedia lines): the build's text in memory


def token_features(columns: int = 1) -> datasets.Features:
    """The cache's features for ``columns`` text columns (:func:`~simcse_weince.text.data.token_column_names`)."""
    features = {}
    for j in range(columns):
        ids, key, truncated = token_column_names(j)
        features |= {
            ids: datasets.List(datasets.Value("int32")),
            key: datasets.Value("int64"),
            truncated: datasets.Value("bool"),
        }
    return datasets.Features(features)


TOKEN_FEATURES = token_features(1)
READ_STATS = (
    "files",
    "text_columns",
    "sentences",
    "blank_lines_skipped",
    "invisible_lines_skipped",
    "unknown_sentences_skipped",
    "unterminated_lines_dropped",
    "bad_rows_skipped",
)
# Sentences per tokenizer call, and so rows per Arrow record batch written. Large record batches matter to
# every reader: opening an IPC stream reads each batch's header and faults in the pages around it, so small
# batches make every process map much of the file (bench/scaling.py measures it; figures in bench/README.md).
MAP_BATCH = 10_000
WRITER_BATCH = 10_000  # rows per record batch when the map writes row by row
HUB_PART_ROWS = 250_000  # rows of a Hub dataset per part (~ PART_BYTES of Wikipedia lines)
PART_ROWS = HUB_PART_ROWS  # rows of a Parquet file per part
CACHE_NAME = re.compile(r"[0-9a-f]{24}")  # see cache_folder
BUILD_NAME = re.compile(r"\.([0-9a-f]{24})\..+")  # the temporary folder of a build (build_cache's mkdtemp)


class CacheNotBuiltError(RuntimeError):
    """A process that may not build the cache found none (the main process failed before it wrote one)."""


def default_cache_root() -> Path:
    """``<HF datasets cache>/simcse_weince_tokens`` (``$HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``)."""
    return Path(datasets.config.HF_DATASETS_CACHE) / "simcse_weince_tokens"


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of the fast tokenizer's definition (vocabulary, normaliser, special-token template), without
    the truncation and padding state that a call leaves behind."""
    check_fast(tokenizer)
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    spec["class"] = type(tokenizer).__name__
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def file_identity(path: Path, drop_unterminated_last_line: bool) -> dict:
    """What a file contributes to the cache key: absolute path, size, modification time, the drop flag."""
    st = path.stat()
    return {
        "path": str(path.resolve()),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "drop_unterminated_last_line": drop_unterminated_last_line,
    }


def cache_key(sources: Sequence[dict], tokenizer, max_length: int) -> dict:
    """The description of a cache: its sources, the tokenizer's fingerprint, ``max_length``, the format."""
    return {
        "format": CACHE_FORMAT,
        "sources": list(sources),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "tokenizer_name": getattr(tokenizer, "name_or_path", ""),
        "max_length": max_length,
    }


def cache_folder(root: Path, key: dict) -> Path:
    """``root/<24 hex digits of the key's hash>``; the tokenizer's name is left out (its content counts)."""
    hashed = {k: v for k, v in key.items() if k != "tokenizer_name"}
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:24]
    return root / digest


def is_complete(folder: Path) -> bool:
    return (folder / "stats.json").is_file() and any(folder.glob("tokens*.arrow"))


def load_cache(folder: Path) -> tuple[datasets.Dataset, dict]:
    """The memory-mapped token rows of a cache folder (shards in order) and its ``stats.json``."""
    shards = sorted(folder.glob("tokens*.arrow"))  # tokens-<part>.arrow, or tokens-<part>_<i>_of_<n>.arrow
    parts = [datasets.Dataset.from_file(str(p), in_memory=False) for p in shards]
    ds = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    return ds, json.loads((folder / "stats.json").read_text(encoding="utf-8"))


def _range_text(path: Path, start: int, stop: int, drop: bool) -> datasets.Dataset:
    """One byte range of a checked file as an in-memory ``text`` column (one part: bounded by ``PART_BYTES``).

    ``Dataset.from_dict`` on the part's lines, not ``Dataset.from_generator``: one Python dict per line into an
    Arrow file cost several times as much (bench/scaling.py times the whole build).
    """
    return datasets.Dataset.from_dict({"text": list(iter_range_sentences(path, start, stop, drop))})


def _hub_text(ds: datasets.Dataset, column: str, start: int, stop: int, read: TextStats) -> datasets.Dataset:
    """Rows ``[start, stop)`` of a Hub dataset's text column as a ``text`` column of sentences; the blank and
    invisible rows skipped are counted in ``read``."""
    rows = ds.select_columns([column])[start:stop][column]
    return datasets.Dataset.from_dict({"text": list(keep_sentences(rows, read))})


def _map_tokenize(batch: dict, tokenizer, max_length: int) -> dict:
    (texts,) = batch.values()  # the one text column
    return tokenize_batch(texts, tokenizer, max_length)


def _map_tokenize_columns(batch: dict, tokenizer, max_length: int) -> dict:
    return tokenize_columns(list(batch.values()), tokenizer, max_length)  # the text columns, in order


def _as_text(columns: list[list[str]]) -> datasets.Dataset:
    """One part's cells (one list per column) as an in-memory dataset of text columns, in order."""
    return datasets.Dataset.from_dict({f"text_{j}": col for j, col in enumerate(columns)})


def _column_part(cf: ColumnFile, start: int, stop: int, line: int, skip_bad_rows: bool) -> datasets.Dataset:
    return _as_text(read_part(cf, start, stop, line, skip_bad_rows))


def _hub_columns(
    ds: datasets.Dataset,
    columns: list[str],
    start: int,
    stop: int,
    where: str,
    skip: bool,
    read: TextStats,
    required: int | None = None,
) -> datasets.Dataset:
    """Rows ``[start, stop)`` of a Hub dataset's text columns, checked and counted in ``read`` (cells of the
    columns after ``required`` may be empty or null: absent hard negatives)."""
    return _as_text(hub_rows(ds.select_columns(columns)[start:stop], columns, start, where, skip, read, required))


def build_cache(
    folder: Path,
    parts: Sequence[Callable[[], datasets.Dataset]],
    tokenizer,
    max_length: int,
    read: TextStats,
    key: dict,
    num_proc: int | None = None,
    columns: int = 1,
) -> None:
    """Tokenise the text of ``parts`` into ``folder``, one Arrow file of tokens per part, in order.

    Each part returns a dataset of ``columns`` text columns (one: sentences; more: the cells of pairs or
    triplets), blank and invisible lines and bad rows already skipped and counted in ``read``, by the reading
    pass or by the part itself; the map tokenises it (:func:`token_features`) to
    ``tokens-<part>.arrow`` and the part's text is released before the next one, so a build holds the text of
    one part at a time. Everything is written to a temporary sibling of ``folder`` that is renamed into place
    when complete; if another builder got there first, its copy is kept and this one discarded. ``stats.json``
    holds the counts of ``read`` and of the map: the sentences are the rows it wrote, the sentences with no
    known token the rows it dropped.

    Raises:
        ValueError: no sentence is left (every one has no known token); nothing is written.
    """
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        source_rows = rows = truncated = 0
        for i, part in enumerate(parts):
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
                fn_kwargs={"tokenizer": tokenizer, "max_length": max_length},
                cache_file_name=str(tmp / f"tokens-{i:05d}.arrow"),
                load_from_cache_file=False,
                keep_in_memory=False,
                new_fingerprint=f"{folder.name}-{i:05d}",
                num_proc=num_proc,
                desc=f"tokenising the training text ({i + 1}/{len(parts)})",
            )
            source_rows, rows, truncated = (
                source_rows + len(text),
                rows + len(tokens),
                truncated + count_truncated(tokens),
            )
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
        unknown = {"sentences": rows, "unknown_sentences_skipped": source_rows - rows}
        stats = {n: getattr(read, n) for n in READ_STATS} | unknown | {"rows": rows, "truncated": truncated}
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
        (tmp / "key.json").write_text(json.dumps(key, indent=1), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp's folder is private; the cache is for every process and user
        try:
            os.rename(tmp, folder)  # atomic: readers see no cache or a complete one
        except OSError:
            if not is_complete(folder):
                raise
            logger.info("another process built %s first; keeping its copy", folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


Plan = Callable[[], tuple[TextStats, list[Callable[[], datasets.Dataset]], str | None]]


def open_or_build(
    key: dict,
    plan: Plan,
    tokenizer,
    max_length: int,
    stats: TextStats,
    cache_root: str | Path | None,
    build: bool,
    max_rows: int | None,
    num_proc: int | None,
    columns: int = 1,
) -> datasets.Dataset:
    """The cache of ``key``: memory-mapped when complete, else built first, by the process allowed to ``build``.

    ``plan()`` runs on a miss, in every process before the ``build`` check (so that a bad input gives every
    process the same error), and returns the counts to fill while reading, the parts to tokenise
    (:func:`build_cache`) and what is tokenised, for the log line (``None``: no line).

    Raises:
        CacheNotBuiltError: ``build`` is False and the cache is missing.
    """
    root = Path(cache_root) if cache_root else default_cache_root()
    folder = cache_folder(root, key)
    if is_complete(folder):
        return _open(folder, stats, max_rows, reused=True)
    read, parts, what = plan()
    if not build:
        raise CacheNotBuiltError(f"no tokenised training text in {folder}: the main process did not build it")
    root.mkdir(parents=True, exist_ok=True)
    if what is not None:
        logger.info("tokenising %s (max_length %d) into %s", what, max_length, folder)
    build_cache(folder, parts, tokenizer, max_length, read, key, num_proc, columns=columns)
    log_cache_root(root)
    return _open(folder, stats, max_rows, reused=False)


def prepare_text_files(
    files: Sequence[tuple[str | Path, bool]],
    tokenizer,
    max_length: int,
    stats: TextStats,
    cache_root: str | Path | None = None,
    build: bool = True,
    max_rows: int | None = None,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """The tokenised sentences of local text files, from their cache (built first when missing).

    Args:
        files: ``(path, drop_unterminated_last_line)`` per file, in order.
        tokenizer: a fast tokenizer.
        max_length: ids per sentence at most, ``[CLS]`` and ``[SEP]`` included.
        stats: filled with the counts of reading and tokenising (reloaded from the cache on a hit).
        cache_root: the folder of caches (default :func:`default_cache_root`).
        build: whether this process may build a missing cache (the main process); the others read it.
        max_rows: keep the first ``max_rows`` sentences (all by default).
        num_proc: processes of the tokenising map (default: this one).

    Returns:
        A memory-mapped ``Dataset`` with ``input_ids`` and ``sentence_key``.

    Raises:
        FileNotFoundError, IsADirectoryError, ValueError: as :func:`~simcse_weince.text.data.iter_sentences`.
        CacheNotBuiltError: ``build`` is False and there is no cache after the files were found valid.
    """
    checked = [(check_text_file(p), bool(drop)) for p, drop in files]
    key = cache_key([file_identity(p, drop) for p, drop in checked], tokenizer, max_length)

    def plan():
        read = TextStats()
        for p, drop in checked:
            check_sentences(p, drop, read)
        parts = [
            functools.partial(_range_text, p, start, stop, drop)
            for p, drop in checked
            for start, stop in line_ranges(p, PART_BYTES)
        ]
        return read, parts, f"{read.sentences} sentences"

    return open_or_build(key, plan, tokenizer, max_length, stats, cache_root, build, max_rows, num_proc)


def prepare_hub_text(  # pragma: no cover - needs the Hub
    name: str,
    data_file: str | None,
    tokenizer,
    max_length: int,
    stats: TextStats,
    column: str = "text",
    cache_root: str | Path | None = None,
    build: bool = True,
    max_rows: int | None = None,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """The tokenised sentences of a Hub dataset (e.g. ``princeton-nlp/datasets-for-simcse`` /
    ``wiki1m_for_simcse.txt``) through the same map and cache as local files; blank rows are counted as the
    rows the map dropped."""
    from datasets import load_dataset

    ds = load_dataset(name, data_files=data_file, split="train") if data_file else load_dataset(name, split="train")
    if column not in ds.column_names:
        raise ValueError(f"Hub dataset {name} has no column {column!r}; columns: {ds.column_names}")
    source = {"hub": name, "data_file": data_file, "column": column, "fingerprint": ds._fingerprint}
    key = cache_key([source], tokenizer, max_length)

    def plan():
        read = TextStats(files=[f"hub:{name}/{data_file}"])  # filled by the parts as they are read
        parts = [
            functools.partial(_hub_text, ds, column, start, min(start + HUB_PART_ROWS, len(ds)), read)
            for start in range(0, len(ds), HUB_PART_ROWS)
        ]
        return read, parts, None

    return open_or_build(key, plan, tokenizer, max_length, stats, cache_root, build, max_rows, num_proc)


def prepare_column_files(
    files: Sequence[tuple[str | Path, bool]],
    columns: Sequence[str] | None,
    tokenizer,
    max_length: int,
    stats: TextStats,
    skip_bad_rows: bool = False,
    cache_root: str | Path | None = None,
    build: bool = True,
    max_rows: int | None = None,
    num_proc: int | None = None,
    allow_missing_negatives: bool = False,
) -> tuple[datasets.Dataset, int]:
    """The tokenised rows of local column files (CSV, TSV, JSON Lines, Parquet; text files too when one column
    is read), from their cache (built first when missing). Reading: :mod:`simcse_weince.text.columns`.

    Args:
        files: ``(path, drop_unterminated_last_line)`` per file, in order; the format follows the name
            (:func:`~simcse_weince.text.data.check_line_format`); the flag applies to text, CSV, TSV and JSON Lines.
        columns: ``text_columns``: the columns to read, in order (anchor, positive, hard negatives); None: SimCSE's
            ``sent0``, ``sent1`` (, ``hard_neg``) when present, else a one-column file's only column
            (:func:`~simcse_weince.text.columns.choose_columns`). Every file must give the same number.
        tokenizer: a fast tokenizer.
        max_length: ids per sentence at most, ``[CLS]`` and ``[SEP]`` included.
        stats: filled with the counts of reading and tokenising (reloaded from the cache on a hit); ``sentences``
            counts rows, ``text_columns`` names the columns read, ``bad_rows_skipped`` the rows skipped.
        skip_bad_rows: skip and count bad rows instead of stopping at the first one.
        cache_root, build, max_rows, num_proc: as :func:`prepare_text_files`.
        allow_missing_negatives: pairs and triplets together: a hard-negative column may be missing from a file,
            empty or null in a row (an absent negative: ids ``[]``, key ``ABSENT_KEY``); ``stats.rows_by_negatives``
            counts the rows by how many negatives they hold.

    Returns:
        A memory-mapped ``Dataset`` and its number ``n`` of text columns: ``input_ids`` and ``sentence_key`` (the
        anchor), then ``input_ids_j`` and ``sentence_key_j`` for ``j = 1 .. n - 1`` (the positive, then the hard
        negatives). With ``n = 1`` the rows are those :func:`prepare_text_files` gives for the same sentences,
        and a corpus of text files only is the same cache.

    Raises:
        FileNotFoundError, IsADirectoryError, ValueError: a file missing or unreadable, a bad row (one line naming
            ``file:line``), files giving different numbers of columns, no usable row.
        CacheNotBuiltError: ``build`` is False and there is no cache after the files were found valid.
    """
    if columns is not None:
        columns = check_text_columns(columns)
    opened = [open_column_file(p, bool(drop), columns, allow_missing_negatives) for p, drop in files]
    if not opened:
        raise ValueError("no training file given; expected at least one text or column file")
    if allow_missing_negatives:
        check_negative_columns(opened)
    n = check_same_width(opened)
    key = cache_key([cf.identity(skip_bad_rows) for cf in opened], tokenizer, max_length)

    def plan():
        read = TextStats(text_columns=next((cf.columns for cf in opened if cf.columns), []))
        plans = [(cf, scan(cf, skip_bad_rows, read, PART_BYTES, PART_ROWS)) for cf in opened]
        parts = [
            functools.partial(_range_text, cf.path, start, stop, cf.drop_unterminated_last_line)
            if cf.fmt is None
            else functools.partial(_column_part, cf, start, stop, line, skip_bad_rows)
            for cf, ranges in plans
            for start, stop, line in ranges
        ]
        columns = ", ".join(read.text_columns) or "(lines)"
        return read, parts, f"{read.sentences} rows of {n} text column(s) {columns}"

    common = (cache_root, build, max_rows, num_proc)
    return open_or_build(key, plan, tokenizer, max_length, stats, *common, columns=n), n


def check_same_width(opened: Sequence[ColumnFile]) -> int:
    """The number of text columns every file gives.

    Raises:
        ValueError: two files give different numbers (names both and their columns).
    """
    first = opened[0]
    for cf in opened[1:]:
        if cf.width != first.width:
            raise ValueError(
                f"{first.path} gives {first.width} text column(s) ({', '.join(first.columns) or 'one per line'}), "
                f"{cf.path} {cf.width} ({', '.join(cf.columns) or 'one per line'}); expected the same number in "
                "every training file (set text_columns)"
            )
    return first.width


def prepare_hub_columns(
    name: str,
    data_file: str | None,
    columns: Sequence[str] | None,
    tokenizer,
    max_length: int,
    stats: TextStats,
    skip_bad_rows: bool = False,
    cache_root: str | Path | None = None,
    build: bool = True,
    max_rows: int | None = None,
    num_proc: int | None = None,
    allow_missing_negatives: bool = False,
) -> tuple[datasets.Dataset, int]:
    """The tokenised rows of a Hub dataset's named text columns (e.g. ``princeton-nlp/datasets-for-simcse`` /
    ``nli_for_simcse.csv``: ``sent0``, ``sent1``, ``hard_neg`` by default), through the same cache; the columns,
    cells, bad rows (``hub:NAME/FILE: row N``), ``allow_missing_negatives`` and returned schema as
    :func:`prepare_column_files`."""
    from datasets import load_dataset

    ds = load_dataset(name, data_files=data_file, split="train") if data_file else load_dataset(name, split="train")
    where = f"hub:{name}" + (f"/{data_file}" if data_file else "")
    configured = check_text_columns(columns) if columns is not None else None
    cols = choose_columns(ds.column_names, configured, where, allow_missing_negatives)
    missing = [c for c in cols[2:] if c not in ds.column_names]
    if missing:  # one source: no row could hold that negative
        raise ValueError(
            f"{where}: no hard-negative column {', '.join(map(repr, missing))}; the columns are "
            f"{', '.join(map(repr, ds.column_names))}; expected its name in text_columns, or pairs without "
            "allow_missing_negatives"
        )
    for c in cols:
        feature = ds.features[c]
        if getattr(feature, "dtype", None) not in ("string", "large_string", "null"):
            raise ValueError(f"{where}: the column {c!r} holds {feature}; expected text (strings)")
    source = {"hub": name, "data_file": data_file, "columns": cols, "skip_bad_rows": skip_bad_rows,
              "fingerprint": ds._fingerprint}  # fmt: skip
    if allow_missing_negatives:
        source["allow_missing_negatives"] = True
    required = 2 if allow_missing_negatives else len(cols)
    key = cache_key([source], tokenizer, max_length)

    def plan():
        read = TextStats(files=[where], text_columns=cols)  # filled by the parts as they are read
        parts = [
            functools.partial(
                _hub_columns,
                ds,
                cols,
                start,
                min(start + HUB_PART_ROWS, len(ds)),
                where,
                skip_bad_rows,
                read,
                required,
            )
            for start in range(0, len(ds), HUB_PART_ROWS)
        ]
        return read, parts, None

    common = (cache_root, build, max_rows, num_proc)
    return open_or_build(key, plan, tokenizer, max_length, stats, *common, columns=len(cols)), len(cols)


# ---- what the caches hold on disk, and removing them ---------------------------------------------------------
@dataclass
class CacheInfo:
    """One folder of a cache root: a cache, or the leftover of an interrupted (or running) build."""

    folder: Path
    bytes: int
    complete: bool  # False: a build's temporary folder, or a cache folder without its tokens
    key: dict  # key.json ({} when missing)
    stats: dict  # stats.json ({} when missing)

    @property
    def current(self) -> bool:
        """Whether this version of the package reads it (its format is :data:`CACHE_FORMAT`)."""
        return self.complete and self.key.get("format") == CACHE_FORMAT


def folder_bytes(folder: Path) -> int:
    """The size of the files under ``folder`` (links not followed)."""
    total = 0
    for dirpath, _, names in os.walk(folder):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def format_bytes(n: int) -> str:
    """``n`` bytes in decimal units: ``"512 B"``, ``"1.2 MB"``, ``"3.4 GB"``."""
    if n < 1000:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1000
        if size < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:.1f} TB"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def list_caches(root: str | Path) -> list[CacheInfo]:
    """The caches in ``root`` (and leftovers of builds), oldest first. Only folders named as a cache or as a
    build's temporary folder count: anything else in ``root`` is not listed (nor removed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if not p.is_dir() or p.is_symlink():
            continue
        if CACHE_NAME.fullmatch(p.name):
            found.append(CacheInfo(p, folder_bytes(p), is_complete(p), _read_json(p / "key.json"),
                                   _read_json(p / "stats.json")))  # fmt: skip
        elif BUILD_NAME.fullmatch(p.name):
            found.append(CacheInfo(p, folder_bytes(p), False, {}, {}))
    return sorted(found, key=lambda c: (c.folder.stat().st_mtime, c.folder.name))


def remove_caches(caches: Sequence[CacheInfo]) -> int:
    """Delete the folders of ``caches`` (from :func:`list_caches`); returns the bytes they held. A run that has
    a cache memory-mapped keeps reading it (the files go when it ends); one building a cache now fails."""
    for c in caches:
        shutil.rmtree(c.folder, ignore_errors=True)
    return sum(c.bytes for c in caches)


def log_cache_root(root: Path) -> None:
    """Log how many caches ``root`` holds and their size, and how to list or remove them."""
    caches = list_caches(root)
    logger.info(
        "token caches in %s: %d, %s in all (list them, or remove them with --clear: "
        "python -m simcse_weince.cli.token_cache)",
        root,
        len(caches),
        format_bytes(sum(c.bytes for c in caches)),
    )
