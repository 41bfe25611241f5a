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
    Fitted,
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


def _jobs(n: int) -> list[Job]:
    idx = np.random.default_rng(1).permutation(n)
    split = np.random.RandomState(1111).permutation(n - 40)  # validation_split's draw for the n − 40 rows of idx[40:]
    held = int(0.05 * (n - 40))
    return [
        Job(idx[:180], idx[180:], 1e-5),
        Job(idx[:150], idx[150:], 1e-2),  # different sizes: ragged last batches, passes of fewer batches
        Job(idx[40:], None, 1e-3),  # SentEval's validation_split 0.05
        Job(np.sort(idx[:201]), idx[201:], 1e-4),
        # groups of several models: penalties sharing rows (and permutations), stopping at different epochs
        Job(idx[:180], idx[180:], 1e-3),
        Job(idx[:180], idx[180:], 1e-2),
        Job(idx[40:], None, 1e-2),
        # other rows, the same generator history as a group above (same sizes): a shared generator
        Job(idx[60:240], idx[:60], 1e-4),
        Job(idx[:200], None, 1e-4),
        # the rows SentEval's validation split gives Job(idx[40:], None, ·), but given: another generator history
        Job(idx[40:][split[held:]], idx[40:][split[:held]], 1e-3),
    ]


ENGINES_HERE = ["eager", "static", *(["graph"] if torch.cuda.is_available() else [])]


@pytest.mark.parametrize("engine", ENGINES_HERE)
@pytest.mark.parametrize("cfg", [TEST_CONFIG, FAST_CONFIG, ClassifierConfig("adam", 16, 2, 1, max_epoch=12)])
def test_batched_fits_equal_the_per_model_loop(cfg: ClassifierConfig, engine: str) -> None:
    device = "cuda" if engine == "graph" else "cpu"
    x, y = _data()
    jobs = _jobs(len(y))
    fitted = fit_logregs(x.to(device), y.to(device), jobs, 3, cfg, engine=engine)
    fitted = Fitted(fitted.weight.cpu(), fitted.bias.cpu(), fitted.dev_accuracy)
    if engine == "graph":  # recorded and replayed, not the unrecorded fallback
        from simcse_weince.evaluation import logreg_steps

        assert not logreg_steps._capture_failed
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


