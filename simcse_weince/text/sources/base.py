"""The one interface of a training-text source, and what every local file shares.

A :class:`Source` is opened once (its columns chosen, its name checked, a header read), then read twice: a
reading pass (:meth:`Source.scan`) finds its errors, counts its rows and cuts it into parts; the token cache
then reads each part again (:meth:`Source.read`) and tokenises it. A source's :meth:`Source.identity` is what
it contributes to the token cache's key. A Hub dataset (:mod:`~simcse_weince.text.sources.hub`) is not read
twice: its rows are checked and counted as each part is read (``counts_while_reading``).
"""

from __future__ import annotations

import stat
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from simcse_weince.core.digests import ALGORITHM, file_digest
from simcse_weince.core.paths import shown_path
from simcse_weince.text.columns import (
    BadRows,
    ReadOptions,
    Record,
    as_columns,
    choose_columns,
    close_count,
    describe_columns,
    keep_rows,
)
from simcse_weince.text.reading import TextStats

GZIP_MAGIC = b"\x1f\x8b"


def text_values(values, where: str, column: str, first: int) -> list:
    """The Python values of a column slice (a pyarrow array) starting at row ``first`` (from 0).

    A string column may hold bytes that are not UTF-8 (pyarrow does not check them when a file is written or
    read); the conversion then fails with Python's bare ``UnicodeDecodeError``, which names neither the file nor
    the row, so the row is found and named here.

    Raises:
        ValueError: ``where: row N: the column 'c' holds bytes that are not UTF-8 (...)``.
    """
    try:
        return values.to_pylist()
    except UnicodeDecodeError as err:
        row = first + next((i for i in range(len(values)) if not _decodes(values[i])), 0)
        raise ValueError(
            f"{where}: row {row + 1}: the column {column!r} holds bytes that are not UTF-8 ({err.reason}); expected "
            "text (strings) in UTF-8: write the file again from its source"
        ) from None


def _decodes(scalar) -> bool:
    try:
        scalar.as_py()
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True)
class Part:
    """One part of a source: bytes (or rows) ``[start, stop)``, and the line ``start`` is on (0: not counted)."""

    start: int
    stop: int
    line: int = 0


class Source(ABC):
    """A source of training rows: its format, the columns read, its identity, its parts, a part's cells."""

    format: ClassVar[str]  # e.g. "CSV"; "text" for lines
    by_column: ClassVar[bool] = True  # False: one sentence per line, no columns
    counts_while_reading: ClassVar[bool] = False  # True: scan() only plans, read() checks and counts

    where: str  # how errors name the source (a path, or hub:NAME/FILE)
    options: ReadOptions
    columns: list[str]  # the columns read, in order ([] for lines)
    absent: list[str]  # hard-negative columns read that the source does not have
    header: list[str]  # the source's own columns, for messages

    @property
    def width(self) -> int:
        """The number of texts per row: 1 for lines."""
        return len(self.columns) or 1

    @property
    def required(self) -> int:
        """How many of the columns read must hold text in every row: all, or the anchor and the positive."""
        return 2 if self.options.allow_missing_negatives else len(self.columns)

    def choose(self, available: Sequence[str], where: str) -> None:
        """Set the columns read among ``available`` (:func:`~simcse_weince.text.columns.choose_columns`)."""
        o = self.options
        self.columns = choose_columns(available, o.text_columns, where, o.allow_missing_negatives)
        self.absent = [c for c in self.columns if c not in available]

    def expected(self) -> str:
        """What a row should be, quoted in errors."""
        return f"text (strings) in {describe_columns(self.columns, self.required)}"

    @abstractmethod
    def identity(self) -> dict:
        """What the source contributes to the token cache's key."""

    @abstractmethod
    def scan(self, stats: TextStats, part_bytes: int, part_rows: int) -> list[Part]:
        """Read the source once without keeping it, for its errors and counts (added to ``stats`` with its
        name), and cut it into parts of about ``part_bytes`` bytes (or ``part_rows`` rows).

        Raises:
            ValueError: a bad row (without ``skip_bad_rows``) or no row, in one line naming where.
        """

    @abstractmethod
    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        """The cells of one part, one list per column: the rows :meth:`scan` counted, read again silently
        (``counted`` is only filled by a source that ``counts_while_reading``)."""


READ_TWICE = (
    "training reads a file more than once (its digest names the token cache, then its rows are read), and a pipe "
    "can be read only once: write it to a file first (e.g. head -400 f.txt > part.txt) and pass that"
)


def special_file(path: Path) -> str:
    """What a path that exists but is neither a file nor a folder is, in words (``a pipe (process substitution,
    <(...), or a FIFO)``, a socket, a device)."""
    mode = path.stat().st_mode
    if stat.S_ISFIFO(mode):
        return "a pipe (process substitution, <(...), or a FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


