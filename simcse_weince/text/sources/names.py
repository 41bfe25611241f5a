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
BY_SUFFIX = {suffix: cls for cls in FILE_SOURCES for suffix in cls.suffixes}
COLUMN_SUFFIXES = ", ".join(BY_SUFFIX)  # ".csv, .tsv, ..." for messages


def column_class(path: str | Path) -> type[FileSource] | None:
    """The column reader of a file, by its name's last suffix (a compression suffix before it looked through:
    ``a.tsv.gz`` is TSV), or ``None`` for any other name (a text file)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return BY_SUFFIX.get(suffixes[-1]) if suffixes else None


def check_lines_name(path: str | Path) -> None:
    """Refuse to read as lines a file named as a column format: read line by line, a SimCSE CSV would train on
    its header and on quoted pairs.

    Raises:
        ValueError: names the file, its format and what was expected.
    """
    cls = column_class(path)
    if cls is not None:
        raise ValueError(
            f"{path} is named as {cls.format}: column formats ({COLUMN_SUFFIXES}) are read by column "
            "(text_columns), not as plain lines; expected UTF-8 text, one sentence per line (e.g. a .txt file)"
        )
