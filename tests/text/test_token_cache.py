"""The on-disk token cache: built once, reused, keyed by files + tokenizer + length, same rows and counts as
the in-memory path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from simcse_weince.losses.duplicates import sentence_key
from simcse_weince.text import token_cache
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import ReadOptions, open_sources
from simcse_weince.text.sources.hub import HubText
from simcse_weince.text.sources.lines import read_sentences
from simcse_weince.text.token_cache import CacheNotBuiltError, prepare_rows
from simcse_weince.text.token_cache import build as cache_build


@pytest.fixture(scope="module")
def tok(tiny_bert_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


@pytest.fixture
def small_file(wiki_sample: Path, tmp_path: Path) -> Path:
    """300 real sentences with two blank lines and a sentence long enough to be truncated at 16 tokens."""
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:300]
    f = tmp_path / "small.txt"
    f.write_text("\n".join([*lines[:10], "", "   ", *lines[10:]]) + "\n", encoding="utf-8")
    return f


@pytest.fixture
def tokenize_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the sentences that reach the tokenising map."""
    calls: list[int] = []
    original = cache_build.tokenize_batch

    def counting(texts, tokenizer, max_length):
        calls.append(len(texts))
        return original(texts, tokenizer, max_length)

    monkeypatch.setattr(cache_build, "tokenize_batch", counting)
    return calls


def prepare(files, tok, tmp_path: Path, max_length: int = 16, **kwargs):
    stats = TextStats()
    sources = open_sources([p for p, _ in files], ReadOptions(), [str(p) for p, drop in files if drop])
    ds = prepare_rows(sources, tok, max_length, stats, cache_root=tmp_path / "cache", **kwargs)
    return ds, stats


