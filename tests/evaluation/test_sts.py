"""STS loaders (pair counts, skipped pairs, bad input), aggregation, and agreement with sentence-transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from simcse_weince.evaluation.sts import aggregate, cosine_scores, evaluate_sts, score_task
from simcse_weince.evaluation.sts_data import STSSubset, STSTask, load_sickr, load_sts_year, load_stsb

EXPECTED = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
# Lines with an empty gold score (unscored pairs of the STS15/16 releases), skipped and counted.
SKIPPED = {"STS12": 0, "STS13": 0, "STS14": 0, "STS15": 5500, "STS16": 7997}


@pytest.fixture(scope="module")
def senteval(shared_data: Path) -> Path:
    return shared_data / "senteval" / "downstream"


@pytest.mark.parametrize("year", sorted(EXPECTED))
def test_sts_year_pair_counts(senteval: Path, year: str) -> None:
    task = load_sts_year(senteval, year)
    assert task.num_pairs == EXPECTED[year]
    for sub in task.subsets:
        assert len(sub.sentences1) == len(sub.sentences2) == len(sub.scores)
        assert all(0.0 <= s <= 5.0 for s in sub.scores)
    assert task.skipped == SKIPPED[year]


def test_stsb_and_sick_counts(senteval: Path) -> None:
    assert [len(load_stsb(senteval, s).subsets[0]) for s in ("train", "dev", "test")] == [5749, 1500, 1379]
    assert [len(load_sickr(senteval, s).subsets[0]) for s in ("train", "dev", "test")] == [4500, 500, 4927]
    test = load_sickr(senteval, "test").subsets[0]  # CRLF file: no stray '\r' in the sentences or scores
    assert not any("\r" in s for s in test.sentences1 + test.sentences2)


def _write_year(root: Path, year: str, inputs: dict[str, str], golds: dict[str, str]) -> None:
    folder = root / "STS" / f"{year}-en-test"
    folder.mkdir(parents=True)
    for sub in inputs:
        (folder / f"STS.input.{sub}.txt").write_text(inputs[sub])
        (folder / f"STS.gs.{sub}.txt").write_text(golds[sub])


def test_empty_gold_lines_skipped_and_bad_rows_named(tmp_path: Path, monkeypatch) -> None:
    from simcse_weince.evaluation import sts_data

    monkeypatch.setitem(sts_data.STS_YEARS, "STS99", ("a", "b"))
    _write_year(tmp_path, "STS99", {"a": "x y\tx z\np q\tp r\nm\tn\n", "b": "u\tv\n"}, {"a": "4\n\n2.5\n", "b": "1\n"})
    task = load_sts_year(tmp_path, "STS99")
    assert task.num_pairs == 3 and task.skipped == 1
    assert task.subsets[0].sentences1 == ["x y", "m"] and task.subsets[0].scores == [4.0, 2.5]

    (tmp_path / "STS" / "STS99-en-test" / "STS.gs.b.txt").write_text("high\n")
    with pytest.raises(ValueError, match=r"STS\.gs\.b\.txt:1: expected a numeric gold score"):
        load_sts_year(tmp_path, "STS99")
    (tmp_path / "STS" / "STS99-en-test" / "STS.gs.b.txt").write_text("1\n")
    (tmp_path / "STS" / "STS99-en-test" / "STS.input.b.txt").write_text("no tab here\n")
    with pytest.raises(ValueError, match=r"STS\.input\.b\.txt:1: expected 'sentence1<TAB>sentence2'"):
        load_sts_year(tmp_path, "STS99")


def test_missing_folder_and_short_rows(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"STS12-en-test; expected .*STS\.input\.<subset>\.txt"):
        load_sts_year(tmp_path, "STS12")
    bench = tmp_path / "STS" / "STSBenchmark"
    bench.mkdir(parents=True)
    (bench / "sts-dev.csv").write_text("g\tf\t2012\t1\t4.0\ta b\tc d\ng\tf\t2012\t2\t3.0\tonly six\n")
    with pytest.raises(ValueError, match=r"sts-dev\.csv:2: expected at least 7 TAB-separated columns"):
        load_stsb(tmp_path, "dev")
    with pytest.raises(FileNotFoundError, match=r"sts-test\.csv"):
        load_stsb(tmp_path, "test")


def test_aggregation_on_hand_example() -> None:
    # Subset A: prediction order matches gold exactly (ρ = 1); subset B: reversed (ρ = −1).
    task = STSTask(
        "X", [STSSubset("A", ["a"] * 3, ["b"] * 3, [1.0, 2.0, 3.0]), STSSubset("B", ["c"] * 2, ["d"] * 2, [1.0, 2.0])]
    )
    preds = [np.array([0.1, 0.2, 0.3]), np.array([0.9, 0.8])]
    res = score_task(task, preds)
    assert res.spearman["A"] == pytest.approx(100.0) and res.spearman["B"] == pytest.approx(-100.0)
    assert res.spearman["mean"] == pytest.approx(0.0)
    assert res.spearman["wmean"] == pytest.approx(100 * (3 * 1 + 2 * -1) / 5)
    pooled = 100 * spearmanr([0.1, 0.2, 0.3, 0.9, 0.8], [1, 2, 3, 1, 2])[0]
    assert res.spearman["all"] == pytest.approx(pooled)
    assert res.main == res.spearman["all"]
    assert aggregate({"A": 1.0}, {"A": 7}, 5.0) == {"all": 5.0, "mean": 1.0, "wmean": 1.0, "A": 1.0}


def test_cosine_scores() -> None:
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(cosine_scores(a, b), [0.0, 1.0])


@pytest.mark.slow
def test_stsb_matches_sentence_transformers_evaluator(senteval: Path, minilm_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from simcse_weince.text.encoder import load_text_encoder

    path = str(minilm_dir)
    # every third pair of STS-B test (460 of 1,379, spread over the whole range of scores): the same comparison in a
    # third of the encoding time (the whole split took 90 s with a one-thread worker on an AVX2-only CPU)
    full = load_stsb(senteval, "test").subsets[0]
    sub = STSSubset(full.name, full.sentences1[::3], full.sentences2[::3], full.scores[::3])
    ours = evaluate_sts(load_text_encoder(path, device="cpu"), STSTask("STSBenchmark", [sub]))
    st = SentenceTransformer(path, device="cpu")
    theirs = EmbeddingSimilarityEvaluator(sub.sentences1, sub.sentences2, sub.scores, write_csv=False)(st)
    assert ours.main / 100 == pytest.approx(theirs["spearman_cosine"], abs=1e-6)
    assert ours.pearson["all"] / 100 == pytest.approx(theirs["pearson_cosine"], abs=1e-6)
    assert 81 < ours.main < 84  # all-MiniLM-L6-v2: 82.35 on these pairs (about 82 on the whole split)


def test_hub_fallback_when_no_folder(monkeypatch) -> None:
    """Without a SentEval folder the Hub copy is requested (mocked here: no network in tests)."""
    import datasets

    from simcse_weince.evaluation.sts_data import load_sts_task

    calls = []

    def fake_load(name, split):
        calls.append((name, split))
        return datasets.Dataset.from_dict({"sentence1": ["a  b"], "sentence2": ["c"], "score": [0.5]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    task = load_sts_task("SICKRelatedness", None, "dev")
    assert calls == [("mteb/sickr-sts", "validation")]
    assert task.subsets[0].sentences1 == ["a b"] and task.subsets[0].scores == [0.5]
    load_sts_task("STS12", None)
    assert calls[-1] == ("mteb/sts12-sts", "test")
