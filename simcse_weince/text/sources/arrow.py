"""Arrow IPC files (``.arrow``: the file or the stream format, as ``datasets`` writes its cache files) and
Feather v2 files (``.feather``: the IPC file format), memory-mapped by pyarrow and read a slice of rows at a
time; bad rows are named ``file: row N`` (from 1)."""

from __future__ import annotations

from collections.abc import Iterator

from simcse_weince.text.sources.base import TableFile

ARROW_BATCH = 10_000  # rows per slice turned into Python strings


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

    def batches(self, start: int, stop: int, columns: list[str]) -> Iterator[tuple[int, dict[str, list]]]:
        table = self.table().select(columns)
        for first in range(start, min(stop, table.num_rows), ARROW_BATCH):
            part = table.slice(first, min(ARROW_BATCH, stop - first))
            yield first, {c: part.column(c).to_pylist() for c in columns}