class FileSource(Source):
    """A local training file: checked to exist, not a folder, not gzip-compressed; identified by its absolute
    path, size and modification time (and whether its unterminated last line is dropped)."""

    suffixes: ClassVar[tuple[str, ...]]  # lower-case file-name suffixes of the format
    layout: ClassVar[str]  # what such a file is, for "expected ..." in errors

    def __init__(self, path: Path, drop_unterminated_last_line: bool, options: ReadOptions) -> None:
        self.path, self.drop = path, drop_unterminated_last_line
        self.where, self.options = str(path), options
        self.columns, self.absent, self.header = [], [], []

    @classmethod
    def open(cls, path: str | Path, drop_unterminated_last_line: bool, options: ReadOptions) -> FileSource:
        """The file, opened: found, a file, not gzip, then its own header or schema read (:meth:`start`).

        Raises:
            FileNotFoundError, IsADirectoryError: no such file, or a folder.
            ValueError: a gzip file, or what :meth:`start` refuses; each names the file and what was expected.
        """
        path = Path(path)
        kind = "training file" if cls.by_column else "training text file"
        if path.is_dir():
            raise IsADirectoryError(f"{kind} {shown_path(path)} is a directory; expected {cls.layout}")
        if path.exists() and not path.is_file():
            raise ValueError(f"{kind} {shown_path(path)} is {special_file(path)}; {READ_TWICE}")
        if not path.is_file():
            raise FileNotFoundError(f"{kind} not found: {shown_path(path)}; expected {cls.layout}")
        with path.open("rb") as f:
            if f.read(2) == GZIP_MAGIC:
                raise ValueError(
                    f"{path} is gzip-compressed; decompress it first (gunzip {path}): expected {cls.layout}"
                )
        source = cls(path, bool(drop_unterminated_last_line), options)
        source.start()
        return source

    def start(self) -> None:
        """Read what opening the file needs (a header, a schema) and choose the columns."""

    def identity(self) -> dict:
        ident = {
            "path": str(self.path.resolve()),
            "size": self.path.stat().st_size,
            ALGORITHM: file_digest(self.path),  # its content: a file edited in place is another cache
            "drop_unterminated_last_line": self.drop,
        }
        if not self.by_column:
            return ident
        ident |= {"format": self.format, "columns": self.columns, "skip_bad_rows": self.options.skip_bad_rows}
        return ident | ({"allow_missing_negatives": True} if self.options.allow_missing_negatives else {})


class TableFile(FileSource):
    """A file of typed columns read by rows (Parquet, Arrow): its schema names the columns, each read column must
    hold text, and parts are row ranges."""

    rows: int = 0  # the number of rows, set by start()

    @abstractmethod
    def batches(self, start: int, stop: int, columns: list[str]) -> Iterator[tuple[int, dict[str, list]]]:
        """``(first_row, {column: values})`` of consecutive batches covering rows ``[start, stop)``, in order
        (a batch may reach outside the range)."""

    def check_schema(self, names: Sequence[str], types: dict) -> None:
        """Choose the columns among the schema's ``names``; each read column's ``types`` entry (a pyarrow type)
        must be text."""
        import pyarrow as pa

        self.header = list(names)
        self.choose(names, f"{self.path}: the schema")
        for c in self.columns:
            if c in self.absent:
                continue
            t = types[c]
            if pa.types.is_dictionary(t):
                t = t.value_type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)
                    or getattr(pa.types, "is_string_view", lambda _: False)(t)):  # fmt: skip
                raise ValueError(f"{self.path}: the column {c!r} holds {types[c]}; expected text (strings)")

    def records(self, start: int, stop: int) -> Iterator[Record]:
        what, read = self.expected(), [c for c in self.columns if c not in self.absent]
        for first, batch in self.batches(start, stop, read):
            n = len(next(iter(batch.values()))) if batch else 0
            lo, hi = max(start - first, 0), min(stop - first, n)
            if lo >= hi:
                continue
            values = [batch[c][lo:hi] if c in read else [None] * (hi - lo) for c in self.columns]
            for i, vals in enumerate(zip(*values, strict=True), start=first + lo):
                yield Record(i + 1, i).fill(vals, self.columns, f"{self.path}: row {i + 1}", what, self.required)

    def scan(self, stats: TextStats, part_bytes: int, part_rows: int) -> list[Part]:
        counted = TextStats()
        for _ in keep_rows(self.records(0, self.rows), BadRows(self.options.skip_bad_rows, counted, True), counted):
            pass
        close_count(str(self.path), counted, self.expected())
        stats.add(counted, str(self.path))
        return [Part(s, min(s + part_rows, self.rows), s + 1) for s in range(0, self.rows, part_rows)]

    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        quiet = TextStats()
        rows = keep_rows(self.records(part.start, part.stop), BadRows(self.options.skip_bad_rows, quiet, False), quiet)
        return as_columns(rows, self.width)
