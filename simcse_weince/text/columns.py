"""Training files read by column: sentences, pairs (anchor, positive) or pairs with hard negatives.

Formats, by the file's name (:func:`~simcse_weince.text.data.check_line_format`): CSV and TSV with a header row
(Python's ``csv`` module, strict ``excel`` / ``excel-tab`` dialects: a field holding the delimiter or a line break
is in double quotes, ``""`` inside is a quote, a quote left open is an error; SimCSE's ``nli_for_simcse.csv`` is
read as it is), JSON Lines
(``.jsonl``, ``.ndjson``, and ``.json`` read the same way: one object per line), Parquet (record batches through
pyarrow) and, in :mod:`simcse_weince.text.token_cache`, Hub datasets with named columns. A text file (``.txt``)
keeps the line reader of :mod:`simcse_weince.text.data`.

The columns read (:func:`choose_columns`): ``text_columns`` when set; else SimCSE's ``sent0``, ``sent1`` (and
``hard_neg``) when the file has them; else a one-column file's only column; else an error listing the file's
columns. One column trains on one sentence per row (the unsupervised rows of a text file); two on (anchor,
positive) pairs; three or more on pairs with hard negatives, one per further column.

Pairs and triplets in one run (``allow_missing_negatives``): a hard-negative column may then be missing from a
file (its rows have no such negative) and its cells may be empty or null; such a cell is read as ``""``, an
absent negative, which the loss leaves out of every anchor's candidates. The anchor and positive stay required,
and with ``text_columns`` unset the columns are SimCSE's three in every file.

Every cell is normalised as a line of a text file (:func:`normalise_cell`). A bad row -- a missing, null,
non-text or empty cell (also one of invisible characters only), a wrong number of fields, a JSON line that is not
an object (or not JSON), undecodable bytes, a CSV record the parser rejects -- stops the reading with one line
naming ``file:line`` (``file: row N`` in a Parquet file, ``hub:NAME/FILE: row N`` in a Hub dataset) and what was
expected; with ``skip_bad_rows`` it is skipped, counted (``TextStats.bad_rows_skipped``) and the first
:data:`LOGGED_BAD_ROWS` of each file are logged with their reason, then the file's total. A blank line of a CSV,
TSV or JSON Lines file is skipped and counted as in a text file (``blank_lines_skipped``). A header without the
named columns, a Parquet column that does not hold text and a file without rows are errors whatever the setting.

Reading is streamed, so memory stays flat in the file's size: CSV, TSV and JSON Lines a line at a time, Parquet a
record batch at a time. :func:`scan` reads a file once for its errors and counts and cuts it into parts (byte
ranges starting at a record, or row ranges); :func:`read_part` reads one part again, silently, for the token
cache.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from simcse_weince.text.data import (
    BREAKS_IN_LINE,
    GZIP_MAGIC,
    STRIP,
    TextStats,
    check_line_format,
    check_sentences,
    iter_range_sentences,
    line_ranges,
)
from simcse_weince.textfiles import decode_utf8

logger = logging.getLogger(__name__)

SIMCSE_COLUMNS = ("sent0", "sent1", "hard_neg")  # supervised SimCSE's nli_for_simcse.csv: anchor, positive, negative
LOGGED_BAD_ROWS = 5  # skipped rows logged with their reason, per file (all are counted)
PARQUET_BATCH = 10_000  # rows per record batch read from a Parquet file
BREAK_IN_CELL = re.compile(f"[\n{BREAKS_IN_LINE}]")
DIALECTS = {"CSV": "excel", "TSV": "excel-tab"}
JSON_FORMATS = ("JSON", "JSON Lines")
JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


def normalise_cell(text: str) -> str:
    """A cell as a line of a text file: line breaks inside (``\\n``, ``\\r`` and the others of
    ``str.splitlines``) read as spaces, whitespace and NUL / zero-width characters stripped at both ends."""
    if any(c in text for c in "\n" + BREAKS_IN_LINE):
        text = BREAK_IN_CELL.sub(" ", text.replace("\r\n", "\n"))  # a CRLF is one break
    return text.strip(STRIP)


def check_text_columns(columns: Sequence[str]) -> list[str]:
    """``text_columns`` as a list once it names at least one column, each once, none blank.

    Raises:
        ValueError: names the setting and what is wrong.
    """
    columns = [columns] if isinstance(columns, str) else list(columns)
    if not columns:
        raise ValueError("text_columns names no column; expected e.g. [sent0, sent1, hard_neg], or leave it unset")
    if not all(isinstance(c, str) and c.strip() for c in columns):
        raise ValueError(f"text_columns: every column name must be a non-empty string; got {columns!r}")
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ValueError(f"text_columns names {', '.join(map(repr, twice))} more than once; got {columns!r}")
    return columns


def choose_columns(
    available: Sequence[str], configured: Sequence[str] | None, where: str, allow_missing_negatives: bool = False
) -> list[str]:
    """The columns to read among ``available`` (a file's header, first JSON object or schema), in order.

    ``configured`` (``text_columns``) when set, each of them present; else :data:`SIMCSE_COLUMNS` when ``sent0``
    and ``sent1`` are present (``hard_neg`` when it is too); else the only column of a one-column file. With
    ``allow_missing_negatives`` the hard-negative columns (the third on) may be missing, and the default is
    all of :data:`SIMCSE_COLUMNS`.

    Raises:
        ValueError: a configured column is missing, a configured column is there twice, or no default applies;
            names ``where`` and lists the columns found.
    """
    found = ", ".join(map(repr, available)) or "none"
    setting = "text_columns"
    if allow_missing_negatives and not configured:
        configured, setting = SIMCSE_COLUMNS, "SimCSE's columns, the default with allow_missing_negatives"
    if configured:
        required = configured[:2] if allow_missing_negatives else configured
        missing = [c for c in required if c not in available]
        if missing:
            hint = ""
            if not allow_missing_negatives and len(configured) > 2 and all(c in available for c in configured[:2]):
                hint = (
                    "; to train the rows of a file without hard negatives as pairs, together with triplets, set "
                    "allow_missing_negatives"
                )
            raise ValueError(
                f"{where}: no column {', '.join(map(repr, missing))} ({setting}); the columns are {found}{hint}"
            )
        twice = [c for c in configured if list(available).count(c) > 1]
        if twice:
            raise ValueError(f"{where}: the column {twice[0]!r} is there twice (the columns are {found})")
        return list(configured)
    if SIMCSE_COLUMNS[0] in available and SIMCSE_COLUMNS[1] in available:
        return [c for c in SIMCSE_COLUMNS if c in available]
    if len(available) == 1:
        return list(available)
    raise ValueError(
        f"{where}: which columns to train on? The columns are {found}, without SimCSE's sent0 and sent1; set "
        "text_columns to the anchor, positive and hard-negative columns, in that order (one column: sentences)"
    )


@dataclass
class ColumnFile:
    """A training file and how it is read (:func:`open_column_file`)."""

    path: Path
    fmt: str | None  # a COLUMN_FORMATS value; None: a text file, one sentence per line
    columns: list[str]  # the columns read, in order ([] for a text file)
    drop_unterminated_last_line: bool = False
    indices: list[int] = field(default_factory=list)  # CSV, TSV: the columns' positions in the header
    header: list[str] = field(default_factory=list)  # CSV, TSV: the header's fields; Parquet: the schema's names
    data_start: int = 0  # CSV, TSV, JSON Lines: the byte where the rows start (after the header)
    data_line: int = 1  # ... and its line number
    stop: int = 0  # CSV, TSV, JSON Lines: the byte where reading stops; Parquet: the number of rows
    allow_missing_negatives: bool = False  # hard negatives may be missing (empty, null, or no such column)
    absent: list[str] = field(default_factory=list)  # hard-negative columns read that the file does not have

    @property
    def width(self) -> int:
        """The number of texts per row: 1 for a text file."""
        return len(self.columns) or 1

    def identity(self, skip_bad_rows: bool) -> dict:
        """What the file contributes to the token cache's key: a text file as for the line reader; a column file
        with its format, the columns read and ``skip_bad_rows``."""
        st = self.path.stat()
        ident = {
            "path": str(self.path.resolve()),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "drop_unterminated_last_line": self.drop_unterminated_last_line,
        }
        if self.fmt is None:
            return ident
        ident |= {"format": self.fmt, "columns": self.columns, "skip_bad_rows": skip_bad_rows}
        return ident | ({"allow_missing_negatives": True} if self.allow_missing_negatives else {})

    @property
    def required(self) -> int:
        """How many of the columns read must hold text in every row: all, or the anchor and the positive."""
        return 2 if self.allow_missing_negatives else len(self.columns)


# ---- opening a file: its format and columns ------------------------------------------------------------------
def open_column_file(
    path: str | Path,
    drop_unterminated_last_line: bool = False,
    columns: Sequence[str] | None = None,
    allow_missing_negatives: bool = False,
) -> ColumnFile:
    """A training file with its format and the columns read (:func:`choose_columns`), from its header (CSV, TSV),
    first object (JSON Lines) or schema (Parquet); a text file has none (``columns`` of more than one refused;
    with ``allow_missing_negatives`` a text file is refused: it has no positives).

    Raises:
        FileNotFoundError, IsADirectoryError: no such file, or a folder.
        ValueError: a compressed or gzip file, an undecodable or missing header, the named columns missing, no
            default choice; each names the file (and line) and what was expected.
    """
    fmt = check_line_format(path, by_column=True, text_columns=columns)
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"training file {path} is a directory; expected a text or column file")
    if not path.is_file():
        raise FileNotFoundError(f"training file not found: {path}")
    with path.open("rb") as f:
        if f.read(2) == GZIP_MAGIC:
            raise ValueError(f"{path} is gzip-compressed; decompress it first (gunzip): expected plain UTF-8 text")
    if fmt is None:
        if allow_missing_negatives:
            raise ValueError(
                f"{path} is read as lines, one sentence each, but allow_missing_negatives trains pairs and triplets; "
                "expected a column file (.csv, .tsv, .jsonl, .json, .parquet) with an anchor and a positive"
            )
        return ColumnFile(path, None, [], drop_unterminated_last_line)
    cf = ColumnFile(path, fmt, [], drop_unterminated_last_line, allow_missing_negatives=allow_missing_negatives)
    if fmt == "Parquet":
        _open_parquet(cf, columns)
        return cf
    cf.stop = _read_stop(path, drop_unterminated_last_line)
    if fmt in DIALECTS:
        _open_csv(cf, columns)
    else:
        _open_jsonl(cf, columns)
    return cf


def _read_stop(path: Path, drop: bool) -> int:
    """The file's size, or with ``drop`` the end of its last complete line when it does not end in a newline."""
    size = path.stat().st_size
    if not drop or not size:
        return size
    with path.open("rb") as f:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            f.seek(start)
            found = f.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def expected(cf: ColumnFile) -> str:
    """What a row of the file should be, quoted in errors."""
    cols = describe_columns(cf.columns, cf.required)
    if cf.fmt in DIALECTS:
        return (
            f"UTF-8 {cf.fmt} with a header row and {len(cf.header)} fields per row, text in {cols} (a field with a "
            f"{'comma' if cf.fmt == 'CSV' else 'tab'}, a quote or a line break in double quotes)"
        )
    if cf.fmt in JSON_FORMATS:
        return f"JSON Lines: one JSON object per line (UTF-8) with text (strings) in {cols}"
    return f"text (strings) in {cols}"


def check_negative_columns(opened: Sequence[ColumnFile]) -> None:
    """With ``allow_missing_negatives``: every hard-negative column is in at least one file (a JSON Lines file
    may hold it in any row), and the files without one are logged.

    Raises:
        ValueError: a hard-negative column in no file (a misspelt name would otherwise train pairs only).
    """
    files = [cf for cf in opened if cf.fmt is not None]
    for c in files[0].columns[2:] if files else []:
        if all(c in cf.absent for cf in files):
            found = "; ".join(f"{cf.path}: {', '.join(map(repr, cf.header or cf.columns))}" for cf in files[:3])
            raise ValueError(
                f"no training file has the hard-negative column {c!r} ({found}); expected its name in "
                "text_columns, or pairs without allow_missing_negatives"
            )
    for cf in files:
        if cf.absent:
            logger.info("%s has no column %s: its rows train without that hard negative", cf.path,
                        ", ".join(map(repr, cf.absent)))  # fmt: skip


def describe_columns(columns: Sequence[str], required: int) -> str:
    """``a, b`` or ``a, b (c may be empty)``: the columns a row must fill, and those it may leave empty."""
    optional = f" ({', '.join(columns[required:])} may be empty)" if len(columns) > required else ""
    return ", ".join(columns[:required]) + optional


def _open_csv(cf: ColumnFile, columns: Sequence[str] | None) -> None:
    where = f"{cf.path}:1"
    with cf.path.open("rb") as f:
        lines = _Lines(f, cf.path, 0, cf.stop, 1, False, f"{cf.fmt} with a header row naming the columns")
        reader = csv.reader(lines, DIALECTS[cf.fmt], strict=True)
        header: list[str] = []
        try:
            while not header:  # blank lines before the header are passed over
                where = f"{cf.path}:{lines.line}"
                header = next(reader)
        except StopIteration:
            raise ValueError(
                f"{cf.path}: no header and no rows (an empty file); expected {cf.fmt} with a header row naming "
                "the columns"
            ) from None
        except csv.Error as err:
            raise ValueError(f"{where}: unreadable {cf.fmt} header ({err}); expected a header row") from err
        cf.data_start, cf.data_line = lines.offset, lines.line
    cf.header = [h.strip(STRIP) for h in header]
    _set_columns(cf, cf.header, columns, f"{where}: the header")
    cf.indices = [cf.header.index(c) if c in cf.header else -1 for c in cf.columns]


def _set_columns(cf: ColumnFile, available: Sequence[str], columns: Sequence[str] | None, where: str) -> None:
    cf.columns = choose_columns(available, columns, where, cf.allow_missing_negatives)
    cf.absent = [c for c in cf.columns if c not in available]


def _open_jsonl(cf: ColumnFile, columns: Sequence[str] | None) -> None:
    if columns:  # a key missing from an object is a missing cell, row by row
        cf.columns = list(columns)
        return
    with cf.path.open("rb") as f:  # the default columns are the keys of the first object
        for line, _, text in _Lines(f, cf.path, 0, cf.stop, 1, False, "JSON Lines").numbered():
            if not text.strip():
                continue
            where = f"{cf.path}:{line}"
            obj = _json_object(text, where)
            if isinstance(obj, str):
                raise ValueError(f"{obj} (the columns are chosen from the first object; or set text_columns)")
            _set_columns(cf, list(obj), None, f"{where}: the first object")
            cf.absent = []  # an object may lack a key that the next one has: a missing cell, row by row
            return
    raise ValueError(f"{cf.path}: no rows (an empty or blank file); expected {expected(cf)}")


def _open_parquet(cf: ColumnFile, columns: Sequence[str] | None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(cf.path)
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{cf.path}: not a readable Parquet file ({err}); expected a Parquet file") from err
    schema = pf.schema_arrow
    cf.header = list(schema.names)
    _set_columns(cf, schema.names, columns, f"{cf.path}: the schema")
    for c in cf.columns:
        if c in cf.absent:
            continue
        t = schema.field(c).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)
                or getattr(pa.types, "is_string_view", lambda _: False)(t)):  # fmt: skip
            raise ValueError(f"{cf.path}: the column {c!r} holds {schema.field(c).type}; expected text (strings)")
    cf.stop = pf.metadata.num_rows


