r"""Held-out evaluation of frozen features, as the WEINCE paper's vision table scores an encoder.

The training features are split, per class, into a bank (1 − r) and a validation part (r = 0.2): for each class
c in ascending order, its indices are shuffled by one ``numpy.random.default_rng(seed)`` stream (the same
stream for all classes, in turn) and the first ``int(r·n_c)`` go to validation. Both the validation part and the
test set are then scored against the bank:

* retrieval recall ``R@k`` (k = 1, 2, 5, 10, 20, 50): a query scores 1 when one of its k nearest bank features
  (cosine) has its label;
* weighted k-NN accuracy at k = 50, votes ``exp(s/T)`` with T = 0.1 (the authors subtract each query's largest
  similarity first, which changes no vote's rank);
* a linear probe (:func:`~simcse_weince.vision.evaluation.linear_probe`, deterministic L2 logistic regression)
  fitted on the bank: its validation and test accuracy.

Validation figures select configurations; test figures are reported. Everything is × 100.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from simcse_weince.vision.evaluation import fit_linear_probe, knn_accuracy

RECALL_KS: tuple[int, ...] = (1, 2, 5, 10, 20, 50)
KNN_K = 50
KNN_TEMPERATURE = 0.1


def stratified_split(labels: Sequence[int] | np.ndarray, ratio: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(bank, validation)`` index arrays of a per-class split (module docstring).

    Raises:
        ValueError: ``ratio`` outside (0, 1).
    """
    if not 0 < ratio < 1:
        raise ValueError(f"the validation ratio must be in (0, 1), got {ratio!r}")
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    bank, val = [], []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        n_val = int(len(idx) * ratio)
        val.extend(idx[:n_val].tolist())
        bank.extend(idx[n_val:].tolist())
    return np.asarray(bank, dtype=np.int64), np.asarray(val, dtype=np.int64)


@torch.no_grad()
def bank_recall(
    query_f: torch.Tensor,
    query_y: torch.Tensor,
    bank_f: torch.Tensor,
    bank_y: torch.Tensor,
    ks: Sequence[int],
    chunk: int = 1024,
) -> dict[int, float]:
    """``R@k`` of queries against a disjoint bank: 100 × the share of queries with a same-label bank feature among
    their k nearest (cosine); ``chunk`` queries at a time."""
    bank = F.normalize(bank_f.float(), dim=1)
    queries = F.normalize(query_f.float(), dim=1)
    k_max = min(max(ks), bank.shape[0])
    top = torch.cat(
        [(queries[i : i + chunk] @ bank.T).topk(k_max, dim=1).indices for i in range(0, len(queries), chunk)]
    )
    hit = bank_y[top] == query_y[:, None]
    return {k: 100.0 * float(hit[:, :k].any(dim=1).float().mean()) for k in ks}


def heldout_scores(
    train_f: torch.Tensor,
    train_y: torch.Tensor,
    test_f: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    seed: int,
    ratio: float = 0.2,
    probe: bool = True,
) -> dict[str, dict[str, float]]:
    """``{"val": {metric: value}, "test": {metric: value}}`` for one split seed; metrics ``R@k``, ``knn50`` and
    (with ``probe``) ``linear_probe``."""
    bank, val = stratified_split(train_y.numpy(), ratio, seed)
    bank_t, val_t = torch.from_numpy(bank), torch.from_numpy(val)
    bank_f, bank_y = train_f[bank_t], train_y[bank_t]
    clf = fit_linear_probe(bank_f, bank_y) if probe else None
    out: dict[str, dict[str, float]] = {}
    for part, (qf, qy) in {"val": (train_f[val_t], train_y[val_t]), "test": (test_f, test_y)}.items():
        scores = {f"R@{k}": v for k, v in bank_recall(qf, qy, bank_f, bank_y, RECALL_KS).items()}
        scores[f"knn{KNN_K}"] = knn_accuracy(bank_f, bank_y, qf, qy, KNN_K, num_classes, KNN_TEMPERATURE)
        if clf is not None:
            scores["linear_probe"] = 100.0 * float(clf.score(qf.numpy(), qy.numpy()))
        out[part] = scores
    return out
