"""Reading, tokenising and collating the training text."""

from __future__ import annotations

import hashlib
import itertools
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from simcse_weince.losses.duplicates import sentence_key
from simcse_weince.text.arguments import DataArguments
from simcse_weince.text.data import SimCSECollator, tokenize_batch
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import column_format
from simcse_weince.text.sources.lines import iter_sentences, read_sentences
from tests.helpers import argv


def test_blank_lines_skipped_and_counted(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("first sentence\n\n   \nsecond one\n", encoding="utf-8")
    stats = TextStats()
    assert read_sentences(f, stats=stats) == ["first sentence", "second one"]
    assert stats.blank_lines_skipped == 2 and stats.sentences == 2 and stats.files == [str(f)]


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_bytes(b"ok line\nanother\nbroken \xff\xfe here\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: invalid UTF-8"):
        read_sentences(f)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file_is_an_error(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "empty.txt"
    f.write_bytes(content)
    with pytest.raises(ValueError, match=r"empty\.txt: no sentences"):
        read_sentences(f)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
        read_sentences(tmp_path / "nope.txt")


def test_unterminated_last_line_dropped_on_request(tmp_path: Path) -> None:
    f = tmp_path / "cut.txt"
    f.write_bytes("complete one\ncomplete two\ncut in the mid\xc3".encode("latin-1")[:-1] + b"\xc3")
    with pytest.raises(ValueError, match=r"cut\.txt:3"):
        read_sentences(f)
    stats = TextStats()
    assert read_sentences(f, drop_unterminated_last_line=True, stats=stats) == ["complete one", "complete two"]
    assert stats.unterminated_lines_dropped == 1


def test_real_wiki_sample(wiki_sample: Path) -> None:
    stats = TextStats()
    sentences = read_sentences(wiki_sample, drop_unterminated_last_line=True, stats=stats)
    assert len(sentences) == 11_914 and stats.unterminated_lines_dropped == 1


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 1 << 22])
def test_streaming_reader_splits_at_newlines_only(tmp_path: Path, chunk_bytes: int) -> None:
    # CRLF, a lone CR, a Unicode line break, a BOM, blank lines and a multi-byte character on every chunk
    # boundary: lines end at \n (a CRLF's CR is stripped); a lone CR or U+2028 is a space inside the line.
    text = "\ufeffé first\r\nsecond\u2028third\n\n  \r\nfourth\rfifth \u00e9\u4e2d\nlast, unterminated"
    f = tmp_path / "mixed.txt"
    f.write_bytes(text.encode("utf-8"))
    expected = ["é first", "second third", "fourth fifth \u00e9\u4e2d", "last, unterminated"]
    stats = TextStats()
    assert list(iter_sentences(f, stats=stats, chunk_bytes=chunk_bytes)) == expected
    assert stats.sentences == 4 and stats.blank_lines_skipped == 2
    stats = TextStats()
    assert list(iter_sentences(f, True, stats, chunk_bytes=chunk_bytes)) == expected[:-1]
    assert stats.unterminated_lines_dropped == 1


@pytest.mark.parametrize("chunk_bytes", [3, 1 << 22])
def test_other_line_breaks_keep_the_line_count(
    tmp_path: Path, chunk_bytes: int, caplog: pytest.LogCaptureFixture
) -> None:
    # every break of str.splitlines other than \n, inside the lines of a CRLF file: one sentence per line,
    # the break read as a space (a form feed would otherwise join two words for a WordPiece tokenizer)
    breaks = ["\u2028", "\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2029", "\r"]
    lines = [f"line {i} left{b}right" for i, b in enumerate(breaks * 30)]
    f = tmp_path / "breaks.txt"
    f.write_bytes("\r\n".join(["plain first line", *lines]).encode("utf-8") + b"\r\n")
    stats = TextStats()
    with caplog.at_level("WARNING", logger="simcse_weince.text.data"):
        got = read_sentences(f, stats=stats)
    assert len(got) == stats.sentences == 1 + len(lines) == 271
    assert got[1:] == [f"line {i} left right" for i in range(len(lines))]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "breaks.txt:2: a U+2028 is read as a space" in warnings[0]  # once per file


def test_invisible_lines_skipped_and_counted(tmp_path: Path) -> None:
    f = tmp_path / "mixed.txt"
    f.write_text(
        "hello\n\x00\n\u200b\u200c\u200d\n  \n\u2060 \ufeff\x00\n\ufeffworld\u200b\nzero\u200bwidth inside\n",
        encoding="utf-8",
    )
    stats = TextStats()
    assert read_sentences(f, stats=stats) == ["hello", "world", "zero\u200bwidth inside"]
    assert (stats.sentences, stats.blank_lines_skipped, stats.invisible_lines_skipped) == (3, 1, 3)


