"""The row policy of training text read by column: which columns, what a good row is, what becomes of a bad one.

Whatever parses a source (:mod:`simcse_weince.text.sources`), its rows meet the same rules here.

The columns read (:func:`choose_columns`): ``text_columns`` when set; else SimCSE's ``sent0``, ``sent1`` (and
``hard_neg``) when the source has them; else a one-column source's only column; else an error listing its
columns. One column trains on one sentence per row (the unsupervised rows of a text file); two on (anchor,
positive) pairs; three or more on pairs with hard negatives, one per further column.

Pairs and triplets in one run (``allow_missing_negatives``): a hard-negative column may then be missing from a
source (its rows have no such negative) and its cells may be empty or null; such a cell is read as ``""``, an
absent negative, which the loss leaves out of every anchor's candidates. The anchor and positive stay required,
and with ``text_columns`` unset the columns are SimCSE's three in every source.

Every cell is normalised as a line of a text file (:func:`~simcse_weince.text.reading.normalise_cell`). A bad
row -- a missing, null, non-text or empty cell (also one of invisible characters only), or whatever the parser
rejects -- stops the reading with one line naming where it is (``file:line``, ``file: row N``,
``hub:NAME/FILE: row N``) and what was expected; with ``skip_bad_rows`` it is skipped, counted
(``TextStats.bad_rows_skipped``) and the first :data:`LOGGED_BAD_ROWS` of each source are logged with their
reason, then the source's total (:func:`close_count`). A source without rows is an error whatever the setting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from simcse_weince.text.reading import TextStats, normalise_cell

logger = logging.getLogger(__name__)

SIMCSE_COLUMNS = ("sent0", "sent1", "hard_neg")  # supervised SimCSE's nli_for_simcse.csv: anchor, positive, negative
LOGGED_BAD_ROWS = 5  # skipped rows logged with their reason, per source (all are counted)
VALUE_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


@dataclass(frozen=True)
class ReadOptions:
    """How rows are read, whatever the source: the columns (``text_columns``; None: the default choice), whether
    bad rows are skipped, and whether hard negatives may be missing."""

    text_columns: tuple[str, ...] | None = None
    skip_bad_rows: bool = False
    allow_missing_negatives: bool = False

    @classmethod
    def of(
        cls, text_columns: Sequence[str] | None, skip_bad_rows: bool = False, allow_missing_negatives: bool = False
    ) -> ReadOptions:
        columns = tuple(check_text_columns(text_columns)) if text_columns is not None else None
        return cls(columns, bool(skip_bad_rows), bool(allow_missing_negatives))

    @property
    def by_column(self) -> bool:
        """Whether the options alone ask for rows by column (columns named, or pairs and triplets)."""
        return self.text_columns is not None or self.allow_missing_negatives


def check_text_columns(columns: Sequence[str] | str) -> list[str]:
    """``text_columns`` as a list once it names at least one column, each once, none blank.

    A name holding commas is the comma-joined list (``--text_columns sent0,sent1`` or ``text_columns:
    sent0,sent1`` is ``[sent0, sent1]``, each name stripped of surrounding spaces), as a user writes a list on one
    line; a column whose own name holds a comma cannot be named.

    Raises:
        ValueError: names the setting and what is wrong.
    """
    given = [columns] if isinstance(columns, str) else list(columns)
    columns = [name for c in given for name in _split_names(c)]
    if not columns:
        raise ValueError("text_columns names no column; expected e.g. [sent0, sent1, hard_neg], or leave it unset")
    if not all(isinstance(c, str) and c.strip() for c in columns):
        raise ValueError(
            f"text_columns: every column name must be a non-empty string; got {given!r}; expected names such as "
            "sent0,sent1,hard_neg"
        )
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ValueError(f"text_columns names {', '.join(map(repr, twice))} more than once; got {columns!r}")
    return columns


def _split_names(name: object) -> list:
    """A comma-joined name as its names (stripped); anything else as itself (checked by the caller)."""
    return [part.strip() for part in name.split(",")] if isinstance(name, str) and "," in name else [name]


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


def describe_columns(columns: Sequence[str], required: int) -> str:
    """``a, b`` or ``a, b (c may be empty)``: the columns a row must fill, and those it may leave empty."""
    optional = f" ({', '.join(columns[required:])} may be empty)" if len(columns) > required else ""
    return ", ".join(columns[:required]) + optional


@dataclass
class Record:
    """A record read: where it starts, its cells (once checked) or why it is bad; blank: a blank line."""

    line: int  # a line-based file: the line it starts on; a table: its row number (from 1)
    offset: int  # a line-based file: its first byte; a table: its row index
    cells: list[str] | None = None
    bad: str | None = None
    blank: bool = False

    def fill(self, values: Sequence[object], columns: Sequence[str], where: str, what: str, required: int) -> Record:
        """The record of one row's values: its normalised cells, or the reason it is bad (a missing, non-text or
        empty cell: one line naming ``where`` and ``what`` was expected). The cells after the first ``required``
        may be missing, null or empty: they read as ``""``, an absent hard negative."""
        cells = []
        for j, (col, value) in enumerate(zip(columns, values, strict=True)):
            if value is None and j >= required:
                cells.append("")
                continue
            if value is None:
                self.bad = f"{where}: no value in {col!r} (missing or null); expected {what}"
                return self
            if not isinstance(value, str):
                kind = VALUE_TYPES.get(type(value), type(value).__name__)
                self.bad = f"{where}: {col!r} holds a {kind}, not text; expected {what}"
                return self
            cell = normalise_cell(value)
            if not cell and j < required:
                self.bad = f"{where}: {col!r} is empty (blank, or NUL / zero-width characters only); expected {what}"
                return self
            cells.append(cell)
        self.cells = cells
        return self


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


def keep_rows(records: Iterator[Record], bad: BadRows, counted: TextStats) -> Iterator[list[str]]:
    """The cells of the good records; blank lines counted, bad rows raised or skipped (:class:`BadRows`)."""
    for rec in records:
        if rec.cells is not None:
            counted.sentences += 1
            yield rec.cells
        elif rec.blank:
            counted.blank_lines_skipped += 1
        else:
            bad(rec.bad or f"bad row at {rec.line}")


def as_columns(rows: Iterator[list[str]], width: int) -> list[list[str]]:
    """Rows of ``width`` cells as one list per column."""
    columns: list[list[str]] = [[] for _ in range(width)]
    for cells in rows:
        for col, cell in zip(columns, cells, strict=True):
            col.append(cell)
    return columns


def close_count(where: str, counted: TextStats, what: str) -> None:
    """The end of one source's reading pass: its skipped rows logged in total.

    Raises:
        ValueError: the source gave no row (names ``where``, the blank lines and bad rows, and ``what`` a row
            should be).
    """
    if counted.bad_rows_skipped:
        logger.warning(
            "%s: %d bad row(s) skipped (skip_bad_rows), the first %d logged above; %d row(s) kept",
            where,
            counted.bad_rows_skipped,
            min(counted.bad_rows_skipped, LOGGED_BAD_ROWS),
            counted.sentences,
        )
    if not counted.sentences:
        raise ValueError(
            f"{where}: no rows: {counted.blank_lines_skipped} blank line(s), {counted.bad_rows_skipped} bad "
            f"row(s) skipped; expected {what}"
        )
