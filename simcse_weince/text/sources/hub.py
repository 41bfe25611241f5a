"""Hub datasets (``datasets.load_dataset``): one text column read as lines, or named text columns read as rows.

E.g. ``princeton-nlp/datasets-for-simcse``: ``wiki1m_for_simcse.txt`` (a ``text`` column of sentences) or
``nli_for_simcse.csv`` (``sent0``, ``sent1``, ``hard_neg``). ``datasets`` parses and caches the files; the rows
meet the same policy as a local file's (:mod:`simcse_weince.text.columns`), bad rows named ``hub:NAME/FILE: row
N`` (from 1). A Hub dataset is not read twice: its rows are checked and counted as each part is read.
"""

from __future__ import annotations

from simcse_weince.text.columns import BadRows, ReadOptions, Record, as_columns, keep_rows
from simcse_weince.text.reading import TextStats, keep_sentences
from simcse_weince.text.sources.base import Part, Source


class HubText(Source):
    """A Hub dataset's ``text`` column, one sentence per row (blank and invisible rows skipped and counted)."""

    format = "Hub text"
    by_column = False
    counts_while_reading = True
    column = "text"

    def __init__(self, name: str, data_file: str | None, options: ReadOptions, dataset=None) -> None:
        self.name, self.data_file, self.options = name, data_file, options
        self.where = f"hub:{name}" + (f"/{data_file}" if data_file else "")
        self.columns, self.absent = [], []
        self.ds = dataset if dataset is not None else load(name, data_file)
        self.header = list(self.ds.column_names)
        self.start()

    def start(self) -> None:
        if self.column not in self.header:
            raise ValueError(f"Hub dataset {self.name} has no column {self.column!r}; columns: {self.header}")

    def identity(self) -> dict:
        fingerprint = self.ds._fingerprint
        return {"hub": self.name, "data_file": self.data_file, "column": self.column, "fingerprint": fingerprint}

    def scan(self, stats: TextStats, part_bytes: int, part_rows: int) -> list[Part]:
        stats.files.append(self.where)  # the rows are counted as the parts are read
        return [Part(s, min(s + part_rows, len(self.ds))) for s in range(0, len(self.ds), part_rows)]

    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        rows = self.ds.select_columns([self.column])[part.start : part.stop][self.column]
        return [list(keep_sentences(rows, counted))]


class HubColumns(HubText):
    """A Hub dataset's named text columns (:func:`~simcse_weince.text.columns.choose_columns`), read as rows."""

    format = "Hub columns"
    by_column = True

    def start(self) -> None:
        self.choose(self.header, self.where)
        missing = [c for c in self.columns[2:] if c not in self.header]
        if missing:  # one source: no row could hold that negative
            raise ValueError(
                f"{self.where}: no hard-negative column {', '.join(map(repr, missing))}; the columns are "
                f"{', '.join(map(repr, self.header))}; expected its name in text_columns, or pairs without "
                "allow_missing_negatives"
            )
        for c in self.columns:
            feature = self.ds.features[c]
            if getattr(feature, "dtype", None) not in ("string", "large_string", "null"):
                raise ValueError(f"{self.where}: the column {c!r} holds {feature}; expected text (strings)")

    def identity(self) -> dict:
        source = {"hub": self.name, "data_file": self.data_file, "columns": self.columns,
                  "skip_bad_rows": self.options.skip_bad_rows, "fingerprint": self.ds._fingerprint}  # fmt: skip
        return source | ({"allow_missing_negatives": True} if self.options.allow_missing_negatives else {})

    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        rows = self.ds.select_columns(self.columns)[part.start : part.stop]
        what = self.expected()

        def records():
            values = zip(*(rows[c] for c in self.columns), strict=True)
            for i, vals in enumerate(values, start=part.start):
                yield Record(i + 1, i).fill(vals, self.columns, f"{self.where}: row {i + 1}", what, self.required)

        bad = BadRows(self.options.skip_bad_rows, counted, log=True)
        return as_columns(keep_rows(records(), bad, counted), self.width)


def load(name: str, data_file: str | None):
    """The ``train`` split of a Hub dataset (or of one of its files; a builder such as ``csv`` reads a local one)."""
    from datasets import load_dataset

    return load_dataset(name, data_files=data_file, split="train") if data_file else load_dataset(name, split="train")
