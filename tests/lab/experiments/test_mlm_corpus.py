"""The MLM/SimCSE corpus of issue 44 holds no sentence of any evaluation split, keeps every training source, and
says what it did in its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.evaluation.sts_data import normalise_sentence
from weince_lab.experiments.mlm_corpus import EVALUATION_SPLITS, build_corpus, evaluation_splits, match_key


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
