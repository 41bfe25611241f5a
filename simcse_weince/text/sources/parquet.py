"""Parquet files, read by pyarrow a record batch at a time (memory flat in the file's size); bad rows are named
``file: row N`` (from 1)."""

from __future__ import annotations

from collections.abc import Iterator

from simcse_weince.text.sources.base import TableFile

PARQUET_BATCH = 10_000  # rows per record batch read from a Parquet file


class ParquetFile(TableFile):
    """A Parquet file: its schema names the columns; each read column holds strings."""

    format = "Parquet"
    suffixes = (".parquet",)
    layout = "a Parquet file"

    def start(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(self.path)
        except (OSError, pa.ArrowException) as err:
            raise ValueError(f"{self.path}: not a readable Parquet file ({err}); expected a Parquet file") from err
        schema = pf.schema_arrow
        self.check_schema(schema.names, {n: schema.field(n).type for n in schema.names})
        self.rows = pf.metadata.num_rows

    def batches(self, start: int, stop: int, columns: list[str]) -> Iterator[tuple[int, dict[str, list]]]:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.path)
        meta, groups, first, row = pf.metadata, [], 0, None
        for g in range(meta.num_row_groups):  # the row groups that hold rows of [start, stop)
            n = meta.row_group(g).num_rows
            if first < stop and first + n > start:
                groups.append(g)
                row = first if row is None else row
            first += n
        if row is None:
            return
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups, columns=columns):
            yield row, {c: batch.column(c).to_pylist() for c in columns}
            row += batch.num_rows
            if row >= stop:
                return
