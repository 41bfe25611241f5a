"""Gradient caching, model-agnostic: batch splitting, RNG replay, the cached backward against a full-graph
reference (dropout on, several chunkings, gradient scaling), batch-norm buffers, and the argument checks."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from torch import nn

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.training.arguments import ContrastiveTrainingArguments
from simcse_weince.training.grad_cache import (
    RngState,
    batch_norm_layers,
    cached_contrastive_loss,
    split_batch,
)
from tests.helpers import assert_grads_close, grads


class TwoViewMLP(nn.Module):
    """Two dropout views of each row in one forward of 2b rows, as the SimCSE model does."""

    def __init__(self, batch_norm: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(8, 16), nn.BatchNorm1d(16) if batch_norm else nn.LayerNorm(16), nn.Tanh(),
            nn.Dropout(0.3), nn.Linear(16, 6),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.net(torch.cat([x, x]))  # (2b, 6)
        return z[: x.shape[0]], z[x.shape[0] :]


def embed_with(model: nn.Module):
    return lambda chunk: model(chunk["x"])


def reference_grads(model: nn.Module, x: torch.Tensor, chunk: int, loss_fn, scale: float, seed: int):
    """The uncached step with the cached step's masks: the same chunk forwards from the same seed, all kept in
    one graph, one backward of the full-batch loss."""
    torch.manual_seed(seed)
    views = [model(c["x"]) for c in split_batch({"x": x}, chunk)]
    loss = loss_fn(torch.cat([a for a, _ in views]), torch.cat([p for _, p in views]))
    (scale * loss).backward()
    return loss.detach(), grads(model)


def test_split_batch_slices_tensors_and_shares_the_rest() -> None:
    batch = {"x": torch.arange(7), "y": torch.ones(7, 2), "name": "same", "scalar": torch.tensor(3.0)}
    chunks = split_batch(batch, 3)
    assert [c["x"].tolist() for c in chunks] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [c["y"].shape[0] for c in chunks] == [3, 3, 1]
    assert all(c["name"] == "same" and c["scalar"] is batch["scalar"] for c in chunks)
    with pytest.raises(ValueError, match="leading sizes"):
        split_batch({"x": torch.zeros(4), "y": torch.zeros(5)}, 2)
    with pytest.raises(ValueError, match="chunk_size must be >= 1; got 0"):
        split_batch(batch, 0)


def test_rng_replay_draws_the_same_masks_and_leaves_the_stream_alone() -> None:
    torch.manual_seed(0)
    state = RngState()
    first = torch.rand(5)
    after = torch.get_rng_state()
    with state.replay():
        assert torch.equal(torch.rand(5), first)
    assert torch.equal(torch.get_rng_state(), after)  # the run's stream continues as if nothing was replayed


@pytest.mark.parametrize("chunk", [1, 4, 5, 12])
@pytest.mark.parametrize("loss_name", ["weince", "infonce"])
def test_cached_gradients_equal_the_full_graph_gradients(chunk: int, loss_name: str) -> None:
    torch.manual_seed(0)
    model, x = TwoViewMLP().train(), torch.randn(12, 8)
    loss_fn = WeinceLoss(0.1, min_tail_points=10) if loss_name == "weince" else InfoNCELoss(0.1)
    want_loss, want = reference_grads(model, x, chunk, loss_fn, scale=0.25, seed=1)

    torch.manual_seed(1)
    loss, anchors, positives = cached_contrastive_loss(embed_with(model), split_batch({"x": x}, chunk), loss_fn)
    assert anchors.shape == positives.shape == (12, 6) and not anchors.requires_grad
    assert not any(p.grad is not None for p in model.parameters())  # nothing reaches θ before backward
    (0.25 * loss).backward()  # grad_output 0.25 (e.g. 1 / gradient_accumulation_steps) reaches every chunk
    torch.testing.assert_close(loss.detach(), want_loss)
    assert_grads_close(grads(model), want)


def test_without_the_rng_replay_the_gradients_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the replay must redraw the first pass's dropout masks."""
    torch.manual_seed(0)
    model, x = TwoViewMLP().train(), torch.randn(12, 8)
    loss_fn = WeinceLoss(0.1, min_tail_points=10)
    _, want = reference_grads(model, x, 4, loss_fn, scale=1.0, seed=1)
    monkeypatch.setattr(RngState, "replay", lambda self: nullcontext())
    torch.manual_seed(1)
    loss, _, _ = cached_contrastive_loss(embed_with(model), split_batch({"x": x}, 4), loss_fn)
    loss.backward()
    with pytest.raises(AssertionError):
        assert_grads_close(grads(model), want)


