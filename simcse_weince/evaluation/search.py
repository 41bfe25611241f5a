"""Exact top-k similarity search, chunked so that memory stays linear in the corpus size.

The ranking is the total order (score descending, then the document's id ascending): scores are inner products
of the given (already normalised, for cosine) float32 vectors, and ties are broken by ``tie_rank`` (each
document's position in the sorted order of the ids), the order of sentence-transformers'
``InformationRetrievalEvaluator``. It holds across chunks: for each block of queries and chunk of the corpus the
``k`` best are taken under that order (``torch.topk`` breaks ties arbitrarily, so a row tied at its k-th score is
re-selected by the rank), then merged with the best so far. Memory: the corpus vectors, plus one block of
``query_block × corpus_chunk`` scores (at most ``max_block_scores`` float32 values; 64 MB by default).

``faiss_top_k`` is the optional index path (``pip install faiss-cpu``): an exact flat inner-product index, the
same scores up to floating-point rounding; ties at the k-th place are broken by faiss, not by the id.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

MAX_BLOCK_SCORES = 2**24
CORPUS_CHUNK = 50_000


def ordered(scores: torch.Tensor, index: torch.Tensor, tie_rank: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    """The first ``k`` of each row's candidates under (score descending, ``tie_rank[index]`` ascending)."""
    by_rank = tie_rank[index].argsort(dim=1)
    scores, index = scores.gather(1, by_rank), index.gather(1, by_rank)
    by_score = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
    return scores.gather(1, by_score), index.gather(1, by_score)


def chunk_top_k(scores: torch.Tensor, tie_rank: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best columns of each row of ``scores`` under (score descending, ``tie_rank`` ascending), unsorted:
    ``torch.topk``, with the rows that have ties at their k-th score re-selected by an integer key (every score
    above the cut first, then the tied ones by rank). ``tie_rank`` may be any integers (a chunk's slice of the
    whole corpus's ranks): the key is built from their order within the chunk."""
    values, index = scores.topk(k, dim=1, largest=True, sorted=False)
    cut = values.min(dim=1, keepdim=True).values
    tied = ((scores >= cut).sum(dim=1) > k).nonzero().squeeze(1)
    if tied.numel():
        n = tie_rank.numel()
        tie_rank = torch.empty_like(tie_rank).scatter_(0, tie_rank.argsort(), torch.arange(n, device=tie_rank.device))
        rows, row_cut = scores[tied], cut[tied]
        key = torch.where(rows > row_cut, tie_rank[None, :], 2 * n)
        key = torch.where(rows == row_cut, tie_rank[None, :] + n, key)
        pick = key.topk(k, dim=1, largest=False).indices
        index[tied], values[tied] = pick, rows.gather(1, pick)
    return values, index


def blocks(num_queries: int, num_corpus: int, corpus_chunk: int, max_block_scores: int) -> tuple[int, int]:
    """(queries per block, documents per chunk) so that one block of scores holds at most ``max_block_scores``."""
    chunk = max(1, min(num_corpus, corpus_chunk, max_block_scores))
    return max(1, min(num_queries, max_block_scores // chunk)), chunk


def exact_top_k(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    k: int,
    tie_rank: torch.Tensor | None = None,
    corpus_chunk: int = CORPUS_CHUNK,
    max_block_scores: int = MAX_BLOCK_SCORES,
    show_progress_bar: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, corpus indices), each ``(Q, min(k, N))``, of every query's best documents, best first.

    Args:
        queries: ``(Q, D)`` float32 (on the device the search runs on).
        corpus: ``(N, D)`` float32, same device.
        k: how many documents per query.
        tie_rank: ``(N,)`` int64, the order that breaks score ties (default: the corpus order).
        corpus_chunk, max_block_scores: the sizes bounding memory (see the module's docstring).
        show_progress_bar: one bar over the blocks of the search.
    """
    n = corpus.shape[0]
    k = min(k, n)
    rank = (tie_rank if tie_rank is not None else torch.arange(n)).to(corpus.device)
    q_block, c_chunk = blocks(queries.shape[0], n, corpus_chunk, max_block_scores)
    out_scores, out_index = [], []
    steps = [(q, c) for q in range(0, queries.shape[0], q_block) for c in range(0, n, c_chunk)]
    bar = tqdm(total=len(steps), desc="search", disable=not show_progress_bar, leave=False)
    for q0 in range(0, queries.shape[0], q_block):
        best_s = best_i = None
        for c0 in range(0, n, c_chunk):
            part = corpus[c0 : c0 + c_chunk]
            s, i = chunk_top_k(queries[q0 : q0 + q_block] @ part.T, rank[c0 : c0 + c_chunk], min(k, part.shape[0]))
            i = i + c0
            if best_s is not None:
                s, i = torch.cat([best_s, s], dim=1), torch.cat([best_i, i], dim=1)
            best_s, best_i = ordered(s, i, rank, k)
            bar.update()
        out_scores.append(best_s)
        out_index.append(best_i)
    bar.close()
    return torch.cat(out_scores), torch.cat(out_index)


def faiss_top_k(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, indices), each ``(Q, min(k, N))``, from an exact faiss ``IndexFlatIP``.

    Raises:
        ImportError: faiss is not installed (one line saying how to install it).
    """
    try:
        import faiss
    except ImportError as err:
        raise ImportError("--search faiss needs the faiss package: pip install faiss-cpu (or faiss-gpu)") from err
    index = faiss.IndexFlatIP(corpus.shape[1])
    index.add(np.ascontiguousarray(corpus, dtype=np.float32))
    scores, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, corpus.shape[0]))
    return scores, ids


def id_ranks(ids: list[str]) -> torch.Tensor:
    """Each id's position in the sorted order of ``ids`` (the tie-break of :func:`exact_top_k`)."""
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    return torch.from_numpy(rank)
