"""Parquet files, read by pyarrow a record batch at a time (memory flat in the file's size); bad rows are named
``file: row N`` (from 1)."""

from __future__ import annotations

from collections.abc import Iterator

from simcse_weince.text.sources.base import TableFile, text_values

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
        """Read one row group at a time, so that a damaged page (pyarrow's bare ``Corrupt snappy compressed
        data.``, a thrift error) is named by its file and row group."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.path)
        meta, first = pf.metadata, 0
        for g in range(meta.num_row_groups):  # the row groups that hold rows of [start, stop)
            n = meta.row_group(g).num_rows
            if first < stop and first + n > start:
                row = first
                try:
                    for batch in pf.iter_batches(batch_size=PARQUET_BATCH, row_groups=[g], columns=columns):
                        yield row, {c: text_values(batch.column(c), str(self.path), c, row) for c in columns}
                        row += batch.num_rows
                except (OSError, pa.ArrowException) as err:
                    raise ValueError(
                        f"{self.path}: row group {g + 1} (rows {first + 1}-{first + n}): cannot read it ({err}); "
                        "expected an undamaged Parquet file: copy or write it again"
                    ) from err
            first += n
            if first >= stop:
                return