@pytest.mark.parametrize("content", ["\x00\n\x00\x00\n", "\u200b\n\u200c\u200d\n\u2060\ufeff\n\n"])
def test_a_file_of_invisible_characters_only_is_an_error(tmp_path: Path, content: str) -> None:
    f = tmp_path / "invisible.txt"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=r"invisible\.txt: no sentences: .* of NUL / zero-width characters only"):
        read_sentences(f)


COLUMN_FILES = ["pairs.csv", "PAIRS.CSV", "a.tsv", "a.json", "a.jsonl", "a.Parquet", "a.csv.gz", "a.jsonl.bz2"]


@pytest.mark.parametrize("name", COLUMN_FILES)
def test_column_formats_are_not_read_as_lines(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    f.write_text('sent0,sent1\n"A man sleeps.","Someone is asleep."\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(name)} is named as .*read by column .*not as plain lines"):
        read_sentences(f)
    cmd = ["a.txt", f"{{data}}/{name}"]
    if name.endswith((".gz", ".bz2")):  # what the column readers cannot read is refused when the config is parsed
        with pytest.raises(ValueError, match=rf"{re.escape(name)} is a compressed .* file: decompress it first"):
            DataArguments(train_files=cmd)
    else:
        assert DataArguments(train_files=cmd).train_files == cmd  # read by column


@pytest.mark.parametrize("name", ["a.txt", "wiki1m_for_simcse.head1280000bytes.txt", "a.csv.txt", "csv", "a.text"])
def test_other_names_are_read_as_lines(tmp_path: Path, name: str) -> None:
    assert column_format(name) is None
    (tmp_path / name).write_text("one\ntwo\n", encoding="utf-8")
    assert read_sentences(tmp_path / name) == ["one", "two"]


@pytest.mark.parametrize("case", ["compressed", "txt pairs"])
def test_training_refuses_an_unreadable_column_file_in_one_line_before_the_tokenizer_loads(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, case: str
) -> None:
    from simcse_weince.cli import train_text

    def no_loading(*args, **kwargs):
        raise AssertionError("the tokenizer was loaded")

    monkeypatch.setattr(train_text.AutoTokenizer, "from_pretrained", no_loading)
    f = tmp_path / ("nli_for_simcse.csv.gz" if case == "compressed" else "nli_for_simcse.txt")
    f.write_text("sent0,sent1,hard_neg\na,b,c\n", encoding="utf-8")
    columns = {"text_columns": ["sent0", "sent1"]} if case == "txt pairs" else {}
    cmd = argv(model_name_or_path=tiny_bert_dir, init_from_config=True, train_files=f, output_dir=tmp_path / "out",
               **columns)  # fmt: skip
    assert train_text.main(cmd) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    want = "is a compressed CSV file: decompress it first" if case == "compressed" else "is read as lines, one sentence"
    assert f"{f} {want}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", [1, 10, 100_000, 10**7])
def test_line_ranges_cut_after_newlines_and_cover_the_file(wiki_sample: Path, target: int) -> None:
    from simcse_weince.text.sources.lines import iter_range_sentences, line_ranges

    raw = wiki_sample.read_bytes()
    ranges = line_ranges(wiki_sample, target)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(raw)
    assert all(a < b == c for (a, b), (c, _) in itertools.pairwise(ranges)) and ranges[-1][0] < ranges[-1][1]
    assert all(raw[b - 1 : b] == b"\n" for _, b in ranges[:-1])
    if target >= 100_000:
        assert len(raw) // target <= len(ranges) <= -(-len(raw) // target)
        joined = [s for a, b in ranges for s in iter_range_sentences(wiki_sample, a, b, True)]
        assert joined == read_sentences(wiki_sample, drop_unterminated_last_line=True)


@pytest.mark.parametrize("chunk_bytes", [5, 1 << 22])
def test_invalid_utf8_in_a_later_chunk_names_line_and_byte(tmp_path: Path, chunk_bytes: int) -> None:
    f = tmp_path / "late.txt"
    f.write_bytes(b"line one\nline two\nline three\nbad \xff\n")
    with pytest.raises(ValueError, match=r"late\.txt:4: invalid UTF-8 at byte 33 "):
        list(iter_sentences(f, chunk_bytes=chunk_bytes))


@pytest.mark.parametrize("chunk_bytes", [4, 1 << 22])
def test_invalid_utf8_after_a_bom_names_the_file_line_and_byte(tmp_path: Path, chunk_bytes: int) -> None:
    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbfab\ncd\xff\n")  # the BOM counts in the byte position
    with pytest.raises(ValueError, match=r"bom\.txt:2: invalid UTF-8 at byte 8 "):
        list(iter_sentences(f, chunk_bytes=chunk_bytes))


def test_gzip_and_directory_errors(tmp_path: Path) -> None:
    import gzip

    z = tmp_path / "a.txt.gz"
    z.write_bytes(gzip.compress(b"one\ntwo\n"))
    with pytest.raises(ValueError, match=r"gzip-compressed; decompress it first"):
        read_sentences(z)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        read_sentences(tmp_path)


def test_tokenize_batch_matches_the_in_memory_path(tiny_bert_dir: Path, wiki_sample: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    sentences = read_sentences(wiki_sample, drop_unterminated_last_line=True)[:500]
    ids = tok(sentences, truncation=True, max_length=16)["input_ids"]
    truncated = sum(len(x) > 16 for x in tok(sentences)["input_ids"])  # counted on the untruncated ids
    cols = tokenize_batch(["", "  ", None, *sentences], tok, 16)  # blank and missing rows are dropped
    assert cols["input_ids"] == ids
    assert sum(cols["truncated"]) == truncated > 50  # the sample has long sentences
    assert cols["sentence_key"] == [sentence_key(x) for x in ids]


def test_sentences_without_a_known_token_are_dropped(tiny_bert_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    emoji = ["\U0001f600 \U0001f389", "\U0001f600"]
    texts = [emoji[0], "a cat", "\x01", "\u0301", "\u200b", "[UNK] [UNK]", "hello \U0001f600", emoji[1]]
    cols = tokenize_batch(texts, tok, 16)  # emoji are [UNK]; a control character and a lone accent vanish
    assert cols["input_ids"] == tok(["a cat", "hello \U0001f600"])["input_ids"]
    assert tok.unk_token_id in cols["input_ids"][1]  # a sentence with a known token keeps its [UNK]
    assert len(cols["sentence_key"]) == len(cols["truncated"]) == 2
    assert tokenize_batch(["\U0001f600"] * 3, tok, 16) == {"input_ids": [], "sentence_key": [], "truncated": []}


def test_truncation_counted(tiny_bert_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    long = " ".join(["word"] * 50)
    cols = tokenize_batch(["short one", long, "another short"], tok, max_length=8)
    ids = cols["input_ids"]
    assert cols["truncated"] == [False, True, False]
    assert [len(x) for x in ids] == [4, 8, 4]
    assert ids[1][0] == tok.cls_token_id and ids[1][-1] == tok.sep_token_id


def test_collator_pads_and_keys_duplicates(tiny_bert_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    rows = [{"input_ids": tok(s)["input_ids"]} for s in ["a cat", "a dog sat down", "a cat"]]
    batch = SimCSECollator(tok)(rows)
    assert batch["input_ids"].shape == (3, 6)
    assert batch["attention_mask"].sum(1).tolist() == [4, 6, 4]
    keys = batch["sentence_key"].tolist()
    assert keys[0] == keys[2] != keys[1]
    assert keys == [sentence_key(r["input_ids"]) for r in rows]


def test_sentence_key_is_the_documented_hash_of_the_int64_ids() -> None:
    # BLAKE2b (8 bytes) of the ids as little-endian int64, read little-endian, shifted right by one bit
    want = int.from_bytes(hashlib.blake2b(struct.pack("<3q", 1, 2, 3), digest_size=8).digest(), "little") >> 1
    assert sentence_key([1, 2, 3]) == want
    # the ids are normalised to int64 whatever their container or integer type
    for same in ((1, 2, 3), np.array([1, 2, 3], dtype=np.int32), torch.tensor([1, 2, 3], dtype=torch.int32)):
        assert sentence_key(same) == want, type(same)
    # the key tells different sequences apart: order, length, a padding zero, a large id
    others = [[3, 2, 1], [1, 2], [1, 2, 3, 0], [1, 2, 3 + 2**32], [101, 2, 102]]
    keys = [sentence_key(x) for x in others]
    assert len({want, *keys}) == len(others) + 1
    assert all(0 <= k < 2**63 for k in [want, *keys])  # fits a non-negative int64 tensor entry


def test_collator_uses_the_stored_key(tiny_bert_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    rows = [{"input_ids": [101, 7, 102], "sentence_key": 5}, {"input_ids": [101, 8, 9, 102]}]
    assert SimCSECollator(tok)(rows)["sentence_key"].tolist() == [5, sentence_key([101, 8, 9, 102])]


def test_single_row_tail() -> None:
    from simcse_weince.text.data import single_row_tail

    assert single_row_tail(33, 16, 1, True) == 1  # 2 full batches + a lone sentence
    assert single_row_tail(34, 16, 1, True) == 0  # a 2-row tail is a valid contrastive batch
    assert single_row_tail(32, 16, 1, True) == 0
    assert single_row_tail(33, 8, 2, True) == 0  # 1 row padded to 1 per process: 2 rows gathered
    assert single_row_tail(33, 8, 2, False) == 1  # ... but each process scores its own row alone
    assert single_row_tail(35, 8, 2, False) == 0  # 3 rows -> 2 per process
