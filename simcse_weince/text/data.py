"""Training text for unsupervised SimCSE: reading, tokenising and collating sentences.

A local text file has one sentence per line. Blank lines are skipped and counted; a file that is not valid
UTF-8 stops with an error naming the file and line; a file without sentences is an error. A file cut off
mid-line (no final newline, e.g. a byte-range sample) can drop that last line on request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from simcse_weince.losses.duplicates import sentence_key
from simcse_weince.textfiles import decode_utf8

logger = logging.getLogger(__name__)
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class TextStats:
    """What reading and tokenising the training text did, for the log and the saved run report."""

    files: list[str] = field(default_factory=list)
    sentences: int = 0
    blank_lines_skipped: int = 0
    unterminated_lines_dropped: int = 0
    truncated: int = 0
    tail_sentences_dropped: int = 0  # the last batch would have scored a sentence alone (see single_row_tail)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def read_sentences(
    path: str | Path, drop_unterminated_last_line: bool = False, stats: TextStats | None = None
) -> list[str]:
    """Sentences of a UTF-8 text file, one per line, blank lines skipped (counted in ``stats``).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: invalid UTF-8 (names file:line) or no sentence in the file.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"training text file {path} is a directory; expected a text file, one sentence per line"
        )
    if not path.is_file():
        raise FileNotFoundError(f"training text file not found: {path} (expected one sentence per line)")
    raw = path.read_bytes()
    stats = stats if stats is not None else TextStats()
    if raw[:2] == GZIP_MAGIC:
        raise ValueError(f"{path} is gzip-compressed; decompress it first (gunzip {path}): expected plain UTF-8 text")
    if drop_unterminated_last_line and raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        line = raw[:cut].count(b"\n") + 1
        logger.warning("%s:%d: dropping the unterminated last line (a cut-off file): %r", path, line, raw[cut:][:60])
        raw = raw[:cut]
        stats.unterminated_lines_dropped += 1
    text = decode_utf8(raw, path, "UTF-8 text, one sentence per line")
    sentences = []
    for line in text.splitlines():
        s = line.strip()
        if s:
            sentences.append(s)
        else:
            stats.blank_lines_skipped += 1
    if not sentences:
        raise ValueError(f"{path}: no sentences (the file is empty or blank); expected one sentence per line")
    stats.files.append(str(path))
    stats.sentences += len(sentences)
    return sentences


def load_hub_sentences(name: str, data_file: str | None, column: str = "text") -> list[str]:  # pragma: no cover
    """Sentences from a Hub dataset (e.g. ``princeton-nlp/datasets-for-simcse`` / ``wiki1m_for_simcse.txt``)."""
    from datasets import load_dataset

    ds = load_dataset(name, data_files=data_file, split="train") if data_file else load_dataset(name, split="train")
    if column not in ds.column_names:
        raise ValueError(f"Hub dataset {name} has no column {column!r}; columns: {ds.column_names}")
    return [s.strip() for s in ds[column] if s and s.strip()]


def tokenize_sentences(tokenizer, sentences: Sequence[str], max_length: int, stats: TextStats) -> list[list[int]]:
    """Token ids truncated to ``max_length``; the number of truncated sentences goes into ``stats``.

    Uses the fast tokenizer's overflow mapping to count truncation in the same pass.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("a fast (Rust) tokenizer is required; load it with AutoTokenizer(use_fast=True)")
    enc = tokenizer(
        list(sentences), truncation=True, max_length=max_length, return_overflowing_tokens=True, padding=False
    )
    mapping = np.asarray(enc["overflow_to_sample_mapping"])
    first = np.ones(len(mapping), dtype=bool)
    first[1:] = mapping[1:] != mapping[:-1]  # the first chunk of each sentence
    stats.truncated += int(np.unique(mapping[~first]).size)  # sentences with at least one overflow chunk
    ids = enc["input_ids"]
    return [ids[i] for i in np.flatnonzero(first)]


def single_row_tail(num_rows: int, batch_size: int, processes: int, gather_across_devices: bool) -> int:
    """How many trailing rows to drop so that no process scores a 1-row batch at the end of an epoch.

    The last batch of an epoch holds ``r = num_rows mod (batch_size × processes)`` rows, spread over the
    processes (padded to equal sizes, ``ceil(r / processes)`` each). A contrastive batch needs 2 rows; with
    negatives gathered across several processes the global batch counts, otherwise each process's own.
    Returns ``r`` when the tail would leave a lone row, else 0.
    """
    r = num_rows % (batch_size * processes)
    per_process = -(-r // processes)
    scored_together = per_process * processes if gather_across_devices and processes > 1 else per_process
    return r if 0 < r and scored_together < 2 else 0


class SimCSECollator:
    """Pads a list of ``{"input_ids": [...]}`` rows dynamically and adds ``sentence_key`` (B,) int64."""

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        ids = [r["input_ids"] for r in rows]
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        batch["sentence_key"] = torch.tensor([sentence_key(x) for x in ids], dtype=torch.int64)
        return dict(batch)