# ---- reading rows --------------------------------------------------------------------------------------------
class _Lines:
    """The decoded lines of bytes ``[start, stop)`` of a file (a line ends after ``\\n``), with the position of
    the next one, as the line source of ``csv.reader``. Undecodable bytes raise the error of
    :func:`~simcse_weince.textfiles.decode_utf8` (``file:line``, byte), or with ``skip`` are replaced and the
    error kept in :attr:`invalid` for the row to be skipped."""

    def __init__(self, f: BinaryIO, path: Path, start: int, stop: int, line: int, skip: bool, layout: str) -> None:
        self.f, self.path, self.stop, self.skip, self.layout = f, path, stop, skip, layout
        self.offset, self.line = start, line
        self.invalid: str | None = None
        f.seek(start)

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self.offset >= self.stop:
            raise StopIteration
        raw = self.f.readline(self.stop - self.offset)
        if not raw:
            raise StopIteration
        offset, line = self.offset, self.line
        self.offset, self.line = offset + len(raw), line + 1
        try:
            return decode_utf8(raw, self.path, self.layout, offset=offset, line=line)
        except ValueError as err:
            if not self.skip:
                raise
            self.invalid = self.invalid or str(err)
            return raw.decode("utf-8", "replace")

    def numbered(self) -> Iterator[tuple[int, int, str]]:
        """``(line, offset, text)`` of each line."""
        while True:
            line, offset = self.line, self.offset
            try:
                text = next(self)
            except StopIteration:
                return
            yield line, offset, text


