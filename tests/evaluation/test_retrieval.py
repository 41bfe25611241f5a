"""Retrieval: exact chunked search against a loop reference, the metrics against closed forms and against
sentence-transformers' ``InformationRetrievalEvaluator`` (the same model and data through the command line),
the BEIR reader and the offline tasks' construction rule."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from simcse_weince.evaluation.retrieval import METRIC_NAMES, ranking_metrics, search
from simcse_weince.evaluation.retrieval_data import load_beir_folder, load_builtin_task
from simcse_weince.evaluation.search import exact_top_k, id_ranks


@pytest.fixture(scope="module")
def senteval(shared_data: Path) -> Path:
    return shared_data / "senteval" / "downstream"


def _reference_top_k(q: np.ndarray, c: np.ndarray, ids: list[str], k: int) -> list[list[str]]:
    """Every document scored, sorted by (score descending, id ascending), the first k."""
    out = []
    for row in q:
        scored = [(float(row @ doc), ids[j]) for j, doc in enumerate(c)]
        out.append([doc for _, doc in sorted(scored, key=lambda x: (-x[0], x[1]))[:k]])
    return out


@pytest.mark.parametrize("chunk,block,k", [(7, 40, 12), (1000, 2**24, 12), (3, 3, 12), (10, 40, 3), (13, 2**24, 5)])
def test_exact_search_equals_a_loop_reference_with_ties_across_chunks(chunk: int, block: int, k: int) -> None:
    """Small-integer vectors (exact float32 products) with many repeated documents: ties at every cut, broken by
    the id's string order (ids shuffled so that it differs from the corpus order), whatever the chunking: chunks
    smaller than k (all of a chunk kept), and larger (a chunk's own ties re-selected, in every chunk)."""
    rng = np.random.default_rng(0)
    base = rng.integers(-2, 3, size=(6, 4))
    corpus = base[rng.integers(0, 6, size=45)].astype(np.float32)  # 45 documents, 6 distinct vectors
    queries = rng.integers(-2, 3, size=(11, 4)).astype(np.float32)
    ids = [f"doc{i}" for i in rng.permutation(45)]  # 'doc10' < 'doc2': not the numeric order
    scores, index = exact_top_k(
        torch.from_numpy(queries),
        torch.from_numpy(corpus),
        k,
        id_ranks(ids),
        corpus_chunk=chunk,
        max_block_scores=block,
    )
    got = [[ids[j] for j in row] for row in index.tolist()]
    assert got == _reference_top_k(queries, corpus, ids, k)
    assert (scores[:, :-1] >= scores[:, 1:]).all()


def test_metrics_equal_their_closed_forms() -> None:
    """Two queries: q1 finds its one relevant document at rank 2; q2 has 3 relevant, found at ranks 1 and 3."""
    rankings = [["a", "b", "c"], ["x", "y", "z", "w"]]
    relevant = [{"b"}, {"x", "z", "v"}]
    m = ranking_metrics(rankings, relevant)
    assert set(m) == set(METRIC_NAMES)
    lg = math.log2
    ndcg1 = (1 / lg(3)) / 1.0
    ndcg2 = (1 + 1 / lg(4)) / (1 + 1 / lg(3) + 1 / lg(4))
    assert m["ndcg@10"] == pytest.approx((ndcg1 + ndcg2) / 2, abs=1e-15)
    assert m["mrr@10"] == pytest.approx((1 / 2 + 1) / 2, abs=1e-15)
    assert m["map@100"] == pytest.approx((1 / 2 + (1 + 2 / 3) / 3) / 2, abs=1e-15)
    assert m["recall@1"] == pytest.approx((0 + 1 / 3) / 2)
    assert m["recall@5"] == pytest.approx((1 + 2 / 3) / 2)
    assert m["accuracy@1"] == 0.5 and m["accuracy@5"] == 1.0


def test_faiss_search_finds_the_exact_neighbours() -> None:
    """The optional faiss index (an exact flat index) returns the exact search's neighbours, ties in the order of
    the exact search (score, then id), except at the 100th place where faiss chooses which of a tied pair it keeps."""
    if importlib.util.find_spec("faiss") is None:
        pytest.fail("faiss-cpu is a dev dependency (make setup installs it); its absence hides the faiss path")
    rng = np.random.default_rng(1)
    q, c = rng.standard_normal((20, 16)).astype(np.float32), rng.standard_normal((300, 16)).astype(np.float32)
    ids = [f"d{i:03d}" for i in range(300)]
    c[150:] = c[:150]  # every document twice: ties everywhere, ordered by id in both searches
    exact, flat = search(q, c, ids, "exact"), search(q, c, ids, "faiss")
    assert [row[:99] for row in flat] == [row[:99] for row in exact]  # the 100th: a pair split by the cut


def _write_beir(folder: Path, corpus: list[dict], queries: list[dict], qrels: list[str], extra_docs=()) -> Path:
    corpus = [*corpus, *extra_docs]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(d) + "\n" for d in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels), encoding="utf-8")
    return folder


