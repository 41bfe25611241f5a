"""Arrow IPC files (``.arrow``: the file or the stream format, as ``datasets`` writes its cache files) and
Feather v2 files (``.feather``: the IPC file format), memory-mapped by pyarrow and read a slice of rows at a
time; bad rows are named ``file: row N`` (from 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from simcse_weince.text.sources.base import TableFile, text_values

ARROW_BATCH = 10_000  # rows per slice turned into Python strings
FILE_MAGIC = b"ARROW1"  # how the IPC file format (and Feather v2) starts; a stream starts otherwise
END_OF_STREAM = (b"\xff\xff\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00")  # the marker; before Arrow 0.15


class ArrowFile(TableFile):
    """An Arrow IPC or Feather v2 file: its schema names the columns; each read column holds strings."""

    format = "Arrow"
    suffixes = (".arrow", ".feather")
    layout = "an Arrow IPC or Feather v2 file"

    def table(self):
        """The file's table, memory-mapped (nothing is copied); the IPC file format first, then the stream."""
        import pyarrow as pa

        errors = []
        for open_ipc in (pa.ipc.open_file, pa.ipc.open_stream):
            try:  # the map stays open as long as the table's buffers point into it
                return open_ipc(pa.memory_map(str(self.path))).read_all()
            except (OSError, pa.ArrowException) as err:
                errors.append(str(err))
        raise ValueError(
            f"{self.path}: not a readable Arrow file ({errors[0]}); expected {self.layout} (Feather v1 is not read)"
        )

    def start(self) -> None:
        table = self.table()
        self.check_schema(table.schema.names, {n: table.schema.field(n).type for n in table.schema.names})
        self.rows = table.num_rows
        check_stream_end(self.path, self.rows, self.layout)

    def batches(self, start: int, stop: int, columns: list[str]) -> Iterator[tuple[int, dict[str, list]]]:
        table = self.table().select(columns)
        for first in range(start, min(stop, table.num_rows), ARROW_BATCH):
            part = table.slice(first, min(ARROW_BATCH, stop - first))
            yield first, {c: text_values(part.column(c), str(self.path), c, first) for c in columns}


def check_stream_end(path: Path, rows: int, layout: str) -> None:
    """An Arrow IPC stream holds no footer or row count: one cut off after a whole record batch (a copy or a
    write that stopped) reads without error, short. Its messages are walked (metadata only, memory-mapped) and
    what follows the last one must be the end-of-stream marker (:data:`END_OF_STREAM`). The IPC file format has a
    footer, which pyarrow checks itself.

    Raises:
        ValueError: the stream ends without the marker (names the file and the rows it holds).
    """
    import pyarrow as pa

    with path.open("rb") as f:
        if f.read(len(FILE_MAGIC)) == FILE_MAGIC:
            return
    with pa.memory_map(str(path)) as source:
        reader, end = pa.ipc.MessageReader.open_stream(source), 0
        for _ in reader:
            end = source.tell()
        size = source.size()
        source.seek(end)
        rest = source.read(size - end) if size - end <= 8 else b""
    if rest not in END_OF_STREAM:
        raise ValueError(
            f"{path}: the Arrow stream ends without its end-of-stream marker after {rows} rows (cut off, or still "
            f"being written); expected {layout} written to its end: copy or write it again"
        )
