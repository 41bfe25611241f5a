"""The losses under mixed precision and on non-finite embeddings."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.losses import InfoNCELoss, WeinceLoss


def _near_duplicates() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(256, 64)
    return x, x + 0.02 * torch.randn_like(x)  # positives at s ≈ 0.9998: bf16 would round them to 1


@pytest.mark.parametrize("loss_fn", [WeinceLoss(0.05), InfoNCELoss(0.05), WeinceLoss(0.5, layout="ntxent")])
def test_autocast_bf16_gives_the_float32_loss(loss_fn) -> None:
    x, y = _near_duplicates()
    exact = loss_fn(x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = loss_fn(x, y)
    assert torch.isfinite(mixed) and mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_embeddings_raise(bad: float) -> None:
    x, y = _near_duplicates()
    y[3, 5] = bad
    with pytest.raises(ValueError, match="positives contain NaN or Inf"):
        WeinceLoss(0.05)(x, y)
    with pytest.raises(ValueError, match="anchors contain NaN or Inf"):
        InfoNCELoss(0.05)(y, x)
