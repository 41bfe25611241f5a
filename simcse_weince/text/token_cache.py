"""Tokenise the training text once into an on-disk Arrow cache and memory-map it afterwards.

One entry point, :func:`prepare_rows`, whatever the sources (:mod:`simcse_weince.text.sources`: text lines, CSV,
TSV, JSON Lines, Parquet, Arrow, Hub datasets). The sources are checked and counted in one streaming pass, then
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
name and a new cache is built; the old one stays until deleted (:func:`list_caches`, :func:`remove_caches`: the command
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

from simcse_weince.core.digests import damage, folder_digests
from simcse_weince.core.file_errors import reading, writing
from simcse_weince.losses.duplicates import ABSENT_KEY
from simcse_weince.text.data import check_fast, token_column_names, tokenize_batch, tokenize_columns
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import Part, Source

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
DIGESTS = "digests.json"  # the digest of each file of a cache (simcse_weince.core.digests)
DAMAGED_CACHE = (
    "remove it (python -m simcse_weince.cli.token_cache --clear) and run again: it is built again from the text"
)
FULL_CACHE_DISK = (
    "nothing of the run was written yet: free some space there, or put the cache on another disk with --data_cache_dir"
)
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


def _part_text(source: Source, part: Part, read: TextStats) -> datasets.Dataset:
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
    if is_complete(folder) and build:
        damaged = cache_damage(folder)
        if damaged:
            logger.warning("the token cache %s is damaged (%s): building it again", folder, "; ".join(damaged))
            shutil.rmtree(folder)
    if is_complete(folder):
        with reading(folder, "the token cache", DAMAGED_CACHE):
            return _open(folder, stats, max_rows, reused=True)
    read, parts, what = plan()
    if not build:
        raise CacheNotBuiltError(f"no tokenised training text in {folder}: the main process did not build it")
    if what is not None:
        logger.info("tokenising %s (max_length %d) into %s", what, max_length, folder)
    with writing(folder, "the token cache", kept=FULL_CACHE_DISK):
        root.mkdir(parents=True, exist_ok=True)
        build_cache(folder, parts, tokenizer, max_length, read, key, num_proc, columns=columns)
    log_cache_root(root)
    return _open(folder, stats, max_rows, reused=False)


def cache_damage(folder: Path) -> list[str]:
    """The files of a cache that differ from its ``digests.json`` (empty when they match, or for a cache built
    before digests)."""
    try:
        expected = json.loads((folder / DIGESTS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return [f"{DIGESTS} is not readable JSON"]
    return damage(folder, expected)


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
            functools.partial(_part_text, s, part, read)
            for s in sources
            for part in s.scan(read, PART_BYTES, PART_ROWS)
        ]
        if any(s.counts_while_reading for s in sources):
            return read, parts, None  # counted as the parts are read
        if not read.text_columns:
            return read, parts, f"{read.sentences} sentences"
        return read, parts, f"{read.sentences} rows of {n} text column(s) {', '.join(read.text_columns)}"

    common = (cache_root, build, max_rows, num_proc)
    return open_or_build(key, plan, tokenizer, max_length, stats, *common, columns=n)


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
