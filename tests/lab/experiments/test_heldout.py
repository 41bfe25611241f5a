"""The held-out evaluation of the paper's protocol against loop references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from simcse_weince.vision.evaluation import linear_probe
from weince_lab.experiments.heldout import bank_recall, heldout_scores, stratified_split


def _features(n: int, d: int = 6, classes: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % classes
    centres = torch.randn(classes, d, generator=g)
    return centres[y] + 0.9 * torch.randn(n, d, generator=g), y


def test_the_split_takes_int_ratio_times_each_class_and_partitions_the_indices() -> None:
    y = np.array([0] * 11 + [1] * 7 + [2] * 5)
    bank, val = stratified_split(y, 0.2, seed=3)
    assert sorted(np.concatenate([bank, val]).tolist()) == list(range(len(y)))  # a partition
    assert [int((y[val] == c).sum()) for c in range(3)] == [int(11 * 0.2), int(7 * 0.2), int(5 * 0.2)]
    again, _ = stratified_split(y, 0.2, seed=3)
    other, _ = stratified_split(y, 0.2, seed=4)
    assert np.array_equal(bank, again) and not np.array_equal(bank, other)
    # the classes in ascending order, shuffled by one stream in turn: the reference by hand
    rng = np.random.default_rng(3)
    expected = []
    for c in range(3):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        expected += idx[: int(len(idx) * 0.2)].tolist()
    assert val.tolist() == expected


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1])
def test_a_ratio_outside_the_open_interval_is_refused(ratio: float) -> None:
    with pytest.raises(ValueError, match=r"validation ratio must be in \(0, 1\)"):
        stratified_split([0, 1], ratio, 0)


def test_bank_recall_equals_a_loop_over_queries() -> None:
    qf, qy = _features(12, seed=1)
    bf, by = _features(20, seed=2)
    got = bank_recall(qf, qy, bf, by, (1, 2, 5))
    for k in (1, 2, 5):
        hits = 0
        for i in range(len(qf)):
            cos = [float(qf[i] @ bf[j] / (qf[i].norm() * bf[j].norm())) for j in range(len(bf))]
            nearest = sorted(range(len(bf)), key=lambda j: -cos[j])[:k]
            hits += any(int(by[j]) == int(qy[i]) for j in nearest)
        assert got[k] == pytest.approx(100.0 * hits / len(qf))


def test_heldout_scores_are_the_bank_figures_of_the_split() -> None:
    train_f, train_y = _features(90, seed=5)  # a bank of 72 > k = 50
    test_f, test_y = _features(15, seed=6)
    out = heldout_scores(train_f, train_y, test_f, test_y, num_classes=3, seed=1)
    bank, val = stratified_split(train_y.numpy(), 0.2, 1)
    bank_f, bank_y = train_f[bank], train_y[bank]
    for part, (qf, qy) in {"val": (train_f[val], train_y[val]), "test": (test_f, test_y)}.items():
        # weighted k-NN at k = 50, T = 0.1, by a loop (the authors shift by the largest similarity: same votes)
        correct = 0
        for i in range(len(qf)):
            cos = torch.nn.functional.cosine_similarity(qf[i][None], bank_f)
            top = cos.topk(50).indices.tolist()
            votes = [0.0] * 3
            for j in top:
                votes[int(bank_y[j])] += math.exp((float(cos[j]) - float(cos.max())) / 0.1)
            correct += int(np.argmax(votes)) == int(qy[i])
        assert out[part]["knn50"] == pytest.approx(100.0 * correct / len(qf))
        assert out[part]["linear_probe"] == pytest.approx(linear_probe(bank_f, bank_y, qf, qy))
        assert out[part]["R@1"] == bank_recall(qf, qy, bank_f, bank_y, (1,))[1]
    assert set(out["test"]) == {"R@1", "R@2", "R@5", "R@10", "R@20", "R@50", "knn50", "linear_probe"}
