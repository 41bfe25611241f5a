"""The MLM/SimCSE corpus of issue 44 holds no sentence of any evaluation split, keeps every training source, and
says what it did in its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.evaluation.sts_data import normalise_sentence
from weince_lab.experiments.mlm_corpus import (
    EVALUATION_SPLITS,
    build_corpus,
    case_and_whitespace_key,
    evaluation_keys,
    evaluation_splits,
    match_key,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("mlm_corpus")
    return out, build_corpus(out, shared_data, shared_data / "senteval" / "downstream")


def test_no_evaluation_sentence_in_the_corpus(corpus, shared_data: Path) -> None:
    out, manifest = corpus
    lines = (out / "corpus.txt").read_text(encoding="utf-8").splitlines()
    exact = {normalise_sentence(s) for s in lines}
    keys = {match_key(s) for s in lines}
    splits = evaluation_splits(shared_data / "senteval" / "downstream")
    assert set(splits) == set(EVALUATION_SPLITS)
    assert {"STS12", "STS16", "STS-B dev", "STS-B test", "SICK trial", "SICK test", "SST-2 dev", "SST-2 test",
            "TREC test", "MRPC test", "MR", "CR", "SUBJ", "MPQA"} <= set(splits)  # fmt: skip
    for name, read in splits.items():
        sentences = [s for s in read() if s.strip()]
        assert len(sentences) > 100, name
        leaked = [s for s in sentences if normalise_sentence(s) in exact or match_key(s) in keys]
        assert not leaked, f"{len(leaked)} sentences of {name} in the corpus, e.g. {leaked[:3]}"
    # the exclusion did work on this data: the training splits share sentences with the evaluation splits
    assert manifest["sources"]["STS-B train"]["in_an_evaluation_split"] > 5000
    assert manifest["sources"]["SICK train"]["in_an_evaluation_split"] > 1000


def test_corpus_sources_counts_and_no_repeats(corpus) -> None:
    out, manifest = corpus
    lines = (out / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == manifest["sentences"] == sum(c["kept"] for c in manifest["sources"].values())
    assert len({match_key(s) for s in lines}) == len(lines)  # no sentence twice
    assert all(s == normalise_sentence(s) and s for s in lines)
    assert list(manifest["sources"]) == ["wiki1m_sample", "wikipedia_en_gensim_sample", "STS-B train", "SICK train",
                                         "SST-2 train", "TREC train", "MRPC train"]  # fmt: skip
    for name, c in manifest["sources"].items():
        assert c["kept"] > 100 and c["read"] == c["kept"] + c["in_an_evaluation_split"] + c["repeated"], name
    assert manifest["sources"]["wiki1m_sample"]["read"] == 11914  # its truncated last line dropped
    assert manifest["sources"]["wikipedia_en_gensim_sample"]["read"] == 17059
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert set(manifest["excluded_splits"]) == set(EVALUATION_SPLITS)


VARIANTS = [  # (a sentence as an evaluation split may hold it, as a training source may hold it)
    ("a small boy is playing with a dog .", "A small boy is playing with a dog"),  # SICK's copies: case, final period
    ("it 's a `` great '' film", 'It\'s a "great" film.'),  # tokenised PTB quotes against plain text
    ("“Don’t stop,” she said.", '"Don\'t stop," she said'),  # curly against straight quotes
    ("The  cat sat -- on the mat!", "the cat sat on the mat"),  # whitespace, dashes, an exclamation mark
    ("ＡＢＣ news reported 3 deaths", "ABC News reported 3 deaths."),  # full-width letters (NFKC)
]


@pytest.mark.parametrize(("evaluated", "elsewhere"), VARIANTS)
def test_the_key_ignores_case_whitespace_punctuation_and_quote_style(evaluated: str, elsewhere: str) -> None:
    assert match_key(evaluated) == match_key(elsewhere)
    assert case_and_whitespace_key(evaluated) != case_and_whitespace_key(elsewhere)  # the earlier key missed it


def test_the_key_keeps_sentences_apart_that_differ_in_a_word_or_a_number() -> None:
    assert match_key("the man is playing a guitar") != match_key("the man is playing a violin")
    assert match_key("3 deaths were reported") != match_key("4 deaths were reported")
    assert match_key("...") == match_key("!") == ""  # punctuation only: one key, as one sentence would be


def test_variants_of_real_evaluation_sentences_are_excluded(shared_data: Path) -> None:
    """Evaluation sentences re-punctuated as another source would write them (final period dropped or added,
    quotes made curly, case changed) all have a key of the excluded set; most escaped the earlier key."""
    senteval = shared_data / "senteval" / "downstream"
    keys, _ = evaluation_keys(senteval)
    loose, _ = evaluation_keys(senteval, case_and_whitespace_key)
    sick = [s for s in evaluation_splits(senteval)["SICK test"]() if s.strip()][:200]
    variants = [s.rstrip(" .") if s.rstrip().endswith(".") else s + "." for s in sick]
    variants += ["“" + s.upper().replace("'", "’") + "”" for s in sick]
    assert all(match_key(v) in keys for v in variants)
    escaped = sum(case_and_whitespace_key(v) not in loose for v in variants)
    assert escaped > len(variants) / 2


def test_the_earlier_key_rebuilds_the_stored_runs_corpus(shared_data: Path, tmp_path: Path) -> None:
    """``--match case_and_whitespace`` writes the corpus the stored MLM runs trained on (its digest in their
    results.json); the strict key drops the sentences that came through in another punctuation."""
    stored = json.loads((REPO / "experiments" / "results" / "mlm_mini" / "results.json").read_text())["corpus"]
    manifest = build_corpus(tmp_path, shared_data, shared_data / "senteval" / "downstream", "case_and_whitespace")
    assert (manifest["digest"], manifest["sentences"]) == (stored["digest"], stored["sentences"]) == (
        "b66eae011566ee371ccf6eb68fbbb4d6", 103_057)  # fmt: skip
    assert manifest["match_key"] == "case_and_whitespace"
