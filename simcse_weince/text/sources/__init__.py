"""Where training text comes from: one reader per kind of source, behind one interface (:class:`Source`).

Text lines (any name that is no column format: :mod:`.lines`), the column files (one module per format, each
reader listed in :data:`FILE_SOURCES` with its suffixes) and Hub datasets (:mod:`.hub`).

A file's reader is chosen by its name, here and nowhere else (:func:`source_class`); the formats' names and
suffixes in messages and ``--help`` (:func:`format_names`, :func:`column_suffixes`), the refusals by name
(:func:`check_file_name`) and the table in ``docs/training.md`` are derived from :data:`FILE_SOURCES` (:mod:`.names`).
A new format is one module with one :class:`~simcse_weince.text.sources.base.FileSource` subclass, and one entry
there.
:func:`open_sources` opens a run's sources once, with the checks that span several of them.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence
from pathlib import Path

from simcse_weince.text.columns import ReadOptions
from simcse_weince.text.sources.base import FileSource, Part, Source
from simcse_weince.text.sources.hub import HubColumns, HubText
from simcse_weince.text.sources.lines import TextLines
from simcse_weince.text.sources.names import (
    COMPRESSION_SUFFIXES,
    FILE_SOURCES,
    check_lines_name,
    column_class,
    column_suffixes,
    format_names,
)

__all__ = [
    "FILE_SOURCES",
    "Part",
    "ReadOptions",
    "Source",
    "check_file_name",
    "column_suffixes",
    "format_names",
    "open_file",
    "open_sources",
]

logger = logging.getLogger(__name__)


def source_class(path: str | Path) -> type[FileSource]:
    """The reader of a file, by its name's last suffix (a compression suffix before it looked through:
    ``a.tsv.gz`` is TSV); :class:`~simcse_weince.text.sources.lines.TextLines` for any other name."""
    return column_class(path) or TextLines


def column_format(path: str | Path) -> str | None:
    """The column format that a file's name announces (``a.csv``, ``a.JSONL``, ``a.tsv.gz``), or None."""
    cls = source_class(path)
    return cls.format if cls.by_column else None


def check_file_name(
    path: str | Path,
    by_column: bool = True,
    text_columns: Sequence[str] | None = None,
    allow_missing_negatives: bool = False,
) -> type[FileSource]:
    """How a training file is read, decided by its name, with the refusals a name alone decides.

    Read as lines (``by_column`` False), a file named as a column format is refused: read line by line, a SimCSE
    CSV would train on its header and on quoted pairs. Read by column, a column format is accepted unless
    compressed, and a text file is refused when ``text_columns`` names more than one column (it has one sentence
    per line) or with ``allow_missing_negatives`` (it has no positives).

    Raises:
        ValueError: names the file, the format and what was expected.
    """
    if not by_column:
        check_lines_name(path)
        return TextLines
    cls = source_class(path)
    if cls.by_column and Path(path).suffixes[-1].lower() in COMPRESSION_SUFFIXES:
        raise ValueError(
            f"{path} is a compressed {cls.format} file: decompress it first; expected an uncompressed file "
            f"({column_suffixes()})"
        )
    if not cls.by_column and text_columns is not None and len(text_columns) > 1:
        raise ValueError(
            f"{path} is read as lines, one sentence each, without columns, but text_columns names "
            f"{len(text_columns)} ({', '.join(text_columns)}); expected a column file ({column_suffixes()}) with "
            "those columns"
        )
    if not cls.by_column and allow_missing_negatives:
        raise ValueError(
            f"{path} is read as lines, one sentence each, but allow_missing_negatives trains pairs and triplets; "
            f"expected a column file ({column_suffixes()}) with an anchor and a positive"
        )
    return cls


def open_file(path: str | Path, drop_unterminated_last_line: bool, options: ReadOptions) -> FileSource:
    """A local training file, opened by its reader (:func:`check_file_name`, then the reader's own checks)."""
    cls = check_file_name(path, True, options.text_columns, options.allow_missing_negatives)
    return cls.open(path, drop_unterminated_last_line, options)


def is_cut_file(path: str | Path, patterns: Sequence[str] | None) -> bool:
    """Whether ``path`` matches one of ``drop_unterminated_last_line``'s names or glob patterns."""
    return any(fnmatch.fnmatch(Path(path).name, p) or fnmatch.fnmatch(str(path), p) for p in patterns or ())


def open_sources(
    files: Sequence[str | Path] | None,
    options: ReadOptions,
    cut_files: Sequence[str] | None = None,
    hub_dataset: str | None = None,
    hub_data_file: str | None = None,
) -> list[Source]:
    """The sources of a run, opened once: the local ``files`` (those matching ``cut_files`` drop an
    unterminated last line), else the Hub dataset (its named columns when the options or the file's name ask for
    columns, else its ``text`` column).

    Every file gives the same number of text columns; with ``allow_missing_negatives`` every hard-negative
    column is in at least one file.

    Raises:
        FileNotFoundError, IsADirectoryError, ValueError: one line naming the file and what was expected.
    """
    if not files:
        if hub_dataset is None:
            raise ValueError("no training file given; expected at least one text or column file")
        hub = HubColumns if options.by_column or column_format(hub_data_file or "") else HubText
        return [hub(hub_dataset, hub_data_file, options)]
    opened = [open_file(f, is_cut_file(f, cut_files), options) for f in files]
    if options.allow_missing_negatives:
        check_negative_columns(opened)
    check_same_width(opened)
    return opened


def check_same_width(opened: Sequence[Source]) -> int:
    """The number of text columns every source gives.

    Raises:
        ValueError: two sources give different numbers (names both and their columns).
    """
    first = opened[0]
    for s in opened[1:]:
        if s.width != first.width:
            raise ValueError(
                f"{first.where} gives {first.width} text column(s) ({', '.join(first.columns) or 'one per line'}), "
                f"{s.where} {s.width} ({', '.join(s.columns) or 'one per line'}); expected the same number in "
                "every training file (set text_columns)"
            )
    return first.width


def check_negative_columns(opened: Sequence[Source]) -> None:
    """With ``allow_missing_negatives``: every hard-negative column is in at least one file (a JSON Lines file
    may hold it in any row), and the files without one are logged.

    Raises:
        ValueError: a hard-negative column in no file (a misspelt name would otherwise train pairs only).
    """
    files = [s for s in opened if s.by_column]
    for c in files[0].columns[2:] if files else []:
        if all(c in s.absent for s in files):
            found = "; ".join(f"{s.where}: {', '.join(map(repr, s.header or s.columns))}" for s in files[:3])
            raise ValueError(
                f"no training file has the hard-negative column {c!r} ({found}); expected its name in "
                "text_columns, or pairs without allow_missing_negatives"
            )
    for s in files:
        if s.absent:
            logger.info("%s has no column %s: its rows train without that hard negative", s.where,
                        ", ".join(map(repr, s.absent)))  # fmt: skip
