"""CSV and TSV files with a header row, parsed by Python's ``csv`` module.

Strict ``excel`` / ``excel-tab`` dialects: a field holding the delimiter or a line break is in double quotes,
``""`` inside is a quote, a quote left open is an error; SimCSE's ``nli_for_simcse.csv`` is read as it is. Blank
lines before the header are passed over; a blank line among the rows is skipped and counted. A record with a
field count other than the header's, or one the parser rejects, is a bad row named ``file:line``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import ClassVar

from simcse_weince.core.textfiles import delimiter_hint
from simcse_weince.text.columns import Record, describe_columns
from simcse_weince.text.reading import STRIP
from simcse_weince.text.sources.records import Lines, RecordFile


class CsvFile(RecordFile):
    """A CSV file (``.csv``) with a header row naming the columns."""

    format = "CSV"
    suffixes = (".csv",)
    layout = "a CSV file with a header row"
    dialect: ClassVar[str] = "excel"
    delimiter_name: ClassVar[str] = "comma"
    indices: list[int]  # the read columns' positions in the header (-1: absent)

    def expected(self) -> str:
        cols = describe_columns(self.columns, self.required)
        return (
            f"UTF-8 {self.format} with a header row and {len(self.header)} fields per row, text in {cols} (a field "
            f"with a {self.delimiter_name}, a quote or a line break in double quotes)"
        )

    def start_rows(self) -> None:
        where = f"{self.path}:1"
        with self.path.open("rb") as f:
            lines = Lines(f, self.path, 0, self.stop, 1, False, f"{self.format} with a header row naming the columns")
            reader = csv.reader(lines, self.dialect, strict=True)
            header: list[str] = []
            try:
                while not header:  # blank lines before the header are passed over
                    where = f"{self.path}:{lines.line}"
                    header = next(reader)
            except StopIteration:
                raise ValueError(
                    f"{self.path}: no header and no rows (an empty file); expected {self.format} with a header row "
                    "naming the columns"
                ) from None
            except csv.Error as err:
                raise ValueError(f"{where}: unreadable {self.format} header ({err}); expected a header row") from err
            self.data_start, self.data_line = lines.offset, lines.line
        self.header = [h.strip(STRIP) for h in header]
        hint = delimiter_hint(self.header, self.delimiter_name + "s")
        if hint:  # one column named "sent0;sent1": its rows would be trained on as sentences, fields and all
            raise ValueError(f"{where}: the header {self.header[0]!r} names no columns of {self.format}{hint}")
        self.choose(self.header, f"{where}: the header")
        self.indices = [self.header.index(c) if c in self.header else -1 for c in self.columns]

    def records(self, start: int, stop: int, line: int, skip: bool) -> Iterator[Record]:
        what = self.expected()
        with self.path.open("rb") as f:
            lines = Lines(f, self.path, start, stop, line, skip, what)
            reader = csv.reader(lines, self.dialect, strict=True)
            while True:
                rec = Record(lines.line, lines.offset)
                lines.invalid = None
                where = f"{self.path}:{rec.line}"
                try:
                    fields = next(reader)
                except StopIteration:
                    return
                except csv.Error as err:
                    rec.bad = f"{where}: unreadable {self.format} record ({err}); expected {what}"
                    yield rec
                    continue
                if lines.invalid:
                    rec.bad = lines.invalid
                elif not fields:
                    rec.blank = True
                elif len(fields) != len(self.header):
                    got = f"{len(fields)} field(s) where the header has {len(self.header)}"
                    rec.bad = f"{where}: {got}; expected {what}"
                else:
                    values = [fields[i] if i >= 0 else None for i in self.indices]
                    rec.fill(values, self.columns, where, what, self.required)
                yield rec


class TsvFile(CsvFile):
    """A TSV file (``.tsv``): fields separated by tabs, quoted as in CSV."""

    format = "TSV"
    suffixes = (".tsv",)
    layout = "a TSV file with a header row"
    dialect = "excel-tab"
    delimiter_name = "tab"
