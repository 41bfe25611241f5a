"""Training text for unsupervised SimCSE: reading, tokenising and collating sentences.

A local text file has one sentence per line. Blank lines are skipped and counted; a file that is not valid
UTF-8 stops with an error naming the file and line; a file without sentences is an error. A file cut off
mid-line (no final newline, e.g. a byte-range sample) can drop that last line on request. Files are read as
a stream (:func:`iter_sentences`); :func:`tokenize_batch` is the batched tokenisation behind the on-disk
token cache (:mod:`simcse_weince.text.token_cache`), which stores each sentence's duplicate key beside its ids.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from simcse_weince.losses.duplicates import sentence_key
from simcse_weince.textfiles import decode_utf8

logger = logging.getLogger(__name__)
GZIP_MAGIC = b"\x1f\x8b"
LAYOUT = "UTF-8 text, one sentence per line"
CHUNK_BYTES = 1 << 22  # read size of the streaming reader: flat memory whatever the file size


@dataclass
class TextStats:
    """What reading and tokenising the training text did, for the log and the saved run report."""

    files: list[str] = field(default_factory=list)
    sentences: int = 0
    blank_lines_skipped: int = 0
    unterminated_lines_dropped: int = 0
    truncated: int = 0
    tail_sentences_dropped: int = 0  # the last batch would have scored a sentence alone (see single_row_tail)
    cache_dir: str = ""  # the tokenised-text cache the rows come from (see simcse_weince.text.token_cache)
    cache_reused: bool = False  # True: the cache was built earlier and only memory-mapped this time

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_text_file(path: str | Path) -> Path:
    """``path`` as a ``Path`` once it is known to be a plain (not gzip-compressed) file.

    Raises:
        IsADirectoryError: a directory.
        FileNotFoundError: no such file.
        ValueError: gzip-compressed.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"training text file {path} is a directory; expected a text file, one sentence per line"
        )
    if not path.is_file():
        raise FileNotFoundError(f"training text file not found: {path} (expected one sentence per line)")
    with path.open("rb") as f:
        if f.read(2) == GZIP_MAGIC:
            raise ValueError(
                f"{path} is gzip-compressed; decompress it first (gunzip {path}): expected plain UTF-8 text"
            )
    return path