@pytest.mark.parametrize("cfg", [TEST_CONFIG, FAST_CONFIG])
def test_static_steps_follow_the_eager_trajectories(cfg: ClassifierConfig) -> None:
    """Fixed-shape steps (masks, padded batches, groups never dropped) give the eager engine's models."""
    x, y = _data(300, d=9, classes=2, seed=3)
    jobs = [*_jobs(len(y)), Job(np.arange(7, 300), np.arange(7), 1e-4)]  # a group with one more batch a pass
    eager = fit_logregs(x, y, jobs, 2, cfg, engine="eager")
    static = fit_logregs(x, y, jobs, 2, cfg, engine="static")
    np.testing.assert_array_equal(static.dev_accuracy, eager.dev_accuracy)
    torch.testing.assert_close(static.weight, eager.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(static.bias, eager.bias, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_graph_replays_equal_the_static_steps_on_the_gpu(caplog) -> None:
    from simcse_weince.evaluation import logreg_steps

    x, y = _data()
    jobs = _jobs(len(y))
    static = fit_logregs(x.cuda(), y.cuda(), jobs, 3, TEST_CONFIG, engine="static")
    with caplog.at_level("WARNING"):
        graph = fit_logregs(x.cuda(), y.cuda(), jobs, 3, TEST_CONFIG, engine="graph")
    assert "CUDA graph" not in caplog.text and not logreg_steps._capture_failed  # recorded and replayed
    np.testing.assert_array_equal(graph.dev_accuracy, static.dev_accuracy)
    # the same kernels; only cuBLAS's choice of algorithm under capture could differ
    torch.testing.assert_close(graph.weight, static.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(graph.bias, static.bias, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("engine", ["fused", "graph" if not torch.cuda.is_available() else "nonsense"])
def test_an_unknown_or_impossible_engine_is_refused(engine: str) -> None:
    x, y = _data(40)
    with pytest.raises(ValueError, match=f"engine must be one of .* got '{engine}'"):
        fit_logregs(x, y, [Job(np.arange(30), np.arange(30, 40), 1e-3)], 3, TEST_CONFIG, engine=engine)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_failed_graph_capture_falls_back_to_the_same_steps_once(monkeypatch, caplog) -> None:
    import contextlib

    from simcse_weince.evaluation import logreg_steps

    @contextlib.contextmanager
    def broken(graph, stream=None):  # runs the step for real, leaves another stream current, then fails
        yield
        torch.cuda.set_stream(torch.cuda.Stream())
        raise RuntimeError("capture refused")

    monkeypatch.setattr(torch.cuda, "graph", broken)
    monkeypatch.setattr(logreg_steps, "_capture_failed", False)
    x, y = _data()
    jobs = _jobs(len(y))
    stream = torch.cuda.current_stream()
    static = fit_logregs(x.cuda(), y.cuda(), jobs, 3, TEST_CONFIG, engine="static")
    with caplog.at_level("WARNING"):
        graph = fit_logregs(x.cuda(), y.cuda(), jobs, 3, TEST_CONFIG, engine="graph")
        again = fit_logregs(x.cuda(), y.cuda(), jobs, 3, TEST_CONFIG, engine="graph")
    assert caplog.text.count("CUDA graph capture failed (capture refused)") == 1  # once per process
    assert torch.cuda.current_stream() == stream
    torch.testing.assert_close(graph.weight, static.weight, rtol=0, atol=0)
    torch.testing.assert_close(again.weight, static.weight, rtol=0, atol=0)


def test_the_warm_up_before_a_capture_leaves_no_trace_even_with_one_batch_a_pass() -> None:
    from simcse_weince.evaluation.logreg_steps import StaticPasses

    x, y = _data(60)
    xa = torch.cat([x, torch.ones(60, 1)], dim=1)
    params = torch.randn(2, 3, 7)
    passes = StaticPasses(xa, y, 3, 64, 50, params, torch.full((2, 3, 1), 1e-3), "adam")  # B = 1 batch
    passes.run_pass(np.stack([np.arange(50), np.arange(10, 60)]), np.array([50, 50]))
    before = [t.clone() for t in (passes.params, passes.exp_avg, passes.exp_avg_sq, passes.counter)]
    passes._warm_up()
    for was, now in zip(before, (passes.params, passes.exp_avg, passes.exp_avg_sq, passes.counter), strict=True):
        assert torch.equal(was, now)


class _FakeGraph:
    def __init__(self, replay) -> None:
        self.replay = replay


def test_a_recorded_step_is_kept_only_if_its_replay_reproduces_the_direct_step() -> None:
    """The run-time check behind every capture, with stand-ins for the recording (no GPU here)."""
    from simcse_weince.evaluation.logreg_steps import StaticPasses

    x, y = _data(60)
    xa = torch.cat([x, torch.ones(60, 1)], dim=1)
    passes = StaticPasses(xa, y, 3, 16, 50, torch.randn(2, 3, 7), torch.full((2, 3, 1), 1e-3), "adam")
    passes.run_pass(np.stack([np.arange(50), np.arange(10, 60)]), np.array([50, 40]))
    passes.counter.zero_()
    before = [t.clone() for t in passes._state()]
    passes._graph = _FakeGraph(passes._step)  # a faithful recording
    assert passes._replay_matches_step()
    passes._graph = _FakeGraph(lambda: passes.counter.add_(1))  # advances, never updates the parameters
    assert not passes._replay_matches_step()
    passes._graph = _FakeGraph(lambda: (passes._step(), passes.counter.add_(1)))  # one batch too far
    assert not passes._replay_matches_step()
    for was, now in zip(before, passes._state(), strict=True):  # each check leaves the state as it was
        assert torch.equal(was, now)


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
def test_a_static_step_needs_no_value_from_the_host(optim: str) -> None:
    """What a CUDA graph can capture: the step runs on the meta device (shapes, no data), where any host read —
    ``.item()``, ``.cpu()``, a boolean mask's data-dependent shape — raises."""
    from simcse_weince.evaluation.logreg_steps import StaticPasses

    meta = torch.device("meta")
    with pytest.raises(RuntimeError, match="meta"):  # the probe works: a host read fails there
        torch.ones(3, device=meta).sum().item()
    params = torch.empty(3, 2 * 4, 7, device=meta)
    passes = StaticPasses(
        torch.empty(50, 7, device=meta), torch.empty(50, dtype=torch.int64, device=meta), 4, 16, 40,
        params, torch.empty(3, 8, 1, device=meta), optim,
    )  # fmt: skip
    passes._step()
    assert passes.params.shape == (3, 8, 7) and passes.counter.device == meta
