"""Training text for unsupervised SimCSE: reading, tokenising and collating sentences.

A local text file has one sentence per line: lines end at ``\n`` (or ``\r\n``) and nowhere else. The
other characters that Python's ``str.splitlines`` breaks at (a carriage return not followed by ``\n``, ``\v``,
``\f``, ``\x1c``-``\x1e``, ``\x85``, U+2028, U+2029) are read as spaces inside the line, with a warning naming
the first one of each file. A line is stripped of whitespace and of NUL / zero-width characters
(:data:`INVISIBLE`) at both ends; blank lines and lines of invisible characters only are skipped and counted
apart. A file that is not valid UTF-8 stops with an error naming the file and line; a file without sentences is
an error; a file named as a column format (``.csv``, ``.tsv``, ``.json``, ``.jsonl``, ``.parquet``, also
compressed) is never read as lines: the column readers (:mod:`simcse_weince.text.columns`) read it, and
:func:`check_line_format` decides which reader a file gets. A file cut off mid-line (no final newline, e.g. a
byte-range sample) can drop that last line on request. Files are read as a stream (:func:`iter_sentences`);
:func:`tokenize_batch` (one column) and :func:`tokenize_columns` (pairs, triplets) are the batched tokenisation
behind the on-disk token cache (:mod:`simcse_weince.text.token_cache`), which stores each sentence's duplicate key
beside its ids and skips the sentences (rows) with no known token (only ``[UNK]``, e.g. emoji for a WordPiece
vocabulary, or nothing at all).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from simcse_weince.losses.duplicates import ABSENT_KEY, sentence_key
from simcse_weince.textfiles import decode_utf8

logger = logging.getLogger(__name__)
GZIP_MAGIC = b"\x1f\x8b"
LAYOUT = "UTF-8 text, one sentence per line"
CHUNK_BYTES = 1 << 22  # read size of the streaming reader: flat memory whatever the file size
# Read as spaces inside a line: the line breaks of str.splitlines other than \n (and a CR not before a \n)
BREAKS_IN_LINE = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
BREAK_IN_LINE = re.compile(f"[{BREAKS_IN_LINE}]")
BREAK_NAMES = {"\r": "carriage return without a line feed", "\v": "vertical tab", "\f": "form feed"}
INVISIBLE = "\x00\u200b\u200c\u200d\u2060\ufeff"  # NUL, zero-width space / non-joiner / joiner, word joiner, BOM
STRIP = "".join(chr(c) for c in range(0x3001) if chr(c).isspace()) + INVISIBLE  # every str.isspace() is <= U+3000
# File names of column formats, not read as plain lines (lower-case suffix -> format), and compression suffixes
COLUMN_FORMATS = {
    ".csv": "CSV",
    ".tsv": "TSV",
    ".json": "JSON",
    ".jsonl": "JSON Lines",
    ".ndjson": "JSON Lines",
    ".parquet": "Parquet",
}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip")


@dataclass
class TextStats:
    """What reading and tokenising the training text did, for the log and the saved run report."""

    files: list[str] = field(default_factory=list)
    text_columns: list[str] = field(default_factory=list)  # the columns read (anchor, positive, negatives); [] = lines
    sentences: int = 0  # rows: sentences of a one-column corpus, pairs or triplets of a multi-column one
    bad_rows_skipped: int = 0  # column files with skip_bad_rows: rows skipped for a bad cell or record
    blank_lines_skipped: int = 0
    invisible_lines_skipped: int = 0  # lines of NUL / zero-width characters only (and whitespace), see INVISIBLE
    unknown_sentences_skipped: int = 0  # no known token: only [UNK] (e.g. emoji) or nothing once tokenised
    unterminated_lines_dropped: int = 0
    truncated: int = 0
    rows_by_negatives: list[int] = field(default_factory=list)  # rows holding 0, 1, ..., k hard negatives (k >= 1)
    tail_sentences_dropped: int = 0  # the last batch would have scored a sentence alone (see single_row_tail)
    cache_dir: str = ""  # the tokenised-text cache the rows come from (see simcse_weince.text.token_cache)
    cache_reused: bool = False  # True: the cache was built earlier and only memory-mapped this time
    cache_bytes: int = 0  # the size of that cache folder on disk

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def column_format(path: str | Path) -> str | None:
    """The column format that a file's name announces (``a.csv``, ``a.JSONL``, ``a.tsv.gz``: see
    :data:`COLUMN_FORMATS`), or None."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return COLUMN_FORMATS.get(suffixes[-1]) if suffixes else None


