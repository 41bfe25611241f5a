"""Files of one record per line (or per quoted run of lines): what CSV, TSV and JSON Lines share.

A record file is read as decoded lines of a byte range (:class:`Lines`); its parts are byte ranges of about
``part_bytes`` that start at a record, so that each part reads alone. Undecodable bytes name ``file:line`` and
the byte. A file cut off mid-line can drop its unterminated last line (``drop_unterminated_last_line``).
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from simcse_weince.core.textfiles import decode_utf8
from simcse_weince.text.columns import BadRows, Record, as_columns, close_count, keep_rows
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources.base import FileSource, Part

logger = logging.getLogger(__name__)


class Lines:
    """The decoded lines of bytes ``[start, stop)`` of a file (a line ends after ``\\n``), with the position of
    the next one, as the line source of ``csv.reader``. Undecodable bytes raise the error of
    :func:`~simcse_weince.core.textfiles.decode_utf8` (``file:line``, byte), or with ``skip`` are replaced and the
    error kept in :attr:`invalid` for the row to be skipped."""

    def __init__(self, f: BinaryIO, path: Path, start: int, stop: int, line: int, skip: bool, layout: str) -> None:
        self.f, self.path, self.stop, self.skip, self.layout = f, path, stop, skip, layout
        self.offset, self.line = start, line
        self.invalid: str | None = None
        f.seek(start)

    def __iter__(self) -> Lines:
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


class RecordFile(FileSource):
    """A line-based column file: rows from ``data_start`` (after a header) to ``stop`` (the end, or the end of
    the last complete line when its unterminated last line is dropped)."""

    data_start: int = 0  # the byte where the rows start (after the header)
    data_line: int = 1  # ... and its line number
    stop: int = 0  # the byte where reading stops

    def start(self) -> None:
        self.stop = _read_stop(self.path, self.drop)
        self.start_rows()

    @abstractmethod
    def start_rows(self) -> None:
        """Read the header (or first object) and choose the columns."""

    @abstractmethod
    def records(self, start: int, stop: int, line: int, skip: bool) -> Iterator[Record]:
        """The records of bytes ``[start, stop)``, ``start`` on line ``line``."""

    def scan(self, stats: TextStats, part_bytes: int, part_rows: int) -> list[Part]:
        counted, skip = TextStats(), self.options.skip_bad_rows
        parts, part_start, part_line = [], self.data_start, self.data_line

        def cut_at_part_ends() -> Iterator[Record]:
            nonlocal part_start, part_line
            for rec in self.records(self.data_start, self.stop, self.data_line, skip):
                if rec.offset - part_start >= part_bytes:
                    parts.append(Part(part_start, rec.offset, part_line))
                    part_start, part_line = rec.offset, rec.line
                yield rec

        for _ in keep_rows(cut_at_part_ends(), BadRows(skip, counted, log=True), counted):
            pass
        if part_start < self.stop:
            parts.append(Part(part_start, self.stop, part_line))
        if self.stop < self.path.stat().st_size:
            counted.unterminated_lines_dropped += 1
            logger.warning("%s: dropping the unterminated last line (a cut-off file)", self.path)
        close_count(str(self.path), counted, self.expected())
        stats.add(counted, str(self.path))
        return parts

    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        quiet, skip = TextStats(), self.options.skip_bad_rows
        rows = keep_rows(self.records(part.start, part.stop, part.line, skip), BadRows(skip, quiet, False), quiet)
        return as_columns(rows, self.width)


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
