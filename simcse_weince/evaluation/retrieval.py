"""Retrieval evaluation: encode the queries and the corpus, rank the corpus by cosine similarity (exact search,
:mod:`~simcse_weince.evaluation.search`), and score the rankings with the binary-relevance metrics of
sentence-transformers' ``InformationRetrievalEvaluator``, computed as it computes them (so the numbers are
identical to its own on the same embeddings).

For query ``q`` with relevant set ``R_q`` (``|R_q| >= 1``) and ranking ``d_1, d_2, ...`` (score descending, ties by
document id ascending), ``rel_i = 1[d_i ∈ R_q]``, averaged over the queries:

* Accuracy@k = 1[∃ i ≤ k: rel_i];  Recall@k = Σ_{i≤k} rel_i / |R_q|;
* MRR@k = 1 / min{i ≤ k: rel_i} (0 if none);
* nDCG@k = Σ_{i≤k} rel_i / log2(i + 1)  /  Σ_{i ≤ min(k, |R_q|)} 1 / log2(i + 1);
* MAP@k = Σ_{i≤k} rel_i · (Σ_{j≤i} rel_j) / i  /  min(k, |R_q|).

The report's headline is nDCG@10 × 100.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.retrieval_data import RetrievalTask
from simcse_weince.evaluation.search import exact_top_k, faiss_top_k, id_ranks, ordered

NDCG_AT = (10,)
MRR_AT = (10,)
MAP_AT = (100,)
RECALL_AT = (1, 5, 10, 100)
ACCURACY_AT = (1, 5, 10)
MAX_K = max(*NDCG_AT, *MRR_AT, *MAP_AT, *RECALL_AT, *ACCURACY_AT)
METRIC_NAMES: tuple[str, ...] = (
    *(f"ndcg@{k}" for k in NDCG_AT),
    *(f"mrr@{k}" for k in MRR_AT),
    *(f"map@{k}" for k in MAP_AT),
    *(f"recall@{k}" for k in RECALL_AT),
    *(f"accuracy@{k}" for k in ACCURACY_AT),
)
MAIN_METRIC = "ndcg@10"
SEARCHES = ("exact", "faiss")


@dataclass
class RetrievalResult:
    """Metrics (fractions in [0, 1], keys :data:`METRIC_NAMES`) of one task, and what it ran on."""

    task: str
    num_queries: int
    num_corpus: int
    metrics: dict[str, float] = field(default_factory=dict)
    source: str = ""
    split: str = ""
    construction: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    search: str = "exact"
    seconds: float = 0.0
    search_seconds: float = 0.0

    @property
    def main(self) -> float:
        """nDCG@10 × 100."""
        return 100.0 * self.metrics[MAIN_METRIC]

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "num_queries": self.num_queries,
            "num_corpus": self.num_corpus,
            "metrics": self.metrics,
            "source": self.source,
            "split": self.split,
            "published_benchmark": self.construction is None,
            "construction": self.construction,
            "counts": self.counts,
            "search": self.search,
            "seconds": self.seconds,
            "search_seconds": self.search_seconds,
        }


def _dcg(relevances: Sequence[int], k: int) -> float:
    dcg = 0.0
    for i in range(min(len(relevances), k)):
        dcg += relevances[i] / np.log2(i + 2)
    return dcg


def ranking_metrics(rankings: Sequence[Sequence[str]], relevant: Sequence[set[str]]) -> dict[str, float]:
    """The metrics of the module's docstring over the queries' rankings (document ids, best first; each at least
    :data:`MAX_K` long or the whole corpus) and relevant sets, with the evaluator's own arithmetic."""
    if not rankings:
        raise ValueError("no queries to score")
    hits = {k: 0 for k in ACCURACY_AT}
    recall: dict[int, list[float]] = {k: [] for k in RECALL_AT}
    mrr = {k: 0.0 for k in MRR_AT}
    ndcg: dict[int, list[float]] = {k: [] for k in NDCG_AT}
    average_precision: dict[int, list[float]] = {k: [] for k in MAP_AT}
    for ranked, rel in zip(rankings, relevant, strict=True):
        flags = [1 if doc in rel else 0 for doc in ranked]
        for k in ACCURACY_AT:
            hits[k] += 1 if any(flags[:k]) else 0
        for k in RECALL_AT:
            recall[k].append(sum(flags[:k]) / len(rel))
        for k in MRR_AT:
            first = next((i for i, f in enumerate(flags[:k]) if f), None)
            mrr[k] += 0.0 if first is None else 1.0 / (first + 1)
        for k in NDCG_AT:
            ndcg[k].append(_dcg(flags[:k], k) / _dcg([1] * len(rel), k))
        for k in MAP_AT:
            correct, total = 0, 0.0
            for i, f in enumerate(flags[:k]):
                if f:
                    correct += 1
                    total += correct / (i + 1)
            average_precision[k].append(total / min(k, len(rel)))
    n = len(rankings)
    out = {f"ndcg@{k}": float(np.mean(v)) for k, v in ndcg.items()}
    out |= {f"mrr@{k}": float(v / n) for k, v in mrr.items()}
    out |= {f"map@{k}": float(np.mean(v)) for k, v in average_precision.items()}
    out |= {f"recall@{k}": float(np.mean(v)) for k, v in recall.items()}
    out |= {f"accuracy@{k}": hits[k] / n for k in ACCURACY_AT}
    return out