def test_beir_reader_titles_integer_ids_and_unscored_qrels(tmp_path: Path) -> None:
    folder = _write_beir(
        tmp_path / "toy",
        [{"_id": 1, "title": "Cats", "text": "sleep a lot"}, {"_id": "2", "text": "dogs bark"}],
        [{"_id": "q1", "text": "what do cats do"}, {"_id": "q2", "text": "unjudged"}],
        ["q1\t1\t2\n", "q1\t2\t0\n", "q1\t1\t1\n", "q2\t2\t0\n", "q1\t3\t1\n", "q1\t3\t0\n"],
        extra_docs=[{"_id": "3", "text": "birds fly"}],
    )
    task = load_beir_folder(folder)
    assert task.corpus == {"1": "Cats sleep a lot", "2": "dogs bark", "3": "birds fly"}
    assert task.queries == {"q1": "what do cats do"} and task.relevant == {"q1": {"1", "3"}}  # 3: one row positive
    assert task.counts == {"qrels_not_relevant": 3, "qrels_repeated": 2, "queries_without_relevant": 1}
    assert load_beir_folder(folder / "qrels" / "test.tsv").relevant == task.relevant  # the qrels file named


def test_offline_tasks_follow_their_construction_rule(senteval: Path) -> None:
    """STS-B test rebuilt from the raw file by the documented rule: queries are first sentences of pairs with
    gold >= 4, none of them in the corpus, each query's relevant documents are exactly its positives' second
    sentences that the corpus kept; the corpus is every other second sentence."""
    rows = [line.split("\t") for line in (senteval / "STS/STSBenchmark/sts-test.csv").read_text().splitlines()]
    norm = [(" ".join(r[5].split()), " ".join(r[6].split()), float(r[4])) for r in rows]
    queries = {a for a, b, s in norm if s >= 4 and a != b}
    corpus = {b for _, b, _ in norm} - queries
    task = load_builtin_task("STSB-paraphrase", senteval, "test")
    assert set(task.corpus.values()) == corpus and not queries & set(task.corpus.values())
    text_of = task.corpus
    for qid, q in task.queries.items():
        assert {text_of[d] for d in task.relevant[qid]} == {b for a, b, s in norm if a == q and s >= 4 and b in corpus}
    assert (len(task.queries), len(task.corpus)) == (307, 1325)
    assert task.construction and "gold >= 4" in task.construction  # the rule is recorded with the task
    sizes = {n: (len(t.queries), len(t.corpus)) for n in ("MRPC-paraphrase", "SICK-entailment")
             for t in [load_builtin_task(n, senteval, "test")]}  # fmt: skip
    assert sizes == {"MRPC-paraphrase": (1139, 1685), "SICK-entailment": (1048, 2707)}