def is_compressed(path: str | Path) -> bool:
    """Whether the file's name ends with a compression suffix (:data:`COMPRESSION_SUFFIXES`)."""
    suffixes = Path(path).suffixes
    return bool(suffixes) and suffixes[-1].lower() in COMPRESSION_SUFFIXES


def check_line_format(
    path: str | Path, by_column: bool = False, text_columns: Sequence[str] | None = None
) -> str | None:
    """How a training file is read, decided by its name: the one place that decides it.

    Read as lines (``by_column`` False: the line reader), a file named as a column format is refused: read line
    by line, a SimCSE CSV would train on its header and on quoted pairs. Read by column (``by_column``: the
    column readers of :mod:`simcse_weince.text.columns`, and the configuration's early check), a column format
    is accepted unless compressed, and a file read as lines is refused when ``text_columns`` names more than one
    column (it has one sentence per line, no columns).

    Returns:
        The column format (a :data:`COLUMN_FORMATS` value, e.g. ``"CSV"``), or None for a file read as lines.

    Raises:
        ValueError: names the file, the format and what was expected.
    """
    fmt = column_format(path)
    if not by_column:
        if fmt is not None:
            raise ValueError(
                f"{path} is named as {fmt}: column formats (.csv, .tsv, .json, .jsonl, .parquet) are read by "
                "column (text_columns), not as plain lines; expected UTF-8 text, one sentence per line (e.g. a .txt "
                "file)"
            )
        return None
    if fmt is not None and is_compressed(path):
        raise ValueError(
            f"{path} is a compressed {fmt} file: decompress it first; expected an uncompressed .csv, .tsv, .jsonl, "
            ".json or .parquet file"
        )
    if fmt is None and text_columns is not None and len(text_columns) > 1:
        raise ValueError(
            f"{path} is read as lines, one sentence each, without columns, but text_columns names "
            f"{len(text_columns)} ({', '.join(text_columns)}); expected a column file (.csv, .tsv, .jsonl, .json, "
            ".parquet) with those columns"
        )
    return fmt