@dataclass
class _Record:
    """A record read: where it starts, its cells (once checked) or why it is bad; blank: a blank line."""

    line: int  # CSV / JSON Lines: the line it starts on; Parquet: its row number (from 1)
    offset: int  # CSV / JSON Lines: its first byte; Parquet: its row index
    cells: list[str] | None = None
    bad: str | None = None
    blank: bool = False


def _cells(
    values: Sequence[object], columns: Sequence[str], where: str, what: str, required: int | None = None
) -> list[str] | str:
    """The normalised cells of one row's values, or the reason the row is bad (a missing, non-text or empty
    cell: one line naming ``where`` and ``what`` was expected). The cells after the first ``required`` (all by
    default) may be missing, null or empty: they read as ``""``, an absent hard negative."""
    required = len(columns) if required is None else required
    cells = []
    for j, (col, value) in enumerate(zip(columns, values, strict=True)):
        if value is None and j >= required:
            cells.append("")
            continue
        if value is None:
            return f"{where}: no value in {col!r} (missing or null); expected {what}"
        if not isinstance(value, str):
            kind = JSON_TYPES.get(type(value), type(value).__name__)
            return f"{where}: {col!r} holds a {kind}, not text; expected {what}"
        cell = normalise_cell(value)
        if not cell and j < required:
            return f"{where}: {col!r} is empty (blank, or NUL / zero-width characters only); expected {what}"
        cells.append(cell)
    return cells