def test_built_once_then_reused(
    small_file: Path, tok, tmp_path: Path, tokenize_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    first, s1 = prepare([(small_file, False)], tok, tmp_path)
    assert sum(tokenize_calls) == 300 and not s1.cache_reused
    tokenize_calls.clear()
    with caplog.at_level("INFO", logger="simcse_weince.text.token_cache"):
        second, s2 = prepare([(small_file, False)], tok, tmp_path)
    assert tokenize_calls == [] and s2.cache_reused  # memory-mapped, not tokenised again
    assert "reusing the tokenised training text" in caplog.text
    assert second["input_ids"] == first["input_ids"] and second.column_names == ["input_ids", "sentence_key"]
    assert all(f["filename"].startswith(str(tmp_path / "cache")) for f in second.cache_files)  # on disk
    # the counts of a hit are those of the build
    assert {**s2.to_dict(), "cache_reused": False} == s1.to_dict()
    assert (s1.sentences, s1.blank_lines_skipped) == (300, 2) and s1.truncated > 0
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [Path(s1.cache_dir).name]  # no temporary left


def test_rows_equal_the_in_memory_path_on_real_text(wiki_sample: Path, tok, tmp_path: Path) -> None:
    ds, stats = prepare([(wiki_sample, True)], tok, tmp_path, max_length=32)
    old = TextStats()
    sentences = read_sentences(wiki_sample, True, old)
    ids = tok(sentences, truncation=True, max_length=32)["input_ids"]
    truncated = sum(len(x) > 32 for x in tok(sentences)["input_ids"])  # counted on the untruncated ids
    assert len(ds) == len(ids) == 11_914
    assert ds["input_ids"][:] == ids
    assert ds["sentence_key"][:] == [sentence_key(x) for x in ids]
    assert (stats.truncated, stats.unterminated_lines_dropped, stats.sentences) == (truncated, 1, 11_914)
    assert stats.truncated > 1000


def test_key_follows_max_length_tokenizer_and_file(small_file: Path, tok, tmp_path: Path) -> None:
    _, base = prepare([(small_file, False)], tok, tmp_path)
    _, longer = prepare([(small_file, False)], tok, tmp_path, max_length=24)
    assert longer.cache_dir != base.cache_dir and not longer.cache_reused

    copy_dir = tmp_path / "same-tokenizer-elsewhere"
    tok.save_pretrained(copy_dir)  # the same tokenizer under another name: same cache
    _, same = prepare([(small_file, False)], AutoTokenizer.from_pretrained(copy_dir), tmp_path)
    assert same.cache_dir == base.cache_dir and same.cache_reused
    other = AutoTokenizer.from_pretrained(copy_dir)
    other.add_tokens(["zqxjk"])  # a different vocabulary
    _, changed = prepare([(small_file, False)], other, tmp_path)
    assert changed.cache_dir != base.cache_dir

    _, dropped = prepare([(small_file, True)], tok, tmp_path)  # the drop setting is part of the key
    assert dropped.cache_dir != base.cache_dir

    with small_file.open("a", encoding="utf-8") as f:
        f.write("one more sentence\n")
    ds, edited = prepare([(small_file, False)], tok, tmp_path)
    assert edited.cache_dir != base.cache_dir and not edited.cache_reused and len(ds) == 301
    os.utime(small_file, ns=(0, 0))  # touched, the same bytes: the same cache (keyed by content)
    _, touched = prepare([(small_file, False)], tok, tmp_path)
    assert touched.cache_dir == edited.cache_dir and touched.cache_reused
    text = bytearray(small_file.read_bytes())
    text[len(text) // 2] = ord("x") if text[len(text) // 2] != ord("x") else ord("y")
    small_file.write_bytes(bytes(text))
    os.utime(small_file, ns=(0, 0))  # edited in place: same size, same time, other bytes: another cache
    _, in_place = prepare([(small_file, False)], tok, tmp_path)
    assert in_place.cache_dir != edited.cache_dir and not in_place.cache_reused


def test_a_damaged_cache_is_found_and_built_again(
    small_file: Path, tok, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache's Arrow file cut short after its build: the next run says so and builds it again (it would otherwise
    fail in the memory map, or train on what is left). Fails if the cache's digests are not checked."""
    first, stats = prepare([(small_file, False)], tok, tmp_path)
    (arrow,) = Path(stats.cache_dir).glob("tokens*.arrow")
    arrow.write_bytes(arrow.read_bytes()[:-500])
    with caplog.at_level("WARNING", logger="simcse_weince.text.token_cache"):
        again, rebuilt = prepare([(small_file, False)], tok, tmp_path)
    assert f"the token cache {stats.cache_dir} is damaged ({arrow.name} is" in caplog.text
    assert not rebuilt.cache_reused and again["input_ids"] == first["input_ids"]


def test_several_files_in_order_with_max_rows(small_file: Path, wiki_sample: Path, tok, tmp_path: Path) -> None:
    files = [(small_file, False), (wiki_sample, True)]
    ds, stats = prepare(files, tok, tmp_path, max_rows=305)
    first = read_sentences(small_file) + read_sentences(wiki_sample, True)[:5]
    assert ds["input_ids"][:] == tok(first, truncation=True, max_length=16)["input_ids"]
    assert stats.files == [str(small_file), str(wiki_sample)] and stats.sentences == 300 + 11_914
    full, full_stats = prepare(files, tok, tmp_path)  # the same cache, all rows
    assert full_stats.cache_reused and len(full) == 12_214 and full_stats.truncated > stats.truncated
    assert stats.rows_by_source == full_stats.rows_by_source == [300, 11_914]  # each file's rows, kept with the cache


def test_invalid_utf8_names_file_and_line_and_builds_nothing(tmp_path: Path, tok) -> None:
    f = tmp_path / "bad.txt"
    f.write_bytes(b"ok line\nanother\nbroken \xff\xfe here\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: invalid UTF-8"):
        prepare([(f, False)], tok, tmp_path)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_reader_process_does_not_build(small_file: Path, tok, tmp_path: Path, tokenize_calls: list[int]) -> None:
    with pytest.raises(CacheNotBuiltError, match="the main process did not build it"):
        prepare([(small_file, False)], tok, tmp_path, build=False)
    assert tokenize_calls == []
    built, _ = prepare([(small_file, False)], tok, tmp_path)
    read, stats = prepare([(small_file, False)], tok, tmp_path, build=False)
    assert stats.cache_reused and read["sentence_key"] == built["sentence_key"]


def test_two_tokenising_processes_give_the_same_rows(small_file: Path, tok, tmp_path: Path) -> None:
    one, _ = prepare([(small_file, False)], tok, tmp_path)
    two, _ = prepare([(small_file, False)], tok, tmp_path / "other", num_proc=2)
    assert len(two.cache_files) == 2  # one shard per process, read back in order
    assert two["input_ids"][:] == one["input_ids"][:] and two["sentence_key"][:] == one["sentence_key"][:]
    again, again_stats = prepare([(small_file, False)], tok, tmp_path / "other")
    assert again_stats.cache_reused and again["input_ids"][:] == one["input_ids"][:]


def test_parts_of_a_file_give_the_rows_of_one_part(
    wiki_sample: Path, tok, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, whole_stats = prepare([(wiki_sample, True)], tok, tmp_path)
    monkeypatch.setattr(token_cache, "PART_BYTES", 100_000)  # 13 parts, the last one with the cut-off line
    parts, parts_stats = prepare([(wiki_sample, True)], tok, tmp_path / "parts")
    assert len(parts.cache_files) == 13 and len(whole.cache_files) == 1
    assert parts["input_ids"][:] == whole["input_ids"][:]
    where = {"cache_dir": "", "cache_bytes": 0}  # 13 Arrow files take more room than one
    assert {**parts_stats.to_dict(), **where} == {**whole_stats.to_dict(), **where}
    assert [p.name for p in (tmp_path / "parts" / "cache").iterdir()] == [Path(parts_stats.cache_dir).name]


def test_a_part_of_blank_lines_only(tmp_path: Path, tok, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "gap.txt"
    f.write_text("first sentence\n" + "\n" * 50 + "   \n" * 50 + "last sentence\n", encoding="utf-8")
    monkeypatch.setattr(token_cache, "PART_BYTES", 40)  # parts in the middle hold blank lines only
    ds, stats = prepare([(f, False)], tok, tmp_path)
    assert len(ds.cache_files) == 2 and (stats.sentences, stats.blank_lines_skipped) == (2, 100)
    assert stats.rows_by_source == [2]  # the source's parts add up
    assert ds["input_ids"][:] == tok(["first sentence", "last sentence"], truncation=True, max_length=16)["input_ids"]


UNUSABLE = {  # file content -> what the error says
    "nul": ("\x00\n\x00\x00\n \x00 \n", r"nul\.txt: no sentences: .* of NUL / zero-width characters only"),
    "zero-width": ("\u200b\n\u200c\u200d\n\ufeff\u2060\n", r"zero-width\.txt: no sentences"),
    "emoji": ("\U0001f600\n\U0001f389 \U0001f600\n\U0001f44d\n", r"no usable sentence in \S*emoji\.txt: 300 sentence"),
}


@pytest.mark.parametrize("kind", sorted(UNUSABLE))
def test_a_file_without_a_usable_sentence_is_an_error(kind: str, tok, tmp_path: Path) -> None:
    content, message = UNUSABLE[kind]
    f = tmp_path / f"{kind}.txt"
    f.write_text(content * 100, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as err:
        prepare([(f, False)], tok, tmp_path)
    assert "expected" in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # no cache, no temporary


@pytest.fixture
def mixed_file(wiki_sample: Path, tmp_path: Path) -> Path:
    """5 real sentences, a blank line, 2 invisible lines, 3 sentences without a known token and one with a line
    separator inside."""
    real = wiki_sample.read_text(encoding="utf-8").splitlines()[:5]
    odd = ["", "\x00", "\u200b\u200d", "\U0001f600", "\U0001f600 \U0001f389", "\x01", "two\u2028words"]
    f = tmp_path / "mixed.txt"
    f.write_text("\n".join([*real, *odd]) + "\n", encoding="utf-8")
    return f


def test_a_mixed_file_reports_what_it_skipped(mixed_file: Path, tok, tmp_path: Path, caplog) -> None:
    from simcse_weince.text.corpus import log_corpus

    with caplog.at_level("INFO"):
        ds, stats = prepare([(mixed_file, False)], tok, tmp_path)
        log_corpus(ds, stats, 16)
    counts = (
        stats.sentences,
        stats.blank_lines_skipped,
        stats.invisible_lines_skipped,
        stats.unknown_sentences_skipped,
    )
    assert (*counts, len(ds)) == (6, 1, 2, 3, 6)
    assert ds["input_ids"][-1] == tok("two words")["input_ids"]
    folder = Path(stats.cache_dir)
    assert stats.cache_bytes == sum(p.stat().st_size for p in folder.iterdir()) > 0
    text = stats.to_dict()  # results.json's "text" section
    assert text["invisible_lines_skipped"] == 2 and text["unknown_sentences_skipped"] == 3
    assert text["cache_bytes"] == stats.cache_bytes
    info = [r.getMessage() for r in caplog.records]
    assert any(
        "6 sentences from" in m and "1 blank lines, 2 lines of invisible characters only" in m
        and "3 sentences with no known token skipped" in m and f"cache {folder} (built, " in m
        for m in info
    ), info  # fmt: skip
    assert any("skipped 3 sentence(s) with no token known to the tokenizer" in m for m in info)
    assert any(f"token caches in {folder.parent}: 1," in m for m in info)  # where they are, how to remove them
    _, again = prepare([(mixed_file, False)], tok, tmp_path)
    assert again.cache_reused and {**again.to_dict(), "cache_reused": False} == stats.to_dict()


def test_an_unusable_file_among_others_is_counted(mixed_file: Path, tok, tmp_path: Path) -> None:
    emoji = tmp_path / "emoji.txt"
    emoji.write_text("\U0001f600\n" * 10, encoding="utf-8")
    ds, stats = prepare([(emoji, False), (mixed_file, False)], tok, tmp_path)
    assert (len(ds), stats.unknown_sentences_skipped, stats.files) == (6, 13, [str(emoji), str(mixed_file)])
    assert stats.rows_by_source == [0, 6]  # the rows each file gave, after the sentences of no known token


def test_hub_text_is_read_and_counted_as_a_file(mixed_file: Path, tok, tmp_path: Path) -> None:
    # the Hub path, through the datasets "text" builder on a local file (offline)
    file_ds, file_stats = prepare([(mixed_file, False)], tok, tmp_path)
    hub_stats = TextStats()
    hub = HubText("text", str(mixed_file), ReadOptions())
    hub_ds = prepare_rows([hub], tok, 16, hub_stats, cache_root=tmp_path / "hub")
    assert hub_ds["input_ids"][:] == file_ds["input_ids"][:]
    same = ("sentences", "blank_lines_skipped", "invisible_lines_skipped", "unknown_sentences_skipped")
    assert {k: getattr(hub_stats, k) for k in same} == {k: getattr(file_stats, k) for k in same}