def check_text_file(path: str | Path) -> Path:
    """``path`` as a ``Path`` once it is known to be a plain (not gzip-compressed) file not named as a column
    format.

    Raises:
        IsADirectoryError: a directory.
        FileNotFoundError: no such file.
        ValueError: gzip-compressed, or named as a column format (:func:`check_line_format`).
    """
    check_line_format(path)
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
    """Yield the sentences of a UTF-8 text file, one per line (see the module's description), stripped; blank
    lines and lines of invisible characters only skipped.

    The file is read in chunks of about ``chunk_bytes`` cut after a newline, so memory stays flat in the
    file size. With ``stats`` the skipped lines, a dropped last line, the file and its sentences are counted
    there and the dropped line and the first line break read as a space are logged; without it the file is
    only read.

    Raises:
        FileNotFoundError, IsADirectoryError: see :func:`check_text_file`.
        ValueError: a column format's name, gzip, invalid UTF-8 (names ``file:line`` and the byte) or no
            sentence in the file (at the end of the iteration).
    """
    path = check_text_file(path)
    counted = TextStats()
    yield from _read_lines(path, 0, path.stat().st_size, drop_unterminated_last_line, chunk_bytes, counted, stats)
    if not counted.sentences:
        raise ValueError(
            f"{path}: no sentences: the file is empty, blank or invisible ({counted.blank_lines_skipped} blank "
            f"lines, {counted.invisible_lines_skipped} of NUL / zero-width characters only); expected UTF-8 text, "
            "one sentence per line"
        )
    if stats is not None:
        stats.files.append(str(path))
        for name in ("sentences", "blank_lines_skipped", "invisible_lines_skipped", "unterminated_lines_dropped"):
            setattr(stats, name, getattr(stats, name) + getattr(counted, name))


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
    """The sentences of bytes ``[start, stop)`` (:func:`keep_sentences` of its lines), counted in ``counted``;
    the dropped last line and the file's first line break read as a space are logged when ``log`` is given.
    Line numbers in errors count from ``start``."""
    offset, line, rest, warned = start, 1, b"", log is None
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
            text = decode_utf8(chunk, path, LAYOUT, offset=offset, line=line)
            if "\r" in text:  # CRLF line ends: the CR goes (a character test is much faster than a regex)
                text = text.replace("\r\n", "\n")
            if any(c in text for c in BREAKS_IN_LINE):  # rare: the chunk is rewritten only then
                if not warned:
                    found = BREAK_IN_LINE.search(text)
                    char = found.group()
                    name = BREAK_NAMES.get(char, f"U+{ord(char):04X}")
                    at = line + text.count("\n", 0, found.start())
                    logger.warning(
                        "%s:%d: a %s is read as a space inside the line (lines end at \\n or \\r\\n only); "
                        "the file may hold more",
                        path,
                        at,
                        name,
                    )
                    warned = True
                text = BREAK_IN_LINE.sub(" ", text)
            lines = text.split("\n")
            if not lines[-1]:  # the empty piece after the chunk's final newline (or an empty chunk)
                lines.pop()
            yield from keep_sentences(lines, counted)
            offset, line = offset + len(chunk), line + chunk.count(b"\n")
            if not block:
                return


def keep_sentences(lines: Iterable[str | None], counted: TextStats) -> Iterator[str]:
    """The sentences among ``lines``, stripped of whitespace and :data:`INVISIBLE` characters at both ends;
    the blank lines (or None) and those of invisible characters only are skipped and counted in ``counted``."""
    for raw in lines:
        s = raw.strip(STRIP) if raw else ""
        if s:
            counted.sentences += 1
            yield s
        elif raw and raw.strip():
            counted.invisible_lines_skipped += 1
        else:
            counted.blank_lines_skipped += 1


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


