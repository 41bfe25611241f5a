"""The source layer: one reader per format behind one interface, formats and refusals derived from the registry,
and Arrow / Feather as the format that was added as one module."""

from __future__ import annotations

import re
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.feather as feather
import pytest
from transformers import AutoTokenizer

from simcse_weince.cli import mine, train_text
from simcse_weince.text import token_cache
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import (
    FILE_SOURCES,
    ReadOptions,
    check_file_name,
    column_format,
    names,
    open_file,
    open_sources,
    source_class,
)
from simcse_weince.text.sources.arrow import ArrowFile
from simcse_weince.text.sources.delimited import CsvFile
from simcse_weince.text.sources.lines import TextLines
from simcse_weince.text.sources.names import format_names, formats_table

NLI = [
    ("A man, in a hat, sleeps.", "Someone is asleep.", "A man is running."),
    ("Two dogs play in the snow.", "Animals are outside.", "The dogs sleep, indoors."),
    ("A child eats an apple.", "A kid is eating.", "A child is crying."),
]


@pytest.fixture(scope="module")
def tok(tiny_bert_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def rows_of(files: list[Path], tok, tmp_path: Path, **options) -> tuple[datasets.Dataset, TextStats]:
    stats = TextStats()
    sources = open_sources(files, ReadOptions.of(None, **options))
    return token_cache.prepare_rows(sources, tok, 16, stats, cache_root=tmp_path / "cache"), stats


def write_csv(path: Path, rows) -> Path:
    path.write_text("sent0,sent1,hard_neg\n" + "".join(",".join(f'"{c}"' for c in r) + "\n" for r in rows))
    return path


def table(rows, **extra) -> pa.Table:
    return pa.table({c: [r[j] for r in rows] for j, c in enumerate(("sent0", "sent1", "hard_neg"))} | extra)


@pytest.mark.parametrize("kind", ["feather", "ipc file", "ipc stream", "datasets cache file"])
def test_arrow_and_feather_give_the_rows_of_the_same_csv(tok, tmp_path: Path, kind: str) -> None:
    want, want_stats = rows_of([write_csv(tmp_path / "nli.csv", NLI)], tok, tmp_path)
    t = table(NLI, label=pa.array([0, 1, 2]))
    f = tmp_path / ("nli.feather" if kind == "feather" else "nli.arrow")
    if kind == "feather":
        feather.write_feather(t, f)
    elif kind == "ipc file":
        with pa.ipc.new_file(f, t.schema) as w:
            w.write_table(t, max_chunksize=2)  # two record batches
    elif kind == "ipc stream":
        with pa.ipc.new_stream(f, t.schema) as w:
            w.write_table(t)
    else:
        ds = datasets.Dataset.from_dict({c: t.column(c).to_pylist() for c in t.column_names})
        f = Path(ds.map(lambda r: r, cache_file_name=str(f)).cache_files[0]["filename"])  # an Arrow stream on disk
    got, stats = rows_of([f], tok, tmp_path)
    assert got.column_names == want.column_names
    assert all(got[c][:] == want[c][:] for c in want.column_names)
    assert (stats.sentences, stats.text_columns, stats.files) == (3, ["sent0", "sent1", "hard_neg"], [str(f)])
    assert stats.cache_dir != want_stats.cache_dir  # the format is part of the key


def test_arrow_rows_by_parts_and_bad_rows_named_by_row(tok, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(f"anchor {i}", f"positive {i}", f"negative {i}") for i in range(40)]
    f = tmp_path / "big.arrow"
    feather.write_feather(table(rows), f, chunksize=7)
    whole, _ = rows_of([f], tok, tmp_path)
    monkeypatch.setattr(token_cache, "PART_ROWS", 9)  # parts across record batches
    parted, stats = rows_of([f], tok, tmp_path / "parted")
    assert len(parted.cache_files) == 5 and parted["input_ids_2"][:] == whole["input_ids_2"][:]
    bad = [*rows[:3], ("a", None, "c"), ("d", "e", "")]
    g = tmp_path / "bad.feather"
    feather.write_feather(table(bad), g)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(g))}: row 4: no value in 'sent1' \(missing or null\)"):
        rows_of([g], tok, tmp_path)
    ds, stats = rows_of([g], tok, tmp_path, skip_bad_rows=True)
    assert (len(ds), stats.bad_rows_skipped) == (3, 2)
    ds, stats = rows_of([g], tok, tmp_path, allow_missing_negatives=True, skip_bad_rows=True)
    assert (len(ds), stats.rows_by_negatives) == (4, [1, 3])  # the empty negative is absent, the null anchor bad


