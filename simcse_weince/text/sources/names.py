"""Which column reader a training file's name announces, and the refusal a name alone decides for a file read as
lines.

The table of column formats lives here, apart from the package's ``__init__`` (which adds the text-lines reader
for every other name), so that :mod:`~simcse_weince.text.sources.lines` can check a name without importing its
own package.
"""

from __future__ import annotations

from pathlib import Path

from simcse_weince.text.sources.arrow import ArrowFile
from simcse_weince.text.sources.base import FileSource
from simcse_weince.text.sources.delimited import CsvFile, TsvFile
from simcse_weince.text.sources.jsonl import JsonFile, JsonLinesFile
from simcse_weince.text.sources.parquet import ParquetFile

FILE_SOURCES: tuple[type[FileSource], ...] = (CsvFile, TsvFile, JsonLinesFile, JsonFile, ParquetFile, ArrowFile)
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip")


def by_suffix() -> dict[str, type[FileSource]]:
    """Suffix -> column reader, from :data:`FILE_SOURCES` (read at each call: every list below follows it)."""
    return {suffix: cls for cls in FILE_SOURCES for suffix in cls.suffixes}


def column_suffixes() -> str:
    """``.csv, .tsv, ...``: the column formats' suffixes, for messages and help."""
    return ", ".join(by_suffix())


def format_names() -> str:
    """``CSV, TSV, JSON Lines, JSON, Parquet or Arrow``: the column formats, for messages and help."""
    names = list(dict.fromkeys(cls.format for cls in FILE_SOURCES))
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


def formats_table() -> str:
    """The column formats as a Markdown table (format, file names); ``docs/training.md`` holds a copy that a test
    compares with this."""
    rows = [f"| {cls.format} | {', '.join(f'`{s}`' for s in cls.suffixes)} |" for cls in FILE_SOURCES]
    return "\n".join(["| format | file names |", "|---|---|", *rows])


def column_class(path: str | Path) -> type[FileSource] | None:
    """The column reader of a file, by its name's last suffix (a compression suffix before it looked through:
    ``a.tsv.gz`` is TSV), or ``None`` for any other name (a text file)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return by_suffix().get(suffixes[-1]) if suffixes else None


def check_lines_name(path: str | Path) -> None:
    """Refuse to read as lines a file named as a column format: read line by line, a SimCSE CSV would train on
    its header and on quoted pairs.

    Raises:
        ValueError: names the file, its format and what was expected.
    """
    cls = column_class(path)
    if cls is not None:
        raise ValueError(
            f"{path} is named as {cls.format}: column formats ({column_suffixes()}) are read by column "
            "(text_columns), not as plain lines; expected UTF-8 text, one sentence per line (e.g. a .txt file)"
        )
