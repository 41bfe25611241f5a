"""Frozen-feature evaluation: linear probe, weighted k-NN, recall@k against hand examples."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.vision.evaluation import knn_accuracy, knn_predict, linear_probe, recall_at_k


def _separable(n_per: int = 30, classes: int = 3, d: int = 8, sep: float = 8.0, seed: int = 0):
    """Train and test sets drawn around the same class centres."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, d, generator=g) * sep
    y = torch.arange(classes).repeat_interleave(n_per)
    return centers[y] + torch.randn(len(y), d, generator=g), y, centers[y] + torch.randn(len(y), d, generator=g), y


def test_probe_and_knn_on_separable_data() -> None:
    xtr, ytr, xte, yte = _separable()
    assert linear_probe(xtr, ytr, xte, yte) == pytest.approx(100.0)
    assert knn_accuracy(xtr, ytr, xte, yte, k=20, num_classes=3) == pytest.approx(100.0)
    noise_tr, noise_te = torch.randn_like(xtr), torch.randn_like(xte)  # no signal: the checks can fail
    assert knn_accuracy(noise_tr, ytr, noise_te, yte, k=20, num_classes=3) < 70


def test_knn_weighting_hand_example() -> None:
    bank = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.05, 0.95]])
    labels = torch.tensor([0, 0, 1, 1, 1])
    query = torch.tensor([[1.0, 0.05]])
    # k = 5: class 1 has three votes, class 0 two, but class 0's are far closer (exp(s/0.07) weighting).
    assert knn_predict(bank, labels, query, k=5, num_classes=2).item() == 0
    # With a huge temperature the votes are almost unweighted and the majority (class 1) wins.
    assert knn_predict(bank, labels, query, k=5, num_classes=2, temperature=1e6).item() == 1


def test_recall_at_k_hand_example() -> None:
    f = torch.tensor([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.2, 0.9]])
    y = torch.tensor([0, 1, 1, 0])
    # nearest other: 0->1 (miss), 1->0 (miss), 2->3 (miss), 3->2 (miss): R@1 = 0
    # second nearest: 0->3 (hit), 1->3 (miss; 2 is third), 2->1 (hit), 3->1 (miss; 0 is third)
    r = recall_at_k(f, y, ks=(1, 2, 3))
    assert r == {1: 0.0, 2: 50.0, 3: 100.0}