@pytest.mark.parametrize(
    ("name", "text", "held", "splits"),
    [
        ("semi.csv", "sent0;sent1;hard_neg\na;b;c\n", "semicolons", "commas"),
        ("semi_one.csv", "text;label\nhello;1\n", "semicolons", "commas"),
        ("comma.tsv", "sent0,sent1\na,b\n", "commas", "tabs"),
    ],
)
def test_a_header_of_one_column_holding_another_separator_is_refused_with_a_hint(
    tmp_path: Path, name: str, text: str, held: str, splits: str
) -> None:
    """It was trained on as one column of sentences ("a;b;c"), or refused without a word on the separator."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        open_file(path, False, ReadOptions())
    header = text.split("\n")[0]
    assert str(err.value) == (
        f"{path}:1: the header {header!r} names no columns of {path.suffix[1:].upper()} (the header was read as one "
        f"column holding {held}, but this file's fields must be separated by {splits}; save it so, or under the "
        "suffix of its separator: .csv for commas, .tsv for tabs)"
    )


def test_a_one_column_file_whose_rows_hold_semicolons_is_still_sentences(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("text\na; b\n", encoding="utf-8")
    assert open_file(path, False, ReadOptions()).columns == ["text"]


def test_arrow_refusals_name_the_file(tmp_path: Path) -> None:
    numbers = tmp_path / "n.feather"
    feather.write_feather(pa.table({"sent0": ["a"], "sent1": [3]}), numbers)
    with pytest.raises(ValueError, match=r"n\.feather: the column 'sent1' holds int64; expected text \(strings\)"):
        open_file(numbers, False, ReadOptions())
    junk = tmp_path / "j.arrow"
    junk.write_bytes(b"not arrow at all\n")
    with pytest.raises(ValueError, match=r"j\.arrow: not a readable Arrow file .*expected an Arrow IPC or Feather"):
        open_file(junk, False, ReadOptions())
    with pytest.raises(ValueError, match=r"x\.arrow\.gz is a compressed Arrow file: decompress it first"):
        check_file_name(tmp_path / "x.arrow.gz")
    with pytest.raises(FileNotFoundError, match=r"training file not found: .*nope\.feather"):
        open_file(tmp_path / "nope.feather", False, ReadOptions())


class ToyFile(CsvFile):
    """A throwaway column format: CSV under its own name and suffix."""

    format = "Toy"
    suffixes = (".toy",)


def test_a_new_format_is_one_entry_with_no_stale_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Adding a reader to FILE_SOURCES reads its files and updates every message, ``--help`` and the docs table."""
    monkeypatch.setattr(names, "FILE_SOURCES", (*FILE_SOURCES, ToyFile))
    (tmp_path / "p.toy").write_text("sent0,sent1\na,b\nc,d\n")
    assert source_class("x.TOY") is ToyFile and open_file(tmp_path / "p.toy", False, ReadOptions()).columns == [
        "sent0",
        "sent1",
    ]
    with pytest.raises(ValueError, match=r"x\.toy is named as Toy: column formats \(.*, \.toy\) are read by column"):
        check_file_name("x.toy", by_column=False)
    with pytest.raises(ValueError, match=r"x\.toy\.gz is a compressed Toy file: .*\(.*, \.toy\)"):
        check_file_name("x.toy.gz")
    assert format_names().endswith(", Arrow or Toy") and "| Toy | `.toy` |" in formats_table()
    with pytest.raises(SystemExit):
        train_text.run(["--help"])
    with pytest.raises(SystemExit):
        mine.build_parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert ".toy; CSV and TSV" in out and "Toy files of pairs" in out