@pytest.mark.slow
def test_cli_retrieval_equals_information_retrieval_evaluator(
    minilm_dir: Path, senteval: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """all-MiniLM-L6-v2 on a BEIR folder (written from STS-B test's paraphrase task, with titles, integer-like ids
    and a header) through ``evaluate_sts.py --tasks retrieval:PATH``: every metric and every query's top 100
    equal sentence-transformers' ``InformationRetrievalEvaluator`` on the same model and files."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import cos_sim

    from simcse_weince.cli.evaluate import main

    built = load_builtin_task("STSB-paraphrase", senteval, "test")
    picked = list(built.queries.items())[:100]
    wanted = {d for q, _ in picked for d in built.relevant[q]}
    kept = [d for i, d in enumerate(built.corpus) if d in wanted or i % 4 == 0]  # their documents and distractors
    ids = {d: str(i * 7 % 1000 + 1000 * (i // 1000)) for i, d in enumerate(kept)}  # ids not in corpus order
    docs = [{"_id": ids[d], "title": "STS" if i % 5 == 0 else "", "text": built.corpus[d]} for i, d in enumerate(kept)]
    queries = [{"_id": q, "text": t} for q, t in picked]
    qrels = [f"{q['_id']}\t{ids[d]}\t1\n" for q in queries for d in sorted(built.relevant[q["_id"]])]
    folder = _write_beir(tmp_path / "stsb-para", docs, queries, qrels)
    out = tmp_path / "ev"
    args = ["--model", str(minilm_dir), "--tasks", f"retrieval:{folder}", "--output_dir", str(out), "--no_progress"]
    assert main([*args, "--device", "cpu", "--batch_size", "32"]) == 0
    ours = json.loads((out / "eval_test.json").read_text())["retrieval"][f"retrieval:{folder}"]
    assert "| stsb-para | Retrieval Avg. |" in capsys.readouterr().out

    task = load_beir_folder(folder)
    evaluator = InformationRetrievalEvaluator(
        task.queries, task.corpus, task.relevant, mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1, 5, 10],
        precision_recall_at_k=[1, 5, 10, 100], map_at_k=[100], write_csv=False, score_functions={"cosine": cos_sim},
        write_predictions=True,
    )  # fmt: skip
    theirs = evaluator.compute_metrices(SentenceTransformer(str(minilm_dir), device="cpu"), output_path=str(tmp_path))
    flat = {f"{name[:-2]}@{k}": v for name, by_k in theirs["cosine"].items() for k, v in by_k.items()}
    assert {m: ours["metrics"][m] for m in METRIC_NAMES} == {m: flat[m] for m in METRIC_NAMES}
    assert ours["num_queries"] == 100 and ours["published_benchmark"] is True

    predicted = [json.loads(line) for line in (tmp_path / "Information-Retrieval_evaluation_predictions_cosine.jsonl")
                 .read_text().splitlines()]  # fmt: skip
    from simcse_weince.text.encoder import load_text_encoder

    enc = load_text_encoder(str(minilm_dir), device="cpu", batch_size=32)
    corpus_ids = list(task.corpus)
    rankings = search(enc.encode(list(task.queries.values())), enc.encode(list(task.corpus.values())), corpus_ids)
    assert rankings == [[hit["corpus_id"] for hit in p["results"]] for p in predicted]


def test_two_folders_of_one_name_keep_a_column_each(tmp_path: Path) -> None:
    """``a/toy`` and ``b/toy`` (and a qrels file, named by its folder) are three tasks, three columns, one average
    of three numbers."""
    from simcse_weince.evaluation.runner import run_evaluation
    from tests.evaluation.test_families import HashEncoder

    specs = []
    for parent in ("a", "b"):
        docs = [{"_id": f"d{i}", "text": f"document {parent} {i}"} for i in range(20)]
        _write_beir(tmp_path / parent / "toy", docs, [{"_id": "q", "text": "document 3"}], ["q\td3\t1\n"])
        specs.append(f"retrieval:{tmp_path / parent / 'toy'}")
    specs.append(f"retrieval:{tmp_path / 'a' / 'toy' / 'qrels' / 'test.tsv'}")
    report = run_evaluation(HashEncoder(), "hash", specs)
    scores = report.scores("retrieval")
    assert list(scores) == ["toy", specs[1], specs[2]] and report.retrieval[specs[2]].task == "toy"
    assert report.to_dict()["retrieval_avg"] == pytest.approx(np.mean(list(scores.values())))
