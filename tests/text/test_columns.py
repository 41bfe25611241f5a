"""Column files (CSV, TSV, JSON Lines, Parquet) through the token cache: rows, the default columns, bad rows as
one-line errors or counted skips, parts, and the one-column rows equal to a text file's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Features, List, Value
from transformers import AutoTokenizer

from simcse_weince.losses.duplicates import ABSENT_KEY, sentence_key
from simcse_weince.text import token_cache
from simcse_weince.text.arguments import DataArguments
from simcse_weince.text.columns import choose_columns, normalise_cell
from simcse_weince.text.data import tokenize_columns
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import ReadOptions, open_sources
from simcse_weince.text.sources.hub import HubColumns
from simcse_weince.text.token_cache import prepare_rows
from simcse_weince.text.token_cache.store import load_cache

NLI = [  # (sent0, sent1, hard_neg) as in SimCSE's nli_for_simcse.csv, with what a CSV must quote
    ("A man, in a hat, sleeps.", "Someone is asleep.", "A man is running."),
    ('He said "hi" twice.', "Someone\nspoke.", "Nobody said a word."),
    ("Two dogs play in the snow.", "Animals are outside.", "The dogs sleep, indoors."),
    ("A child eats an apple.", "A kid is eating.", "A child is crying."),
]
NLI_CSV = (  # quoted commas, a doubled quote, a line break inside quotes, CRLF line ends, a BOM
    "\ufeffsent0,sent1,hard_neg\r\n"
    '"A man, in a hat, sleeps.",Someone is asleep.,A man is running.\r\n'
    '"He said ""hi"" twice.","Someone\r\nspoke.",Nobody said a word.\r\n'
    'Two dogs play in the snow.,Animals are outside.,"The dogs sleep, indoors."\r\n'
    "A child eats an apple.,A kid is eating.,A child is crying.\r\n"
)


@pytest.fixture(scope="module")
def tok(tiny_bert_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def prepare(files, tok, tmp_path: Path, columns=None, max_length: int = 16, **kwargs):
    stats = TextStats()
    files = [(f, False) if isinstance(f, Path) else f for f in files]
    options = ReadOptions.of(columns, **kwargs)
    sources = open_sources([p for p, _ in files], options, [str(p) for p, drop in files if drop])
    ds = prepare_rows(sources, tok, max_length, stats, cache_root=tmp_path / "cache")
    return ds, sources[0].width, stats


def prepare_hub(builder: str, path: Path, tok, tmp_path: Path, stats: TextStats, **kwargs):
    source = HubColumns(builder, str(path), ReadOptions.of(None, **kwargs))
    return prepare_rows([source], tok, 16, stats, cache_root=tmp_path / "hub"), source.width


def ids_of(tok, texts, max_length: int = 16) -> list[list[int]]:
    return tok([normalise_cell(t) for t in texts], truncation=True, max_length=max_length)["input_ids"]


def assert_rows(ds, tok, rows, max_length: int = 16) -> None:
    """The dataset holds ``rows`` (tuples of texts), tokenised, with the keys of their ids."""
    assert len(ds) == len(rows)
    for j, names in enumerate([("input_ids", "sentence_key"), ("input_ids_1", "sentence_key_1")][: len(rows[0])]):
        ids = ids_of(tok, [r[j] for r in rows], max_length)
        assert ds[names[0]][:] == ids, names
        assert ds[names[1]][:] == [sentence_key(x) for x in ids]
    for j in range(2, len(rows[0])):
        assert ds[f"input_ids_{j}"][:] == ids_of(tok, [r[j] for r in rows], max_length)


def test_simcse_csv_loads_as_rows(tok, tmp_path: Path) -> None:
    f = tmp_path / "nli_for_simcse.csv"
    f.write_bytes(NLI_CSV.encode("utf-8"))
    ds, n, stats = prepare([f], tok, tmp_path)  # the default columns: sent0, sent1, hard_neg
    assert n == 3 and stats.text_columns == ["sent0", "sent1", "hard_neg"]
    want = ["input_ids", "sentence_key", "input_ids_1", "sentence_key_1", "input_ids_2", "sentence_key_2"]
    assert ds.column_names == want
    assert_rows(ds, tok, NLI)
    assert tok.decode(ds["input_ids_1"][1], skip_special_tokens=True) == "someone spoke."  # the break: a space
    assert (stats.sentences, stats.bad_rows_skipped, stats.files) == (4, 0, [str(f)])
    again, n2, hit = prepare([f], tok, tmp_path)
    assert hit.cache_reused and n2 == 3 and again["input_ids_2"][:] == ds["input_ids_2"][:]
    assert {**hit.to_dict(), "cache_reused": False} == stats.to_dict()
    pairs, n_pairs, pair_stats = prepare([f], tok, tmp_path, columns=["sent1", "sent0"])  # chosen, in that order
    assert n_pairs == 2 and pair_stats.cache_dir != stats.cache_dir  # the columns are part of the key
    assert_rows(pairs, tok, [(b, a) for a, b, _ in NLI])


def test_sick_tsv_pairs(tok, tmp_path: Path, shared_data: Path) -> None:
    sick = shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt"
    f = tmp_path / "sick.tsv"
    f.write_bytes(sick.read_bytes())
    lines = sick.read_text(encoding="utf-8").splitlines()[1:]
    rows = [tuple(line.split("\t")[1:3]) for line in lines]
    with pytest.raises(ValueError, match=r"sick\.tsv:1: the header: which columns to train on\? The columns are "
                                         r"'pair_ID', 'sentence_A', 'sentence_B', 'relatedness_score', "
                                         r"'entailment_judgment'"):  # fmt: skip
        prepare([f], tok, tmp_path)
    ds, n, stats = prepare([f], tok, tmp_path, columns=["sentence_A", "sentence_B"])
    assert n == 2 and len(ds) == stats.sentences == len(rows) == 4500
    assert_rows(ds, tok, rows)


def test_jsonl_and_json(tok, tmp_path: Path) -> None:
    objects = [{"id": i, "sent0": a, "sent1": b, "hard_neg": c, "meta": {"x": [1]}} for i, (a, b, c) in enumerate(NLI)]
    text = "\n".join(json.dumps(o, ensure_ascii=i % 2 == 0) for i, o in enumerate(objects)) + "\n\n"
    for name in ("nli.jsonl", "nli.json"):
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        ds, n, stats = prepare([f], tok, tmp_path)
        assert n == 3 and stats.blank_lines_skipped == 1
        assert_rows(ds, tok, NLI)
    single = tmp_path / "one.jsonl"
    texts = [a for a, _, _ in NLI] + ["two\fwords\u2028here"]  # a form feed would join two words: read as a space
    single.write_text("".join(json.dumps({"text": a}) + "\n" for a in texts), encoding="utf-8")
    ds, n, stats = prepare([single], tok, tmp_path)  # one key: its only column, sentences
    assert n == 1 and stats.text_columns == ["text"] and ds.column_names == ["input_ids", "sentence_key"]
    assert_rows(ds, tok, [(a,) for a in texts])
    assert ds["input_ids"][-1] == tok("two words here")["input_ids"]


def test_parquet_by_parts(tok, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wiki_sample: Path) -> None:
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:250]
    rows = [(lines[i], lines[i + 1], lines[i + 2]) for i in range(0, 249, 3)]  # 83 triplets
    table = pa.table({"label": list(range(len(rows))), **{c: [r[j] for r in rows]
                      for j, c in enumerate(("sent0", "sent1", "hard_neg"))}})  # fmt: skip
    f = tmp_path / "nli.parquet"
    pq.write_table(table, f, row_group_size=20)
    whole, n, stats = prepare([f], tok, tmp_path)
    assert n == 3 and len(whole.cache_files) == 1
    assert_rows(whole, tok, rows)
    monkeypatch.setattr(token_cache, "PART_ROWS", 15)  # parts across row groups: 6 parts
    parts, _, part_stats = prepare([f], tok, tmp_path / "parts")
    assert len(parts.cache_files) == 6 and parts.to_dict() == whole.to_dict()
    assert part_stats.sentences == stats.sentences == 83
    typed = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"sent0": ["a"], "sent1": [1]}), typed)
    with pytest.raises(ValueError, match=r"typed\.parquet: the column 'sent1' holds int64; expected text"):
        prepare([typed], tok, tmp_path)


def test_csv_parts_start_at_records(tok, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # records with line breaks inside quotes: a part cut at a line start inside a record would misread it
    f = tmp_path / "multi.csv"
    rows = [(f"anchor {i}\nsecond line, {i}", f"positive {i}") for i in range(60)]
    with f.open("w", encoding="utf-8", newline="") as out:
        import csv

        writer = csv.writer(out)
        writer.writerow(["sent0", "sent1"])
        writer.writerows(rows)
    whole, _, stats = prepare([f], tok, tmp_path)
    monkeypatch.setattr(token_cache, "PART_BYTES", 50)
    parts, _, part_stats = prepare([f], tok, tmp_path / "parts")
    assert len(parts.cache_files) > 10 and parts.to_dict() == whole.to_dict()
    assert_rows(parts, tok, rows)
    same = ("sentences", "bad_rows_skipped", "blank_lines_skipped", "truncated")
    assert {k: getattr(part_stats, k) for k in same} == {k: getattr(stats, k) for k in same}


def test_default_columns() -> None:
    assert choose_columns(["hard_neg", "sent1", "x", "sent0"], None, "f") == ["sent0", "sent1", "hard_neg"]
    assert choose_columns(["sent1", "label", "sent0"], None, "f") == ["sent0", "sent1"]
    assert choose_columns(["sentence"], None, "f") == ["sentence"]
    assert choose_columns(["a", "b", "c"], ["c", "a"], "f") == ["c", "a"]
    with pytest.raises(ValueError, match=r"^f: which columns to train on\? The columns are 'sent0', 'text', "
                                         r"without SimCSE's sent0 and sent1; set text_columns"):  # fmt: skip
        choose_columns(["sent0", "text"], None, "f")
    with pytest.raises(ValueError, match=r"^f: no column 'hard_neg' \(text_columns\); the columns are 'a', 'b'$"):
        choose_columns(["a", "b"], ["a", "hard_neg"], "f")
    with pytest.raises(ValueError, match=r"^f: the column 'a' is there twice"):
        choose_columns(["a", "b", "a"], ["a", "b"], "f")


HEADER = "sent0,sent1,hard_neg\n"
BAD_ROWS = {  # name: (file name, content, columns, the error's start after the path, what it says next)
    "fewer fields": ("a.csv", HEADER + "a,b,c\nd,e\n", None, ":3: 2 field", "where the header has 3"),
    "more fields": ("a.csv", HEADER + "a,b,c\nd,e,f,g\n", None, ":3: 4 field", "where the header has 3"),
    "empty cell": ("a.csv", HEADER + "a,b,c\nd,,f\n", None, ":3: 'sent1' is empty", "expected UTF-8 CSV"),
    "invisible cell": ("a.csv", HEADER + "a,b,c\nd,e,\u200b \x00\n", None, ":3: 'hard_neg' is empty", "zero-width"),
    "quoted blank": ("a.tsv", 'x\ty\n""\tb\na\tb\n', ["x", "y"], ":2: 'x' is empty", "expected UTF-8 TSV"),
    "header": ("a.csv", "s0,s1\na,b\n", ["sent0"], ":1: the header: no column 'sent0'", "the columns are 's0', 's1'"),
    "undecodable": ("a.csv", b"sent0,sent1\na,b\nc,d \xff\n", None, ":3: invalid UTF-8 at byte 20", "expected UTF-8"),
    "not json": ("a.jsonl", '{"sent0": "a"}\n{"sent0": "b",}\n', ["sent0"], ":2: not valid JSON", "one JSON object"),
    "json array": ("a.json", '[{"sent0": "a"}, {"sent0": "b"}]\n', ["sent0"], ":1: a JSON array, not an object", ""),
    "json string": ("a.jsonl", '{"sent0": "a"}\n"b"\n', ["sent0"], ":2: a JSON string, not an object", ""),
    "json missing": ("a.jsonl", '{"sent0": "a", "sent1": "b"}\n{"sent0": "c"}\n', None, ":2: no 'sent1'", "strings"),
    "json null": ("a.jsonl", '{"sent0": "a"}\n{"sent0": null}\n', None, ":2: no value in 'sent0'", "null"),
    "json number": ("a.jsonl", '{"sent0": "a"}\n\n{"sent0": 7}\n', None, ":3: 'sent0' holds a number", "text"),
    "unterminated quote": ("a.csv", 'sent0\na\n"b\n', None, ":3: unreadable CSV record", "in double quotes"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_bad_row_is_a_one_line_error_naming_file_and_line(case: str, tok, tmp_path: Path) -> None:
    name, content, columns, start, then = BAD_ROWS[case]
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ValueError) as err:
        prepare([f], tok, tmp_path, columns=columns)
    message = str(err.value)
    assert message.startswith(f"{f}{start}") and then in message and "\n" not in message, message
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_parquet_null_names_the_row(tok, tmp_path: Path) -> None:
    f = tmp_path / "n.parquet"
    pq.write_table(pa.table({"sent0": ["a", "b", "c"], "sent1": ["d", None, "f"]}), f)
    with pytest.raises(ValueError, match=rf"^{f}: row 2: no value in 'sent1' \(missing or null\); expected text"):
        prepare([f], tok, tmp_path)
    ds, _, stats = prepare([f], tok, tmp_path, skip_bad_rows=True)
    assert (len(ds), stats.bad_rows_skipped) == (2, 1)
    with pytest.raises(ValueError, match=r"n\.parquet: row 2: "):  # not the cache of the skipping run
        prepare([f], tok, tmp_path)


def test_skipped_bad_rows_are_counted_and_logged(tok, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "mixed.csv"
    good = [("a cat sits.", "a cat is sitting.", "a dog runs."), ("he sings.", "a man sings.", "nobody sings.")]
    lines = [HEADER.strip(), ",".join(good[0]), "x,y", "d,,f", "", ",".join(good[1]), "p,q,\u200b", "r,s,t,u"]
    f.write_bytes(("\n".join(lines) + "\n").encode() + b"bad \xfe,x,y\n")
    with pytest.raises(ValueError, match=r"mixed\.csv:3: 2 field"):
        prepare([f], tok, tmp_path)
    with caplog.at_level("WARNING", logger="simcse_weince.text.columns"):
        ds, n, stats = prepare([f], tok, tmp_path, skip_bad_rows=True)
    assert n == 3 and (stats.sentences, stats.bad_rows_skipped, stats.blank_lines_skipped) == (2, 5, 1)
    assert_rows(ds, tok, good)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("skipping a bad row (skip_bad_rows)" in m for m in messages) == 5  # LOGGED_BAD_ROWS
    assert any(f"{f}:9: invalid UTF-8" in m for m in messages)
    assert any("5 bad row(s) skipped (skip_bad_rows), the first 5 logged above; 2 row(s) kept" in m for m in messages)
    _, _, hit = prepare([f], tok, tmp_path, skip_bad_rows=True)
    assert hit.cache_reused and hit.bad_rows_skipped == 5  # the count comes back with the cache
    only_bad = tmp_path / "bad.csv"
    only_bad.write_text("sent0,sent1\na,\n,b\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv: no rows: 0 blank line\(s\), 2 bad row\(s\) skipped"):
        prepare([only_bad], tok, tmp_path, skip_bad_rows=True)


def test_one_column_rows_equal_a_text_files(tok, tmp_path: Path, wiki_sample: Path) -> None:
    sentences = wiki_sample.read_text(encoding="utf-8").splitlines()[:400]
    txt = tmp_path / "s.txt"
    txt.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    csv_file = tmp_path / "s.csv"
    csv_file.write_text("text\n" + "".join('"' + s.replace('"', '""') + '"\n' for s in sentences), encoding="utf-8")
    text_stats = TextStats()
    prepare_rows(open_sources([txt], ReadOptions()), tok, 16, text_stats, cache_root=tmp_path / "cache")
    _, n, column_stats = prepare([csv_file], tok, tmp_path)
    assert n == 1 and column_stats.text_columns == ["text"]
    text_rows, _ = load_cache(Path(text_stats.cache_dir))
    column_rows, _ = load_cache(Path(column_stats.cache_dir))
    one_column = {"input_ids": List(Value("int32")), "sentence_key": Value("int64"), "truncated": Value("bool")}
    assert column_rows.features == text_rows.features == Features(one_column)
    assert column_rows.data.table.equals(text_rows.data.table) and len(text_rows) == 400
    _, n_txt, same = prepare([txt], tok, tmp_path)  # text files through the column entry: the text cache itself
    assert n_txt == 1 and same.cache_reused and same.cache_dir == text_stats.cache_dir


def test_files_must_give_the_same_number_of_columns(tok, tmp_path: Path) -> None:
    pairs, txt = tmp_path / "p.csv", tmp_path / "t.txt"
    pairs.write_text("sent0,sent1\na,b\n", encoding="utf-8")
    txt.write_text("one\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"p\.csv gives 2 text column\(s\) \(sent0, sent1\), \S*t\.txt 1 \(one per"):
        prepare([pairs, txt], tok, tmp_path)
    with pytest.raises(ValueError, match=r"t\.txt is read as lines, one sentence each, without columns"):
        prepare([txt], tok, tmp_path, columns=["a", "b"])


def test_an_unterminated_last_line_is_dropped_on_request(tok, tmp_path: Path) -> None:
    f = tmp_path / "cut.jsonl"
    f.write_text('{"sent0": "a cat", "sent1": "a dog"}\n{"sent0": "a b', encoding="utf-8")
    with pytest.raises(ValueError, match=r"cut\.jsonl:2: not valid JSON"):
        prepare([f], tok, tmp_path)
    ds, _, stats = prepare([(f, True)], tok, tmp_path)
    assert (len(ds), stats.unterminated_lines_dropped) == (1, 1)


def test_a_row_with_a_cell_of_no_known_token_is_dropped(tiny_bert_dir: Path, tok, tmp_path: Path) -> None:
    cols = tokenize_columns([["a cat", "\U0001f600", "a dog"], ["one", "two", "\U0001f389"]], tok, 3)
    assert cols["input_ids"] == [tok("a cat", truncation=True, max_length=3)["input_ids"]]
    assert cols["input_ids_1"] == [tok("one")["input_ids"]] and cols["truncated"] == [True]
    assert cols["truncated_1"] == [False] and cols["sentence_key_1"] == [sentence_key(tok("one")["input_ids"])]
    f = tmp_path / "emoji.csv"
    f.write_text("sent0,sent1\n\U0001f600,b\nc,\U0001f600\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no usable row in \S*emoji\.csv: 2 row\(s\) read, none with a token"):
        prepare([f], tok, tmp_path)


def test_hub_columns_through_a_local_builder(tok, tmp_path: Path) -> None:
    # the Hub path, through the datasets "csv" builder on a local file (offline)
    f = tmp_path / "nli.csv"
    f.write_bytes(NLI_CSV.encode("utf-8"))
    stats = TextStats()
    ds, n = prepare_hub("csv", f, tok, tmp_path, stats)
    assert n == 3 and stats.text_columns == ["sent0", "sent1", "hard_neg"]
    assert_rows(ds, tok, NLI)
    gap = tmp_path / "gap.csv"
    gap.write_text("sent0,sent1\na,b\nc,\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^hub:csv/{re.escape(str(gap))}: row 2: no value in 'sent1'"):
        prepare_hub("csv", gap, tok, tmp_path, TextStats())


def test_data_arguments_columns(tmp_path: Path) -> None:
    assert DataArguments(train_files="a.csv", text_columns="text").text_columns == ["text"]
    assert DataArguments(train_files=["a.csv", "b.parquet", "c.txt"]).text_columns is None  # the default choice
    DataArguments(train_files=["c.txt"], text_columns=["text"])  # one column: a text file's lines
    for bad, message in [([], "names no column"), (["a", "a"], "'a' more than once"), (["a", ""], "non-empty")]:
        with pytest.raises(ValueError, match=message):
            DataArguments(train_files=["a.csv"], text_columns=bad)
    # a comma-joined name is the list, as a user writes it on one line (--text_columns sent0,sent1)
    assert DataArguments(train_files="a.csv", text_columns=["sent0,sent1"]).text_columns == ["sent0", "sent1"]
    assert DataArguments(train_files="a.csv", text_columns="a, b,c").text_columns == ["a", "b", "c"]
    assert DataArguments(train_files="a.csv", text_columns=["a,b", "c"]).text_columns == ["a", "b", "c"]
    for bad, message in [("a,", "non-empty"), (["a,,b"], "non-empty"), ("a,b,a", "'a' more than once")]:
        with pytest.raises(ValueError, match=message):
            DataArguments(train_files=["a.csv"], text_columns=bad)
    with pytest.raises(ValueError, match=r"c\.txt is read as lines, one sentence each, without columns, but "):
        DataArguments(train_files=["a.csv", "c.txt"], text_columns=["sent0", "sent1"])
    with pytest.raises(ValueError, match=r"a\.csv\.gz is a compressed CSV file: decompress it first"):
        DataArguments(train_files=["a.csv.gz"])


def test_pairs_and_triplets_together(tok, tmp_path: Path) -> None:
    """allow_missing_negatives: a file without the negative column and empty or null negatives are absent
    negatives (ids [], ABSENT_KEY); the anchor and positive stay required; without the setting, the error says
    how to get there."""
    triplets = tmp_path / "triplets.csv"
    triplets.write_bytes(NLI_CSV.encode("utf-8"))
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent1,sent0\nA kid runs.,A child is running.\nNobody.,A crowd.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs\.csv:1: the header: no column 'hard_neg' \(text_columns\); .* "
                                         r"together with triplets, set allow_missing_negatives$"):  # fmt: skip
        prepare([triplets, pairs], tok, tmp_path, columns=["sent0", "sent1", "hard_neg"])
    ds, n, stats = prepare([triplets, pairs], tok, tmp_path, allow_missing_negatives=True)  # SimCSE's 3 columns
    assert n == 3 and stats.text_columns == ["sent0", "sent1", "hard_neg"] and stats.rows_by_negatives == [2, 4]
    assert_rows(ds.select(range(4)), tok, NLI)
    assert ds["input_ids"][4:] == ids_of(tok, ["A child is running.", "A crowd."])  # by name, not position
    assert ds["input_ids_2"][4:] == [[], []] and ds["sentence_key_2"][4:] == [ABSENT_KEY, ABSENT_KEY]
    _, _, plain_stats = prepare([triplets], tok, tmp_path)
    assert plain_stats.cache_dir != stats.cache_dir  # the setting is part of the cache key

    gaps = tmp_path / "gaps.jsonl"
    gaps.write_text(
        '{"sent0": "a cat", "sent1": "a kitten", "hard_neg": "a dog"}\n{"sent0": "a car", "sent1": "a vehicle"}\n'
        '{"sent0": "the sun", "sent1": "a star", "hard_neg": null}\n{"sent0": "rain", "sent1": "water", '
        '"hard_neg": " \\u200b"}\n',
        encoding="utf-8",
    )
    ds, _, stats = prepare([gaps], tok, tmp_path, allow_missing_negatives=True)
    assert stats.rows_by_negatives == [3, 1] and ds["input_ids_2"][1:] == [[], [], []]
    assert ds["input_ids_2"][0] == ids_of(tok, ["a dog"])[0]
    table = pa.table({"sent0": ["a cat", "a car"], "sent1": ["a kitten", "a vehicle"]})
    pq.write_table(table, tmp_path / "pairs.parquet")
    ds, _, stats = prepare([tmp_path / "pairs.parquet", gaps], tok, tmp_path, allow_missing_negatives=True)
    assert stats.rows_by_negatives == [5, 1] and ds["sentence_key_2"][:2] == [ABSENT_KEY] * 2
    # a hard-negative column that no file has is a misspelt name, not a run of pairs
    misspelt = r"no training file has the hard-negative column 'hardneg' \(\S*pairs\.csv: 'sent1', 'sent0'; "
    with pytest.raises(ValueError, match=misspelt + r"\S*triplets\.csv: 'sent0', 'sent1', 'hard_neg'\)"):
        prepare([pairs, triplets], tok, tmp_path, columns=["sent0", "sent1", "hardneg"], allow_missing_negatives=True)
    with pytest.raises(ValueError, match=r"no training file has the hard-negative column 'hard_neg' \(\S*pairs\.parq"):
        prepare([tmp_path / "pairs.parquet"], tok, tmp_path, allow_missing_negatives=True)
    keyed = tmp_path / "keyed.jsonl"
    keyed.write_text('{"anchor": "a", "positive": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"keyed\.jsonl:1: the first object: no column 'sent0', 'sent1' \(SimCSE's "
                                         r"columns, the default with allow_missing_negatives\)"):  # fmt: skip
        prepare([keyed], tok, tmp_path, allow_missing_negatives=True)
    # the anchor and the positive stay required
    no_positive = tmp_path / "no_positive.jsonl"
    no_positive.write_text('{"sent0": "a", "sent1": "b"}\n{"sent0": "a cat", "hard_neg": "a dog"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"no_positive\.jsonl:2: no 'sent1' in the object; expected JSON Lines: .* "
                                         r"text \(strings\) in sent0, sent1 \(hard_neg may be empty\)$"):  # fmt: skip
        prepare([no_positive], tok, tmp_path, allow_missing_negatives=True)
    empty_anchor = tmp_path / "empty_anchor.csv"
    empty_anchor.write_text("sent0,sent1,hard_neg\n,b,c\na cat,a kitten,\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty_anchor\.csv:2: 'sent0' is empty"):
        prepare([empty_anchor], tok, tmp_path, allow_missing_negatives=True)
    ds, _, stats = prepare([empty_anchor], tok, tmp_path, allow_missing_negatives=True, skip_bad_rows=True)
    assert (len(ds), stats.bad_rows_skipped, stats.rows_by_negatives) == (1, 1, [1, 0])


def test_absent_negatives_through_the_hub_path(tok, tmp_path: Path) -> None:
    gaps = tmp_path / "gaps.csv"
    gaps.write_text("sent0,sent1,hard_neg\na cat,a kitten,a dog\na car,a vehicle,\n", encoding="utf-8")
    stats = TextStats()
    ds, n = prepare_hub("csv", gaps, tok, tmp_path, stats, allow_missing_negatives=True)
    assert n == 3 and stats.rows_by_negatives == [1, 1] and ds["sentence_key_2"][1] == ABSENT_KEY
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\na cat,a kitten\na car,a vehicle\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^hub:csv/{re.escape(str(pairs))}: no hard-negative column 'hard_neg'"):
        prepare_hub("csv", pairs, tok, tmp_path, TextStats(), allow_missing_negatives=True)


def test_tokenize_columns_keeps_absent_negatives_apart(tok) -> None:
    cols = tokenize_columns([["a cat", "a car"], ["a kitten", "a vehicle"], ["", "a bike"]], tok, 16)
    assert cols["input_ids_2"] == [[], tok("a bike")["input_ids"]]
    assert cols["sentence_key_2"] == [ABSENT_KEY, sentence_key(tok("a bike")["input_ids"])]
    assert cols["truncated_2"] == [False, False] and len(cols["input_ids"]) == 2  # an absent negative drops nothing


def test_allow_missing_negatives_arguments() -> None:
    DataArguments(train_files=["a.csv", "b.jsonl"], allow_missing_negatives=True)
    with pytest.raises(ValueError, match=r"c\.txt is read as lines, one sentence each, but allow_missing_negatives"):
        DataArguments(train_files=["a.csv", "c.txt"], allow_missing_negatives=True)
    with pytest.raises(ValueError, match=r"allow_missing_negatives: text_columns \['a', 'b'\] has no hard-negative"):
        DataArguments(train_files=["a.csv"], text_columns=["a", "b"], allow_missing_negatives=True)
    with pytest.raises(ValueError, match=r"the Hub file wiki1m_for_simcse\.txt is read as lines"):
        DataArguments(allow_missing_negatives=True)  # the default Hub file
    DataArguments(allow_missing_negatives=True, hub_data_file="nli_for_simcse.csv")


def test_a_corpus_whose_rows_hold_no_hard_negative_is_refused(tok, tmp_path: Path) -> None:
    from simcse_weince.text.corpus import load_training_rows

    f = tmp_path / "empty_negatives.csv"
    f.write_text("sent0,sent1,hard_neg\na cat,a kitten,\na car,a vehicle,\n", encoding="utf-8")
    data = DataArguments(train_files=[str(f)], allow_missing_negatives=True, data_cache_dir=str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"no row of \S*empty_negatives\.csv has a hard negative \(hard_neg empty or "
                                         r"missing in every row\)"):  # fmt: skip
        load_training_rows(data, tok, TextStats())