def test_replay_context_wraps_every_chunk_and_marks_the_last() -> None:
    torch.manual_seed(0)
    model, x = TwoViewMLP().train(), torch.randn(10, 8)
    seen: list[bool] = []

    def context(last: bool):
        seen.append(last)
        return nullcontext()

    loss, _, _ = cached_contrastive_loss(embed_with(model), split_batch({"x": x}, 4), InfoNCELoss(0.1), context)
    assert seen == []  # the replay happens in the backward pass
    loss.backward()
    assert seen == [False, False, True]


def test_batch_norm_statistics_are_updated_by_the_replay_only() -> None:
    torch.manual_seed(0)
    model, x = TwoViewMLP(batch_norm=True).train(), torch.randn(12, 8)
    layers = batch_norm_layers(model)
    bn = layers[0]
    before = bn.running_mean.clone()
    loss, _, _ = cached_contrastive_loss(embed_with(model), split_batch({"x": x}, 4), InfoNCELoss(0.1), None, layers)
    assert torch.equal(bn.running_mean, before) and int(bn.num_batches_tracked) == 0
    loss.backward()
    assert int(bn.num_batches_tracked) == 3  # one update per chunk replay
    assert batch_norm_layers(model.eval()) == []  # layers in eval mode use running statistics: exact


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gradient_cache_chunk_size": 0}, "gradient_cache_chunk_size must be >= 1; got 0"),
        ({"gradient_cache_chunk_size": 8, "ddp_static_graph": True}, "does not work with ddp_static_graph"),
    ],
)
def test_invalid_chunk_settings_are_refused(kwargs: dict, message: str, tmp_path) -> None:
    with pytest.raises(ValueError, match=message):
        ContrastiveTrainingArguments(output_dir=str(tmp_path), **kwargs)
    assert (
        ContrastiveTrainingArguments(output_dir=str(tmp_path), gradient_cache_chunk_size=8).gradient_cache_chunk_size
        == 8
    )


def test_one_process_on_several_gpus_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match="needs one process per GPU, but this single process sees 2 GPUs"):
        ContrastiveTrainingArguments(output_dir=str(tmp_path), gradient_cache_chunk_size=8)
    ContrastiveTrainingArguments(output_dir=str(tmp_path), gradient_cache_chunk_size=8, use_cpu=True)  # CPU: fine


@pytest.mark.parametrize("chunk", [1, 5])
def test_a_loss_with_parameters_gets_its_gradient_through_the_cache(chunk: int) -> None:
    """The learned link's (α, b): the cached backward gives them the full-graph gradient, times grad_output, and
    leaves them alone until the backward (the loss's gradient is taken once, in step 2). Without passing them the
    cache would drop it, and a learned link would never move under ``gradient_cache_chunk_size``."""
    from simcse_weince.losses import LearnedLinkLoss

    def link() -> LearnedLinkLoss:
        loss = LearnedLinkLoss(0.1)
        with torch.no_grad():
            loss.log_a.fill_(0.2)
            loss.b.fill_(0.3)
        return loss

    torch.manual_seed(0)
    model, x = TwoViewMLP().train(), torch.randn(12, 8)
    reference = link()
    want_loss, want = reference_grads(model, x, chunk, reference, scale=0.25, seed=1)
    model.zero_grad()
    cached_loss = link()
    params = [cached_loss.log_a, cached_loss.b]
    torch.manual_seed(1)
    loss, _, _ = cached_contrastive_loss(
        embed_with(model), split_batch({"x": x}, chunk), cached_loss, loss_parameters=params
    )
    assert all(p.grad is None for p in params)
    (0.25 * loss).backward()
    torch.testing.assert_close(loss.detach(), want_loss)
    assert_grads_close(grads(model), want)
    for got, expected in zip(params, (reference.log_a, reference.b), strict=True):
        assert expected.grad is not None and float(expected.grad) != 0.0
        torch.testing.assert_close(got.grad, expected.grad)