def test_the_docs_table_of_formats_is_the_registry() -> None:
    """``docs/training.md`` lists the column formats as the registry has them (regenerate it with formats_table())."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    assert formats_table() in docs


def test_formats_suffixes_and_refusals_come_from_the_registry(tmp_path: Path) -> None:
    suffixes = {s: cls for cls in FILE_SOURCES for s in cls.suffixes}
    for suffix, cls in suffixes.items():
        assert source_class(f"a{suffix.upper()}") is cls and column_format(f"a{suffix}.gz") == cls.format
        with pytest.raises(ValueError, match=rf"is named as {cls.format}: column formats \(.*\) are read by column"):
            check_file_name(f"a{suffix}", by_column=False)
        listed = re.escape(", ".join(suffixes))
        with pytest.raises(ValueError, match=rf"allow_missing_negatives .*expected a column file \({listed}\)"):
            check_file_name("a.txt", allow_missing_negatives=True)
    assert source_class("a.txt") is source_class("a") is source_class("a.txt.gz") is TextLines
    assert ArrowFile in FILE_SOURCES and column_format("a.txt") is None


def test_arrow_stream_cut_at_a_batch_boundary_is_refused(tmp_path: Path) -> None:
    """A stream has no footer: cut after a whole record batch it still parses, with half its rows; only the
    missing end-of-stream marker tells, and the file is refused by name rather than trained on short."""
    rows = [(f"anchor {i}", f"positive {i}", f"negative {i}") for i in range(300)]
    whole = tmp_path / "whole.arrow"
    with pa.ipc.new_stream(whole, table(rows).schema) as w:
        w.write_table(table(rows), max_chunksize=150)
    assert open_file(whole, False, ReadOptions()).rows == 300
    data = whole.read_bytes()
    source = pa.memory_map(str(whole))
    reader, ends = pa.ipc.MessageReader.open_stream(source), []
    for _ in reader:
        ends.append(source.tell())
    cut = tmp_path / "cut.arrow"
    cut.write_bytes(data[: ends[1]])  # the schema and the first batch of 150 rows, no end-of-stream marker
    assert pa.ipc.open_stream(pa.memory_map(str(cut))).read_all().num_rows == 150  # what pyarrow alone reads
    with pytest.raises(ValueError, match=rf"^{re.escape(str(cut))}: the Arrow stream ends without its end-of-stream "
                       r"marker after 150 rows \(cut off"):  # fmt: skip
        open_file(cut, False, ReadOptions())


def test_damaged_parquet_and_arrow_name_the_file_and_row(tok, tmp_path: Path) -> None:
    """Errors from deep in pyarrow (a corrupt compressed page, bytes that are not UTF-8) name the file, the row
    group or the row."""
    import pyarrow.parquet as pq

    rows = [(f"sentence number {i} " * 5, f"positive {i}", f"negative {i}") for i in range(200)]
    good = tmp_path / "good.parquet"
    pq.write_table(table(rows), good, compression="snappy", row_group_size=100, use_dictionary=False)
    data = bytearray(good.read_bytes())
    chunk = pq.ParquetFile(good).metadata.row_group(1).column(0)
    middle = chunk.data_page_offset + chunk.total_compressed_size // 2
    data[middle : middle + 64] = b"\xff" * 64
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(bad))}: row group 2 \(rows 101-200\): cannot read it "
                       r"\(Corrupt snappy compressed data\.\)"):  # fmt: skip
        rows_of([bad], tok, tmp_path)
    text = pa.array([b"good", b"bad \xff x", b"ok"], pa.binary()).view(pa.string())  # not checked when written
    broken = pa.table({"sent0": text, "sent1": ["a", "b", "c"]})
    for f in (tmp_path / "u.parquet", tmp_path / "u.feather"):
        pq.write_table(broken, f) if f.suffix == ".parquet" else feather.write_feather(broken, f)
        with pytest.raises(ValueError, match=rf"^{re.escape(str(f))}: row 2: the column 'sent0' holds bytes that "
                           r"are not UTF-8 \(invalid start byte\)"):  # fmt: skip
            rows_of([f], tok, tmp_path)
