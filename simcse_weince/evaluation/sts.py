"""STS evaluation, SentEval "all" protocol: cosine similarity, Spearman (and Pearson) × 100.

For a task with subsets (STS12–16) three aggregates are reported:

* ``all``: one correlation over the concatenation of every subset's pairs (the SimCSE paper's number);
* ``mean``: the plain mean of the per-subset correlations;
* ``wmean``: the mean weighted by the number of scored pairs of each subset.

For STS-B and SICK-R (one subset) all three coincide.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import pearsonr, spearmanr

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.sts_data import STSTask


def cosine_scores(emb1: np.ndarray, emb2: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (N, D) arrays (float64)."""
    a = emb1.astype(np.float64)
    b = emb2.astype(np.float64)
    num = np.sum(a * b, axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / np.maximum(den, 1e-12)


def correlations(pred: np.ndarray, gold: Sequence[float]) -> tuple[float, float]:
    """(Spearman, Pearson) × 100."""
    return 100.0 * float(spearmanr(pred, gold)[0]), 100.0 * float(pearsonr(pred, gold)[0])


@dataclass
class STSResult:
    task: str
    num_pairs: int
    skipped: int
    spearman: dict[str, float] = field(default_factory=dict)  # all / mean / wmean / per-subset
    pearson: dict[str, float] = field(default_factory=dict)
    subset_sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def main(self) -> float:
        """The headline number: Spearman ``all``."""
        return self.spearman["all"]

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "num_pairs": self.num_pairs,
            "skipped_pairs": self.skipped,
            "spearman": self.spearman,
            "pearson": self.pearson,
            "subset_sizes": self.subset_sizes,
            "seconds": self.seconds,
        }


def aggregate(per_subset: dict[str, float], sizes: dict[str, int], pooled: float) -> dict[str, float]:
    """``{'all': pooled, 'mean': ..., 'wmean': ..., <subset>: ...}`` from per-subset correlations."""
    vals = np.array([per_subset[k] for k in sizes])
    w = np.array([sizes[k] for k in sizes], dtype=np.float64)
    return {"all": pooled, "mean": float(vals.mean()), "wmean": float(np.sum(vals * w) / w.sum()), **per_subset}


def score_task(task: STSTask, scores_by_subset: Sequence[np.ndarray]) -> STSResult:
    """Correlations of predicted similarities against gold, with the three aggregates."""
    sp, pe, sizes = {}, {}, {}
    for sub, pred in zip(task.subsets, scores_by_subset, strict=True):
        sp[sub.name], pe[sub.name] = correlations(pred, sub.scores)
        sizes[sub.name] = len(sub)
    all_pred = np.concatenate(list(scores_by_subset))
    all_gold = np.concatenate([np.asarray(s.scores, dtype=np.float64) for s in task.subsets])
    sp_all, pe_all = correlations(all_pred, all_gold)
    return STSResult(
        task.name, task.num_pairs, task.skipped, aggregate(sp, sizes, sp_all), aggregate(pe, sizes, pe_all), sizes
    )


def evaluate_sts(encoder: Encoder, task: STSTask) -> STSResult:
    """Encode every unique sentence of the task once and score all subsets."""
    t0 = time.perf_counter()
    sentences = [s for sub in task.subsets for s in (*sub.sentences1, *sub.sentences2)]
    emb = encoder.encode(sentences)
    preds, offset = [], 0
    for sub in task.subsets:
        n = len(sub)
        e1 = emb[offset : offset + n]
        e2 = emb[offset + n : offset + 2 * n]
        preds.append(cosine_scores(e1, e2))
        offset += 2 * n
    result = score_task(task, preds)
    result.seconds = time.perf_counter() - t0
    return result
