"""The batched SentEval classifier against a per-model loop written from SentEval's ``MLP.fit`` with
torch.optim (one model at a time, its own ``np.random.seed``, autograd, ``copy.deepcopy`` of the best)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simcse_weince.evaluation.senteval_classifier import (
    FAST_CONFIG,
    TEST_CONFIG,
    ClassifierConfig,
    Job,
    fit_logregs,
    initial_linear,
)
from tests.evaluation.senteval_reference import reference_fit


def _data(n: int = 240, d: int = 6, classes: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, d, generator=g) * 1.2
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, d, generator=g)  # overlapping classes: accuracies well below 1
    return x, y


@pytest.mark.parametrize("cfg", [TEST_CONFIG, FAST_CONFIG, ClassifierConfig("adam", 16, 2, 1, max_epoch=12)])
def test_batched_fits_equal_the_per_model_loop(cfg: ClassifierConfig) -> None:
    x, y = _data()
    rng = np.random.default_rng(1)
    idx = rng.permutation(len(y))
    jobs = [
        Job(idx[:180], idx[180:], 1e-5),
        Job(idx[:150], idx[150:], 1e-2),  # different sizes: ragged last batches
        Job(idx[40:], None, 1e-3),  # SentEval's validation_split 0.05
        Job(np.sort(idx[:201]), idx[201:], 1e-4),
        # groups of several models: penalties sharing rows (and permutations), stopping at different epochs
        Job(idx[:180], idx[180:], 1e-3),
        Job(idx[:180], idx[180:], 1e-2),
        Job(idx[40:], None, 1e-2),
    ]
    fitted = fit_logregs(x, y, jobs, 3, cfg)
    for m, job in enumerate(jobs):
        model, best = reference_fit(x, y, job, 3, cfg)
        assert fitted.dev_accuracy[m] == best, m
        torch.testing.assert_close(fitted.weight[m], model[0].weight.detach().T, rtol=1e-4, atol=2e-5)
        torch.testing.assert_close(fitted.bias[m], model[0].bias.detach(), rtol=1e-4, atol=2e-5)
        pred = model(x).argmax(1)
        assert torch.equal(fitted.predict(m, x), pred)


def test_initial_weights_are_nn_linear_under_the_seed_and_leave_the_rng_alone() -> None:
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    w, b = initial_linear(7, 2, 1111)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(1111)
    layer = torch.nn.Linear(7, 2)
    assert torch.equal(w, layer.weight.detach().T) and torch.equal(b, layer.bias.detach())


def test_a_job_without_validation_rows_is_refused() -> None:
    x, y = _data(40)
    with pytest.raises(ValueError, match="needs training and validation rows; got 10 and 0"):
        fit_logregs(x, y, [Job(np.arange(10), np.arange(0), 1e-3)], 3, TEST_CONFIG)
