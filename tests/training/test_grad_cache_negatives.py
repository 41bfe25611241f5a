"""Gradient caching with SimCSE's supervised rows: anchors, positives and k hard negatives (k, B, D) per batch.

A stand-in encoder takes (B, n, F) rows (n = 2 + k texts per row, as the supervised collator's (B, n, L)
``input_ids``), encodes all B·n texts in one forward with dropout and returns the views as the text model
does. The cached step (chunks of 1, 4 and 5 rows of 10) equals the uncached step with the same dropout masks
in loss and parameter gradients, for InfoNCE and WEINCE (β by OLS), k = 1 and 2, hard-negative weight 0 and
1, with and without a negative mask; through ``ContrastiveTrainer.compute_loss`` as well."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.training.arguments import ContrastiveTrainingArguments
from simcse_weince.training.grad_cache import batch_rows, cached_contrastive_loss, split_batch
from simcse_weince.training.trainer import ContrastiveTrainer
from tests.helpers import assert_grads_close, grads

B, F, D = 10, 8, 6


class RowsEncoder(nn.Module):
    """(B, n, F) rows -> ``{"anchors": (B, D), "positives": (B, D), "negatives": (n-2, B, D)}`` (no
    ``negatives`` for n = 2): every text of the batch in one forward, column-major as the text model."""

    def __init__(self, dropout: float = 0.3) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(F, 16), nn.LayerNorm(16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, D))

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        b, n, _ = x.shape
        if attention_mask is not None:  # rides along to check that (B, n, ·) inputs split by rows
            x = x * attention_mask[..., None]
        z = self.net(x.transpose(0, 1).reshape(n * b, F)).view(n, b, D)
        views = {"anchors": z[0], "positives": z[1]}
        if n > 2:
            views["negatives"] = z[2:]
        return views


class ChunkedForward(nn.Module):
    """``model`` run chunk by chunk, the views concatenated in one graph (negatives along their row dim 1): the
    uncached step that draws the cached step's dropout masks."""

    def __init__(self, model: nn.Module, chunk: int) -> None:
        super().__init__()
        self.model, self.chunk = model, chunk

    def forward(self, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        views = [self.model(**c) for c in split_batch(inputs, self.chunk)]
        return {k: torch.cat([v[k] for v in views], dim=1 if k == "negatives" else 0) for k in views[0]}


def make(loss_name: str, weight: float):
    if loss_name == "weince":
        return WeinceLoss(0.1, min_tail_points=10, margin=0.0, beta_mode="ols", hard_negative_weight=weight)
    return InfoNCELoss(0.1, hard_negative_weight=weight)


def rows(k: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(B, 2 + k, generator=g) > 0.1).float()  # (B, n): a few texts zeroed
    return {"x": torch.randn(B, 2 + k, F, generator=g), "attention_mask": mask}


def false_negatives(k: int, seed: int = 0) -> torch.Tensor:
    """(B, (1+k)B) bool: a random tenth of the candidates, never an anchor's own positive."""
    mask = torch.rand(B, (1 + k) * B, generator=torch.Generator().manual_seed(seed)) < 0.1
    mask[torch.arange(B), torch.arange(B)] = False
    return mask


def test_split_batch_cuts_supervised_rows_along_dim_0() -> None:
    inputs = {"input_ids": torch.arange(7 * 3 * 4).view(7, 3, 4), "attention_mask": torch.ones(7, 3, 4)}
    assert batch_rows(inputs) == 7
    chunks = split_batch(inputs, 3)
    assert [tuple(c["input_ids"].shape) for c in chunks] == [(3, 3, 4), (3, 3, 4), (1, 3, 4)]
    assert torch.equal(torch.cat([c["input_ids"] for c in chunks]), inputs["input_ids"])


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("weight", [0.0, 1.0])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("loss_name", ["weince", "infonce"])
@pytest.mark.parametrize("chunk", [1, 4, 5])
def test_cached_gradients_with_negatives_equal_the_full_graph_gradients(
    chunk: int, loss_name: str, k: int, weight: float, masked: bool
) -> None:
    torch.manual_seed(0)
    model, inputs = RowsEncoder().train(), rows(k)
    loss_module = make(loss_name, weight)
    mask = false_negatives(k) if masked else None

    def loss_fn(anchors, positives, negatives=None):
        return loss_module(anchors, positives, negative_mask=mask, negatives=negatives)

    torch.manual_seed(1)
    views = ChunkedForward(model, chunk)(**inputs)
    assert views["negatives"].shape == (k, B, D)
    want_loss = loss_fn(views["anchors"], views["positives"], views["negatives"])
    (0.25 * want_loss).backward()
    want = grads(model)
    if loss_name == "weince":
        assert float(loss_module.last_diagnostics["lambda_mean"]) > 0.01  # WEINCE's λ is active

    def embed(c):
        v = model(**c)
        return v["anchors"], v["positives"], v["negatives"]

    torch.manual_seed(1)
    loss, anchors, positives, negatives = cached_contrastive_loss(embed, split_batch(inputs, chunk), loss_fn)
    assert negatives.shape == (k, B, D) and not negatives.requires_grad
    for got, name in [(anchors, "anchors"), (positives, "positives"), (negatives, "negatives")]:
        torch.testing.assert_close(got, views[name].detach())  # negatives: the uncached (k, B, D) layout
    assert not any(p.grad is not None for p in model.parameters())
    (0.25 * loss).backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(grads(model), want)


def test_negatives_as_a_list_of_columns_and_zero_columns() -> None:
    """``embed`` may give the negatives as k (b, D) tensors; k = 0 (an empty column list) is the 2-view loss."""
    torch.manual_seed(0)
    model, inputs = RowsEncoder().train(), rows(2)
    loss_fn = make("weince", 1.0)

    def as_list(c):
        v = model(**c)
        return v["anchors"], v["positives"], list(v["negatives"].unbind(0))

    torch.manual_seed(1)
    views = ChunkedForward(model, 4)(**inputs)
    want_loss = loss_fn(views["anchors"], views["positives"], negatives=views["negatives"])
    want_loss.backward()
    want = grads(model)
    torch.manual_seed(1)
    loss, *_ = cached_contrastive_loss(as_list, split_batch(inputs, 4), loss_fn)
    loss.backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(grads(model), want)

    def no_columns(c):
        v = model(**c)
        return v["anchors"], v["positives"], []

    torch.manual_seed(1)
    views = ChunkedForward(model, 4)(**inputs)
    want_loss = loss_fn(views["anchors"], views["positives"])
    want_loss.backward()
    want = grads(model)
    torch.manual_seed(1)
    loss, _, _, negatives = cached_contrastive_loss(no_columns, split_batch(inputs, 4), loss_fn)
    assert negatives.shape == (0, B, D)
    loss.backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(grads(model), want)


def test_chunks_with_different_views_are_refused() -> None:
    answers = iter([(torch.zeros(2, D), torch.zeros(2, D), torch.zeros(1, 2, D)), (torch.zeros(2, D),) * 2])
    with pytest.raises(ValueError, match="same views"):
        cached_contrastive_loss(lambda c: next(answers), [{}, {}], InfoNCELoss(0.1))
    with pytest.raises(ValueError, match=r"must be \(k, b, D\)"):
        cached_contrastive_loss(lambda c: (torch.zeros(2, D),) * 3, [{}], InfoNCELoss(0.1))


class MaskedTrainer(ContrastiveTrainer):
    """A fixed false-negative mask for every batch."""

    mask: torch.Tensor | None = None

    def negative_mask(self, inputs):
        return self.mask, {}


def make_trainer(model: nn.Module, out: Path, chunk: int | None, k: int) -> MaskedTrainer:
    args = ContrastiveTrainingArguments(
        output_dir=str(out), per_device_train_batch_size=B, gradient_cache_chunk_size=chunk, report_to="none",
        use_cpu=True,
    )  # fmt: skip
    t = MaskedTrainer(model=model, args=args, loss=make("weince", 1.0))
    t.mask = false_negatives(k) if k else None
    return t


@pytest.mark.parametrize("k", [0, 2])
def test_trainer_cached_step_equals_the_uncached_step_with_the_same_masks(k: int, tmp_path: Path) -> None:
    """``compute_loss``: cached (chunks of 4) on the encoder against uncached on the same chunk forwards in one
    graph; the returned views carry the negatives (k, B, D) exactly when the model returns them."""
    torch.manual_seed(0)
    model, inputs = RowsEncoder().train(), rows(k)
    reference = ChunkedForward(model, 4).train()
    torch.manual_seed(1)
    want_loss, want_views = make_trainer(reference, tmp_path, None, k).compute_loss(
        reference, inputs, return_outputs=True
    )
    (want_loss / 2).backward()
    want = grads(model)
    torch.manual_seed(1)
    loss, views = make_trainer(model, tmp_path, 4, k).compute_loss(model, inputs, return_outputs=True)
    (loss / 2).backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(grads(model), want)
    assert views.keys() == want_views.keys() == ({"anchors", "positives"} | ({"negatives"} if k else set()))
    for name, v in views.items():
        torch.testing.assert_close(v, want_views[name].detach())


def test_trainer_dropout_off_cached_step_equals_the_one_forward_step(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, inputs = RowsEncoder(dropout=0.0).train(), rows(2)
    want_loss = make_trainer(model, tmp_path, None, 2).compute_loss(model, inputs)
    want_loss.backward()
    want = grads(model)
    loss = make_trainer(model, tmp_path, 3, 2).compute_loss(model, inputs)
    loss.backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(grads(model), want)
