"""What a token cache is on disk: its key (the sources, the tokenizer, ``max_length``, the format) and the folder
named by the key's hash, its columns and counts, its digests, and reading it back memory-mapped."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import datasets

from simcse_weince.core.digests import damage
from simcse_weince.text.data import check_fast, token_column_names

CACHE_FORMAT = 3  # bump when the columns or their meaning change: old caches are then ignored


# 2: lines split at \n only; invisible-only lines and sentences with no known token (only [UNK]) skipped.
# Multi-column caches (input_ids_1, ...) came without a bump: the one-column rows did not change.
# 3: stats.json counts the rows of each source (rows_by_source), for batches drawn from one source at a time.
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
    "rows_by_source",
)


# Sentences per tokenizer call, and so rows per Arrow record batch written. Large record batches matter to
# every reader: opening an IPC stream reads each batch's header and faults in the pages around it, so small
# batches make every process map much of the file (bench/scaling.py measures it; figures in bench/README.md).
MAP_BATCH = 10_000


WRITER_BATCH = 10_000  # rows per record batch when the map writes row by row


HUB_PART_ROWS = 250_000  # rows of a Hub dataset per part (~ PART_BYTES of Wikipedia lines)


PART_ROWS = HUB_PART_ROWS  # rows of a Parquet file per part


DIGESTS = "digests.json"  # the digest of each file of a cache (simcse_weince.core.digests)


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