def unit_rows(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """``x / max(‖x‖₂, 1e-12)`` row-wise, the arithmetic of ``torch.nn.functional.normalize`` (so cosine scores
    equal sentence-transformers' ``cos_sim`` bit for bit); ``inplace`` divides ``x`` itself."""
    norm = x.norm(p=2, dim=1, keepdim=True).clamp_min(1e-12)
    return x.div_(norm) if inplace else x / norm


def search(
    queries: np.ndarray,
    corpus: np.ndarray,
    corpus_ids: list[str],
    method: str = "exact",
    device: str | torch.device | None = None,
    show_progress_bar: bool = False,
    inplace: bool = False,
) -> list[list[str]]:
    """Each query's :data:`MAX_K` best documents by cosine similarity (ids, best first), on ``device`` (default:
    CUDA when there). ``inplace``: normalise the given arrays in place (no second copy of the corpus; the caller's
    arrays are changed)."""
    if method not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {method!r}")
    target = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    q = unit_rows(torch.as_tensor(queries, dtype=torch.float32, device=target), inplace)
    c = unit_rows(torch.as_tensor(corpus, dtype=torch.float32, device=target), inplace)
    rank = id_ranks(corpus_ids)
    if method == "faiss":  # its rows re-sorted by (score, id): ties inside the top k ordered as the exact search's
        scores, index = (torch.from_numpy(a) for a in faiss_top_k(q.cpu().numpy(), c.cpu().numpy(), MAX_K))
        found = index >= 0
        _, index_t = ordered(torch.where(found, scores, -torch.inf), index.clamp_min(0), rank, MAX_K)
        rows = [row[: int(n)] for row, n in zip(index_t.tolist(), found.sum(dim=1).tolist(), strict=True)]
    else:
        _, index_t = exact_top_k(q, c, MAX_K, rank, show_progress_bar=show_progress_bar)
        rows = index_t.cpu().tolist()
    return [[corpus_ids[j] for j in row] for row in rows]


def evaluate_retrieval(
    encoder: Encoder,
    task: RetrievalTask,
    method: str = "exact",
    device: str | torch.device | None = None,
    show_progress_bar: bool = False,
) -> RetrievalResult:
    """Encode the task's queries and corpus with ``encoder``, search, and score (see the module's docstring)."""
    t0 = time.perf_counter()
    query_ids = list(task.queries)
    corpus_ids = list(task.corpus)
    q_emb = encoder.encode([task.queries[q] for q in query_ids])
    c_emb = encoder.encode([task.corpus[c] for c in corpus_ids])
    t1 = time.perf_counter()
    rankings = search(q_emb, c_emb, corpus_ids, method, device, show_progress_bar, inplace=True)  # arrays of ours
    metrics = ranking_metrics(rankings, [task.relevant[q] for q in query_ids])
    t2 = time.perf_counter()
    return RetrievalResult(
        task.name, len(query_ids), len(corpus_ids), metrics, task.source, task.split, task.construction,
        dict(task.counts), method, t2 - t0, t2 - t1,
    )  # fmt: skip
