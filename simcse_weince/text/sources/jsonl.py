"""JSON Lines files (``.jsonl``, ``.ndjson``, and ``.json`` read the same way): one object per line, parsed by
Python's ``json`` module.

With ``text_columns`` unset the columns are chosen from the keys of the first object; a key missing from a
later object is a missing cell of that row. A line that is not JSON, or not an object, is a bad row named
``file:line``; a blank line is skipped and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from simcse_weince.text.columns import VALUE_TYPES, Record, describe_columns
from simcse_weince.text.sources.records import Lines, RecordFile


class JsonLinesFile(RecordFile):
    """A JSON Lines file: one JSON object per line, text in the columns read."""

    format = "JSON Lines"
    suffixes = (".jsonl", ".ndjson")
    layout = "a JSON Lines file, one object per line"

    def expected(self) -> str:
        cols = describe_columns(self.columns, self.required)
        return f"JSON Lines: one JSON object per line (UTF-8) with text (strings) in {cols}"

    def start_rows(self) -> None:
        columns = self.options.text_columns
        if columns:  # a key missing from an object is a missing cell, row by row
            self.columns = list(columns)
            return
        with self.path.open("rb") as f:  # the default columns are the keys of the first object
            for line, _, text in Lines(f, self.path, 0, self.stop, 1, False, "JSON Lines").numbered():
                if not text.strip():
                    continue
                where = f"{self.path}:{line}"
                obj = json_object(text, where)
                if isinstance(obj, str):
                    raise ValueError(f"{obj} (the columns are chosen from the first object; or set text_columns)")
                self.choose(list(obj), f"{where}: the first object")
                self.absent = []  # an object may lack a key that the next one has: a missing cell, row by row
                return
        raise ValueError(f"{self.path}: no rows (an empty or blank file); expected {self.expected()}")

    def records(self, start: int, stop: int, line: int, skip: bool) -> Iterator[Record]:
        what, required = self.expected(), self.columns[: self.required]
        with self.path.open("rb") as f:
            lines = Lines(f, self.path, start, stop, line, skip, what)
            for at, offset, text in lines.numbered():
                rec = Record(at, offset)
                where = f"{self.path}:{at}"
                if lines.invalid:
                    rec.bad, lines.invalid = lines.invalid, None
                elif not text.strip():
                    rec.blank = True
                elif isinstance(obj := json_object(text, where), str):
                    rec.bad = obj
                else:
                    rec.fill([obj.get(c) for c in self.columns], self.columns, where, what, self.required)
                    if rec.bad and any(c not in obj for c in required):
                        missing = ", ".join(repr(c) for c in required if c not in obj)
                        rec.bad = f"{where}: no {missing} in the object; expected {what}"
                yield rec


class JsonFile(JsonLinesFile):
    """A ``.json`` file, read as JSON Lines (SimCSE-style exports write one object per line)."""

    format = "JSON"
    suffixes = (".json",)


def json_object(text: str, where: str) -> dict | str:
    """The object of a JSON line, or the reason it is bad."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        return f"{where}: not valid JSON ({err.msg} at column {err.colno}); expected one JSON object per line"
    if not isinstance(obj, dict):
        kind = VALUE_TYPES.get(type(obj), "null" if obj is None else type(obj).__name__)
        return f"{where}: a JSON {kind}, not an object; expected one JSON object per line (JSON Lines)"
    return obj