def iter_sentences(
    path: str | Path,
    drop_unterminated_last_line: bool = False,
    stats: TextStats | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[str]:
    """Yield the sentences of a UTF-8 text file, one per line, stripped, blank lines skipped.

    The file is read in chunks of about ``chunk_bytes`` cut after a newline, so memory stays flat in the
    file size; the lines are those of ``str.splitlines`` on the whole decoded file, as before. With
    ``stats`` the blank lines, a dropped last line, the file and its sentences are counted there and the
    dropped line is logged; without it the file is only read.

    Raises:
        FileNotFoundError, IsADirectoryError: see :func:`check_text_file`.
        ValueError: gzip, invalid UTF-8 (names ``file:line`` and the byte) or no sentence in the file (at the
            end of the iteration).
    """
    path = check_text_file(path)
    counted = TextStats()
    yield from _read_lines(path, 0, path.stat().st_size, drop_unterminated_last_line, chunk_bytes, counted, stats)
    if not counted.sentences:
        raise ValueError(f"{path}: no sentences (the file is empty or blank); expected one sentence per line")
    if stats is not None:
        stats.files.append(str(path))
        stats.sentences += counted.sentences
        stats.blank_lines_skipped += counted.blank_lines_skipped
        stats.unterminated_lines_dropped += counted.unterminated_lines_dropped


def iter_range_sentences(
    path: str | Path, start: int, stop: int, drop_unterminated_last_line: bool = False
) -> Iterator[str]:
    """The sentences of bytes ``[start, stop)`` of a file already read by :func:`iter_sentences` (so valid),
    as that would yield them; ``start`` and ``stop`` are line starts from :func:`line_ranges`. Silent: no
    counts, no log, and a range may hold no sentence."""
    yield from _read_lines(Path(path), start, stop, drop_unterminated_last_line, CHUNK_BYTES, TextStats(), None)


def line_ranges(path: str | Path, target_bytes: int) -> list[tuple[int, int]]:
    """``[start, stop)`` byte ranges covering the file, each about ``target_bytes`` long, cut after a newline."""
    size = Path(path).stat().st_size
    cuts = [0]
    with Path(path).open("rb") as f:
        while cuts[-1] + target_bytes < size:
            f.seek(cuts[-1] + target_bytes)
            f.readline()  # to the end of the line the target falls in
            if f.tell() >= size:
                break
            cuts.append(f.tell())
    return list(itertools.pairwise([*cuts, size]))


def _read_lines(
    path: Path, start: int, stop: int, drop_last: bool, chunk_bytes: int, counted: TextStats, log: TextStats | None
) -> Iterator[str]:
    """The stripped non-blank lines of bytes ``[start, stop)``, counted in ``counted``; the dropped last
    line is logged when ``log`` is given. Line numbers in errors count from ``start``."""
    offset, line, rest = start, 1, b""
    with path.open("rb") as f:
        f.seek(start)
        while True:
            block = f.read(min(chunk_bytes, stop - f.tell()))
            buf = rest + block
            cut = len(buf) if not block else buf.rfind(b"\n") + 1  # at the end: whatever is left
            if not block and buf and drop_last:  # an unterminated last line (rest never holds a newline)
                if log is not None:
                    logger.warning(
                        "%s:%d: dropping the unterminated last line (a cut-off file): %r", path, line, buf[:60]
                    )
                counted.unterminated_lines_dropped += 1
                return
            chunk, rest = buf[:cut], buf[cut:]
            for s in decode_utf8(chunk, path, LAYOUT, offset=offset, line=line).splitlines():
                s = s.strip()
                if s:
                    counted.sentences += 1
                    yield s
                else:
                    counted.blank_lines_skipped += 1
            offset, line = offset + len(chunk), line + chunk.count(b"\n")
            if not block:
                return


def read_sentences(
    path: str | Path, drop_unterminated_last_line: bool = False, stats: TextStats | None = None
) -> list[str]:
    """Sentences of a UTF-8 text file, one per line, blank lines skipped (counted in ``stats``).

    Holds every sentence in memory: the training pipeline streams the file instead (:func:`iter_sentences`).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: invalid UTF-8 (names file:line) or no sentence in the file.
    """
    return list(iter_sentences(path, drop_unterminated_last_line, stats if stats is not None else TextStats()))


def check_sentences(path: str | Path, drop_unterminated_last_line: bool, stats: TextStats) -> None:
    """Read the file once without keeping it, for its errors and counts (see :func:`iter_sentences`)."""
    for _ in iter_sentences(path, drop_unterminated_last_line, stats):
        pass


def check_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("a fast (Rust) tokenizer is required; load it with AutoTokenizer(use_fast=True)")


def tokenize_batch(texts: Sequence[str | None], tokenizer, max_length: int) -> dict[str, list]:
    """The training columns of a batch of lines: blank (or missing) ones dropped, the rest stripped.

    Returns ``input_ids`` (ids truncated to ``max_length``), ``sentence_key`` (:func:`sentence_key` of those
    ids, the duplicate key the loss masks with) and ``truncated`` (whether the sentence had more tokens:
    the fast tokenizer keeps the cut-off tokens in each encoding's ``overflowing``). Fewer rows than
    ``texts`` come back when some are blank. The function of the cache's batched ``Dataset.map``.
    """
    kept = [t.strip() for t in texts if t and t.strip()]
    if not kept:
        return {"input_ids": [], "sentence_key": [], "truncated": []}
    enc = tokenizer(  # no masks: padding makes them per batch; building them costs a fifth of the call
        kept,
        truncation=True,
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids = enc["input_ids"]
    return {
        "input_ids": ids,
        "sentence_key": [sentence_key(x) for x in ids],
        "truncated": [bool(e.overflowing) for e in enc.encodings],
    }


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
    """Pads a list of ``{"input_ids": [...]}`` rows dynamically and adds ``sentence_key`` (B,) int64.

    Rows from the token cache carry their ``sentence_key`` (computed once, when the cache was built); for
    rows without one it is computed here from the ids, the same key.
    """

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        ids = [r["input_ids"] for r in rows]
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        keys = [r["sentence_key"] if "sentence_key" in r else sentence_key(r["input_ids"]) for r in rows]
        batch["sentence_key"] = torch.tensor(keys, dtype=torch.int64)
        return dict(batch)
