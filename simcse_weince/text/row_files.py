"""Writing text rows as a file the training reader reads back: CSV (a header row) or Parquet (string columns),
chosen by the file's suffix; every file is written atomically (:func:`~simcse_weince.core.atomic.atomic_file`: a
temporary file beside it, then ``os.replace``), so a reader or an interrupted run never sees half a file.

The CSV is Python's ``excel`` dialect, which the reader parses strictly
(:mod:`~simcse_weince.text.sources.delimited`): a field with a comma, a quote or a line break is quoted, and a
quote inside is doubled.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from simcse_weince.core.atomic import atomic_file
from simcse_weince.core.file_errors import refuse_folder

ROW_FILE_SUFFIXES = (".csv", ".parquet")


def check_new_file(path: str | Path, what: str, overwrite: bool, suffixes: Sequence[str] | None = None) -> Path:
    """``path`` as a file this run may write: with one of ``suffixes`` (when given), not a folder, and not there
    yet unless ``overwrite``.

    Raises:
        ValueError: another suffix, or the file exists without ``overwrite``.
        IsADirectoryError: ``path`` is a folder.
    """
    path = Path(path)
    refuse_folder(path, what, f"a file ({', '.join(suffixes)})" if suffixes else "a file name")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise ValueError(
            f"{what} {path}: unsupported suffix {path.suffix or '(none)'!r}; expected {', '.join(suffixes)}"
        )
    if path.exists() and not overwrite:
        raise ValueError(f"{what} {path} already exists; pass --overwrite to replace it, or choose another name")
    return path


def write_rows(path: str | Path, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Path:
    """Write ``rows`` (one text per column each) under the header ``columns``, as CSV or Parquet by the suffix.

    Raises:
        ValueError: a suffix other than :data:`ROW_FILE_SUFFIXES`, or a row of another width.
        IsADirectoryError: ``path`` is a folder.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    refuse_folder(path, "", f"a file ({', '.join(ROW_FILE_SUFFIXES)})")
    if suffix not in ROW_FILE_SUFFIXES:
        raise ValueError(f"{path}: unsupported suffix {suffix or '(none)'!r}; expected {', '.join(ROW_FILE_SUFFIXES)}")
    bad = next((i for i, r in enumerate(rows) if len(r) != len(columns)), None)
    if bad is not None:
        raise ValueError(f"{path}: row {bad + 1} has {len(rows[bad])} texts; expected {len(columns)} ({columns})")
    with atomic_file(path) as tmp:
        if suffix == ".csv":
            with tmp.open("w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f, dialect="excel")
                writer.writerow(columns)
                writer.writerows(rows)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table({c: pa.array([r[j] for r in rows], type=pa.string()) for j, c in enumerate(columns)})
            pq.write_table(table, tmp)
    return path