def _json_object(text: str, where: str) -> dict | str:
    """The object of a JSON line, or the reason it is bad."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        return f"{where}: not valid JSON ({err.msg} at column {err.colno}); expected one JSON object per line"
    if not isinstance(obj, dict):
        kind = JSON_TYPES.get(type(obj), "null" if obj is None else type(obj).__name__)
        return f"{where}: a JSON {kind}, not an object; expected one JSON object per line (JSON Lines)"
    return obj


def _csv_records(cf: ColumnFile, start: int, stop: int, line: int, skip: bool) -> Iterator[_Record]:
    what = expected(cf)
    with cf.path.open("rb") as f:
        lines = _Lines(f, cf.path, start, stop, line, skip, what)
        reader = csv.reader(lines, DIALECTS[cf.fmt], strict=True)
        while True:
            rec = _Record(lines.line, lines.offset)
            lines.invalid = None
            where = f"{cf.path}:{rec.line}"
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                rec.bad = f"{where}: unreadable {cf.fmt} record ({err}); expected {what}"
                yield rec
                continue
            if lines.invalid:
                rec.bad = lines.invalid
            elif not fields:
                rec.blank = True
            elif len(fields) != len(cf.header):
                rec.bad = f"{where}: {len(fields)} field(s) where the header has {len(cf.header)}; expected {what}"
            else:
                got = _cells([fields[i] if i >= 0 else None for i in cf.indices], cf.columns, where, what, cf.required)
                rec.cells, rec.bad = (got, None) if isinstance(got, list) else (None, got)
            yield rec


def _jsonl_records(cf: ColumnFile, start: int, stop: int, line: int, skip: bool) -> Iterator[_Record]:
    what = expected(cf)
    with cf.path.open("rb") as f:
        lines = _Lines(f, cf.path, start, stop, line, skip, what)
        for at, offset, text in lines.numbered():
            rec = _Record(at, offset)
            where = f"{cf.path}:{at}"
            if lines.invalid:
                rec.bad, lines.invalid = lines.invalid, None
            elif not text.strip():
                rec.blank = True
            else:
                obj = _json_object(text, where)
                if isinstance(obj, str):
                    rec.bad = obj
                else:
                    got = _cells([obj.get(c) for c in cf.columns], cf.columns, where, what, cf.required)
                    if isinstance(got, str) and any(c not in obj for c in cf.columns[: cf.required]):
                        missing = ", ".join(repr(c) for c in cf.columns[: cf.required] if c not in obj)
                        got = f"{where}: no {missing} in the object; expected {what}"
                    rec.cells, rec.bad = (got, None) if isinstance(got, list) else (None, got)
            yield rec


def _parquet_records(cf: ColumnFile, start: int, stop: int) -> Iterator[_Record]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(cf.path)
    meta, groups, first, row = pf.metadata, [], 0, None
    for g in range(meta.num_row_groups):  # the row groups that hold rows of [start, stop)
        n = meta.row_group(g).num_rows
        if first < stop and first + n > start:
            groups.append(g)
            row = first if row is None else row
        first += n
    if row is None:
        return
    what = expected(cf)
    read = [c for c in cf.columns if c not in cf.absent]
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups, columns=read):
        lo, hi = max(start - row, 0), min(stop - row, batch.num_rows)
        if lo < hi:
            part = batch.slice(lo, hi - lo)
            values = [part.column(c).to_pylist() if c in read else [None] * (hi - lo) for c in cf.columns]
            for i, vals in enumerate(zip(*values, strict=True), start=row + lo):
                rec = _Record(i + 1, i)
                got = _cells(vals, cf.columns, f"{cf.path}: row {i + 1}", what, cf.required)
                rec.cells, rec.bad = (got, None) if isinstance(got, list) else (None, got)
                yield rec
        row += batch.num_rows
        if row >= stop:
            return


def _records(cf: ColumnFile, start: int, stop: int, line: int, skip: bool) -> Iterator[_Record]:
    if cf.fmt in DIALECTS:
        return _csv_records(cf, start, stop, line, skip)
    if cf.fmt in JSON_FORMATS:
        return _jsonl_records(cf, start, stop, line, skip)
    return _parquet_records(cf, start, stop)


class BadRows:
    """What becomes of a bad row: an error (the reason, one line), or with ``skip`` a count in ``counted`` (the
    first :data:`LOGGED_BAD_ROWS` logged with their reason when ``log``)."""

    def __init__(self, skip: bool, counted: TextStats, log: bool) -> None:
        self.skip, self.counted, self.log = skip, counted, log

    def __call__(self, reason: str) -> None:
        if not self.skip:
            raise ValueError(reason)
        self.counted.bad_rows_skipped += 1
        if self.log and self.counted.bad_rows_skipped <= LOGGED_BAD_ROWS:
            logger.warning("skipping a bad row (skip_bad_rows): %s", reason)


def keep_rows(records: Iterator[_Record], bad: BadRows, counted: TextStats) -> Iterator[list[str]]:
    """The cells of the good records; blank lines counted, bad rows raised or skipped (:class:`BadRows`)."""
    for rec in records:
        if rec.cells is not None:
            counted.sentences += 1
            yield rec.cells
        elif rec.blank:
            counted.blank_lines_skipped += 1
        else:
            bad(rec.bad or f"bad row at {rec.line}")


def scan(
    cf: ColumnFile, skip_bad_rows: bool, stats: TextStats, part_bytes: int, part_rows: int
) -> list[tuple[int, int, int]]:
    """Read the file once without keeping it, for its errors and counts, and cut it into parts.

    The counts (rows kept as ``sentences``, blank lines, bad rows skipped, a dropped unterminated last line) and
    the file are added to ``stats``; skipped rows are logged (:class:`BadRows`) with the file's total.

    Returns:
        ``(start, stop, first_line)`` per part, in order, for :func:`read_part`: byte ranges of about
        ``part_bytes`` starting at a record (text, CSV, TSV, JSON Lines), row ranges of ``part_rows`` (Parquet).

    Raises:
        ValueError: a bad row (without ``skip_bad_rows``), or no row in the file.
    """
    if cf.fmt is None:
        check_sentences(cf.path, cf.drop_unterminated_last_line, stats)
        return [(start, stop, 0) for start, stop in line_ranges(cf.path, part_bytes)]
    counted = TextStats()
    bad = BadRows(skip_bad_rows, counted, log=True)
    if cf.fmt == "Parquet":
        for _ in keep_rows(_parquet_records(cf, 0, cf.stop), bad, counted):
            pass
        parts = [(s, min(s + part_rows, cf.stop), s + 1) for s in range(0, cf.stop, part_rows)]
    else:
        parts, part_start, part_line = [], cf.data_start, cf.data_line
        records = _records(cf, cf.data_start, cf.stop, cf.data_line, skip_bad_rows)

        def cut_at_part_ends() -> Iterator[_Record]:
            nonlocal part_start, part_line
            for rec in records:
                if rec.offset - part_start >= part_bytes:
                    parts.append((part_start, rec.offset, part_line))
                    part_start, part_line = rec.offset, rec.line
                yield rec

        for _ in keep_rows(cut_at_part_ends(), bad, counted):
            pass
        if part_start < cf.stop:
            parts.append((part_start, cf.stop, part_line))
        if cf.stop < cf.path.stat().st_size:
            counted.unterminated_lines_dropped += 1
            logger.warning("%s: dropping the unterminated last line (a cut-off file)", cf.path)
    if counted.bad_rows_skipped:
        logger.warning(
            "%s: %d bad row(s) skipped (skip_bad_rows), the first %d logged above; %d row(s) kept",
            cf.path,
            counted.bad_rows_skipped,
            min(counted.bad_rows_skipped, LOGGED_BAD_ROWS),
            counted.sentences,
        )
    if not counted.sentences:
        raise ValueError(
            f"{cf.path}: no rows: {counted.blank_lines_skipped} blank line(s), {counted.bad_rows_skipped} bad "
            f"row(s) skipped; expected {expected(cf)}"
        )
    stats.files.append(str(cf.path))
    for name in ("sentences", "blank_lines_skipped", "bad_rows_skipped", "unterminated_lines_dropped"):
        setattr(stats, name, getattr(stats, name) + getattr(counted, name))
    return parts


def read_part(cf: ColumnFile, start: int, stop: int, line: int, skip_bad_rows: bool) -> list[list[str]]:
    """The cells of one part from :func:`scan` (a file it found valid), one list per column: the rows
    :func:`scan` counted, read again silently."""
    if cf.fmt is None:
        return [list(iter_range_sentences(cf.path, start, stop, cf.drop_unterminated_last_line))]
    rows = keep_rows(_records(cf, start, stop, line, skip_bad_rows), BadRows(skip_bad_rows, TextStats(), False),
                     TextStats())  # fmt: skip
    columns: list[list[str]] = [[] for _ in cf.columns]
    for cells in rows:
        for col, cell in zip(columns, cells, strict=True):
            col.append(cell)
    return columns


def hub_rows(
    rows: dict[str, list],
    columns: Sequence[str],
    first_row: int,
    where: str,
    skip_bad_rows: bool,
    counted: TextStats,
    required: int | None = None,
) -> list[list[str]]:
    """The cells of rows of a Hub dataset (``{column: values}`` from row ``first_row``, counted from 0), one list
    per column, checked and normalised as a file's, counted in ``counted``; bad rows named ``WHERE: row N``
    (from 1, ``where`` e.g. ``hub:NAME/FILE``). Cells of the columns after the first ``required`` (all by
    default) may be empty or null: absent hard negatives (``""``)."""
    required = len(columns) if required is None else required
    what = f"text (strings) in {describe_columns(columns, required)}"

    def records() -> Iterator[_Record]:
        for i, vals in enumerate(zip(*(rows[c] for c in columns), strict=True), start=first_row):
            rec = _Record(i + 1, i)
            got = _cells(vals, columns, f"{where}: row {i + 1}", what, required)
            rec.cells, rec.bad = (got, None) if isinstance(got, list) else (None, got)
            yield rec

    out: list[list[str]] = [[] for _ in columns]
    for cells in keep_rows(records(), BadRows(skip_bad_rows, counted, log=True), counted):
        for col, cell in zip(out, cells, strict=True):
            col.append(cell)
    return out
