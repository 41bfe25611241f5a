"""Gradient-cached SimCLR steps (NT-Xent layout): with per-sample normalisation (a tiny ViT, layer norm in the
head) the parameter gradients equal the uncached one-pass step's; a batch-norm ResNet gets a warning, once."""

from __future__ import annotations

import logging

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from simcse_weince.losses import WeinceLoss
from simcse_weince.training.arguments import ContrastiveTrainingArguments
from simcse_weince.vision.model import ProjectionHead, SimCLRModel
from simcse_weince.vision.trainer import SimCLRTrainer
from tests.helpers import assert_grads_close, grads

B, SIZE = 12, 16


def tiny_vit_model() -> SimCLRModel:
    """SimCLRModel with a 2-block, 32-wide ViT backbone (timm's class, as ``vit_small``) and layer norm in place
    of the head's batch norm: every row is normalised on its own."""
    torch.manual_seed(0)
    model = SimCLRModel("resnet18_slim", image_size=SIZE, projection_dim=16)
    model.backbone = VisionTransformer(
        img_size=SIZE, patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=0
    )
    model.head = ProjectionHead(32, 32, 16)
    model.head[1] = nn.LayerNorm(32)
    return model.train()


def trainer(model: nn.Module, tmp_path, chunk: int | None) -> SimCLRTrainer:
    args = ContrastiveTrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=B, gradient_cache_chunk_size=chunk,
        report_to="none", use_cpu=True,
    )  # fmt: skip
    return SimCLRTrainer(model=model, args=args, loss=WeinceLoss(0.5, layout="ntxent", min_tail_points=10))


@pytest.fixture(scope="module")
def batch() -> dict[str, torch.Tensor]:
    """Two views per image, as the data pipeline hands them over: augmentations are drawn in the dataset's
    ``__getitem__`` (DataLoader workers), so they are fixed in the batch before the step and need no replay."""
    g = torch.Generator().manual_seed(1)
    return {"pixel_values": torch.randn(B, 2, 3, SIZE, SIZE, generator=g), "labels": torch.arange(B)}


@pytest.mark.parametrize("chunk", [4, 5])
def test_vit_cached_gradients_equal_the_one_pass_step(chunk: int, batch: dict, tmp_path) -> None:
    """Within 1e-4 of each tensor's scale: chunks of another size round differently in the matrix products
    (~1e-7 in the embeddings, measured 1e-6 in the loss) and WEINCE's fitted β and λ pass that on amplified;
    the measured worst case is 5e-5 (chunk 5), where a wrong scale or a wrong chunk is off by far more."""
    model = tiny_vit_model()
    cached = trainer(model, tmp_path, chunk)
    loss = cached.compute_loss(model, batch)
    assert cached.contrastive_loss.last_diagnostics["lambda_mean"] > 0.01  # WEINCE's λ is active
    loss.backward()
    got = grads(model)
    want_loss = trainer(model, tmp_path, None).compute_loss(model, batch)
    want_loss.backward()
    torch.testing.assert_close(loss.detach(), want_loss.detach())
    assert_grads_close(got, grads(model), rel=1e-4)


def test_batch_norm_model_warns_once(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = SimCLRModel("resnet18_slim", image_size=8, projection_dim=16).train()
    batch = {"pixel_values": torch.randn(B, 2, 3, 8, 8), "labels": torch.arange(B)}
    cached = trainer(model, tmp_path, 4)
    with caplog.at_level(logging.WARNING, logger="simcse_weince.training.trainer"):
        for _ in range(2):  # the warning comes with the chunked embedding, before any backward
            cached.compute_loss(model, batch)
        trainer(model, tmp_path, B).compute_loss(model, batch)  # one chunk holds the batch: no caching, exact
    warnings = [r for r in caplog.records if "batch-norm" in r.getMessage()]
    assert len(warnings) == 1 and "statistics of each chunk" in warnings[0].getMessage()