def encode(texts: list[str], tokenizer, max_length: int) -> tuple[list[list[int]], list, set[int]]:
    """One tokenizer call: ids truncated to ``max_length``, the encodings (their ``overflowing`` says what was
    cut) and the special ids (``[UNK]`` is one: a sequence of special ids only has no known token)."""
    enc = tokenizer(  # no masks: padding makes them per batch; building them costs a fifth of the call
        texts,
        truncation=True,
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    return enc["input_ids"], enc.encodings, set(tokenizer.all_special_ids)


def tokenize_batch(texts: Sequence[str | None], tokenizer, max_length: int) -> dict[str, list]:
    """The training columns of a batch of lines: blank (or missing) ones and those of invisible characters only
    dropped, the rest stripped (as :func:`keep_sentences`), then the sentences with no known token dropped.

    A sentence has no known token when its ids are all special tokens, ``[UNK]`` included (besides ``[CLS]``
    and ``[SEP]``: only ``[UNK]``, as emoji for a WordPiece vocabulary, or nothing left by the tokenizer's
    normalisation, as a control character): such rows would be one and the same sentence to the encoder.

    Returns ``input_ids`` (ids truncated to ``max_length``), ``sentence_key`` (:func:`sentence_key` of those
    ids, the duplicate key the loss masks with) and ``truncated`` (whether the sentence had more tokens:
    the fast tokenizer keeps the cut-off tokens in each encoding's ``overflowing``). Fewer rows than
    ``texts`` come back when some are dropped. The function of the cache's batched ``Dataset.map``.
    """
    kept = [s for t in texts if t and (s := t.strip(STRIP))]
    if not kept:
        return {"input_ids": [], "sentence_key": [], "truncated": []}
    ids, encodings, special = encode(kept, tokenizer, max_length)
    known = [not special.issuperset(x) for x in ids]
    if not all(known):
        ids = [x for x, k in zip(ids, known, strict=True) if k]
        encodings = [e for e, k in zip(encodings, known, strict=True) if k]
    return {
        "input_ids": ids,
        "sentence_key": [sentence_key(x) for x in ids],
        "truncated": [bool(e.overflowing) for e in encodings],
    }


def token_column_names(j: int) -> tuple[str, str, str]:
    """The token cache's columns of text column ``j`` (0: the anchor, 1: the positive, 2...: hard negatives):
    ``input_ids``, ``sentence_key``, ``truncated`` for ``j = 0``, with the suffix ``_j`` after (``input_ids_1``)."""
    suffix = f"_{j}" if j else ""
    return f"input_ids{suffix}", f"sentence_key{suffix}", f"truncated{suffix}"


def tokenize_columns(columns: Sequence[Sequence[str]], tokenizer, max_length: int) -> dict[str, list]:
    """The training columns of a batch of rows of ``len(columns)`` texts each (one sequence per column, cells
    already normalised and non-empty, see :mod:`simcse_weince.text.columns`), tokenised in one call.

    A row is dropped when one of its cells has no known token (as :func:`tokenize_batch` drops a sentence): its
    pair or triplet would not be one. An empty cell, which only a hard-negative column holds and only with
    ``allow_missing_negatives``, is an absent negative: ids ``[]``, key
    :data:`~simcse_weince.losses.duplicates.ABSENT_KEY`, not truncated, and it drops nothing. Returns, per column
    ``j``, the three columns of :func:`token_column_names` (ids truncated to ``max_length``, duplicate key,
    whether the cell was truncated).
    """
    n, rows = len(columns), len(columns[0]) if columns else 0
    names = [token_column_names(j) for j in range(n)]
    if not rows:
        return {name: [] for triple in names for name in triple}
    cells = [cell for col in columns for cell in col]
    ids, encodings, special = encode(cells, tokenizer, max_length)
    absent = [not cell for cell in cells]
    unknown = [special.issuperset(x) and not gone for x, gone in zip(ids, absent, strict=True)]
    kept = [i for i in range(rows) if not any(unknown[j * rows + i] for j in range(n))]
    out: dict[str, list] = {}
    for j, (ids_name, key_name, truncated_name) in enumerate(names):
        at = [j * rows + i for i in kept]
        out[ids_name] = [[] if absent[c] else ids[c] for c in at]
        out[key_name] = [ABSENT_KEY if absent[c] else sentence_key(ids[c]) for c in at]
        out[truncated_name] = [bool(encodings[c].overflowing) and not absent[c] for c in at]
    return out


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
        if "input_ids_1" in rows[0]:
            return self.collate_columns(rows)
        ids = [r["input_ids"] for r in rows]
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        keys = [r["sentence_key"] if "sentence_key" in r else sentence_key(r["input_ids"]) for r in rows]
        batch["sentence_key"] = torch.tensor(keys, dtype=torch.int64)
        return dict(batch)

    def collate_columns(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        """Rows of n texts (anchor, positive, hard negatives: the token cache's ``input_ids``, ``input_ids_1``,
        ...): ``input_ids`` and ``attention_mask`` (B, n, L), all texts padded to one length, and
        ``sentence_key`` (B, n). An absent hard negative (ids ``[]``) is all padding, attention mask 0, with the
        key :data:`~simcse_weince.losses.duplicates.ABSENT_KEY`."""
        n = 1
        while f"input_ids_{n}" in rows[0]:
            n += 1
        names = [token_column_names(j) for j in range(n)]
        ids = [r[ids_name] for r in rows for ids_name, _, _ in names]  # row-major: row r's n texts together
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        b = len(rows)
        out = {k: v.view(b, n, -1) for k, v in batch.items()}
        keys = [
            [
                r[key_name] if key_name in r else sentence_key(r[ids_name]) if r[ids_name] else ABSENT_KEY
                for ids_name, key_name, _ in names
            ]
            for r in rows
        ]
        out["sentence_key"] = torch.tensor(keys, dtype=torch.int64)
        return out
