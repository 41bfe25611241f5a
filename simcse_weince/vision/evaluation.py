"""Frozen-feature evaluation of image encoders: linear probe, cosine k-NN and retrieval recall@k."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm.auto import tqdm


@torch.no_grad()
def extract_features(
    model, dataset, batch_size: int = 256, device: str | torch.device = "cpu", show_progress_bar: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backbone features (N, D) float32 and labels (N,) of ``dataset`` (``pixel_values``/``labels`` rows)."""
    from simcse_weince.vision.data import collate

    was = model.training
    model.eval()
    feats, labels = [], []
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate)
    for batch in tqdm(loader, desc="features", disable=not show_progress_bar, leave=False):
        feats.append(model.features(batch["pixel_values"].to(device)).float().cpu())
        labels.append(batch["labels"])
    model.train(was)
    return torch.cat(feats), torch.cat(labels)


@torch.no_grad()
def knn_predict(
    train_f: torch.Tensor,
    train_y: torch.Tensor,
    test_f: torch.Tensor,
    k: int,
    num_classes: int,
    temperature: float = 0.07,
    chunk: int = 1024,
) -> torch.Tensor:
    """Cosine k-NN with votes weighted by ``exp(s / T)`` (InstDisc / SimCLR protocol); (M,) predictions."""
    train_n = F.normalize(train_f, dim=1)
    preds = []
    for start in range(0, len(test_f), chunk):
        sims = F.normalize(test_f[start : start + chunk], dim=1) @ train_n.T  # (m, N)
        top_s, top_i = sims.topk(min(k, train_n.shape[0]), dim=1)
        votes = torch.zeros(len(sims), num_classes)
        votes.scatter_add_(1, train_y[top_i], (top_s / temperature).exp())
        preds.append(votes.argmax(1))
    return torch.cat(preds)


@torch.no_grad()
def knn_accuracy(train_f, train_y, test_f, test_y, k: int, num_classes: int, temperature: float = 0.07) -> float:
    return 100.0 * float((knn_predict(train_f, train_y, test_f, k, num_classes, temperature) == test_y).float().mean())


@torch.no_grad()
def recall_at_k(features: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 2, 4, 8)) -> dict[int, float]:
    """Retrieval recall@k on one set: a query scores 1 if any of its k nearest others shares its label."""
    f = F.normalize(features, dim=1)
    sims = f @ f.T
    sims.fill_diagonal_(float("-inf"))  # a query never retrieves itself
    top = sims.topk(max(ks), dim=1).indices  # (N, kmax)
    hit = labels[top] == labels[:, None]
    return {k: 100.0 * float(hit[:, :k].any(dim=1).float().mean()) for k in ks}


def fit_linear_probe(train_f, train_y, c: float = 1.0, max_iter: int = 1000):
    """Logistic regression (L2, ``C = c``, lbfgs: deterministic) on standardised frozen features, fitted."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter))
    return clf.fit(np.asarray(train_f), np.asarray(train_y))


def linear_probe(train_f, train_y, test_f, test_y, c: float = 1.0, max_iter: int = 1000) -> float:
    """Logistic regression on standardised frozen features (:func:`fit_linear_probe`); test accuracy × 100."""
    clf = fit_linear_probe(train_f, train_y, c, max_iter)
    return 100.0 * float(clf.score(np.asarray(test_f), np.asarray(test_y)))


def evaluate_features(train_f, train_y, test_f, test_y, num_classes: int, probe: bool = True) -> dict[str, float]:
    """All metrics of the vision protocol: linear probe, k-NN (k = 200 weighted; 20, 50), R@1/2/4/8."""
    t0 = time.perf_counter()
    out: dict[str, float] = {}
    if probe:
        out["linear_probe"] = linear_probe(train_f, train_y, test_f, test_y)
    for k in (200, 20, 50):
        out[f"knn{k}"] = knn_accuracy(train_f, train_y, test_f, test_y, k, num_classes)
    out.update({f"R@{k}": v for k, v in recall_at_k(test_f, test_y).items()})
    out["eval_seconds"] = time.perf_counter() - t0
    return out
