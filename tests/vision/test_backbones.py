"""Backbones: shapes, the CIFAR stem, the choices."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.vision.backbones import build_backbone


def test_backbone_shapes_and_cifar_stem() -> None:
    model, dim = build_backbone("resnet18", 32)
    assert dim == 512 and model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, torch.nn.Identity)
    big, _ = build_backbone("resnet18", 96)
    assert big.conv1.kernel_size == (7, 7)
    slim, sdim = build_backbone("resnet18_slim", 32)
    assert sdim == 128 and slim(torch.zeros(2, 3, 32, 32)).shape == (2, 128)
    _, rdim = build_backbone("resnet50", 32)
    assert rdim == 2048
    vit, vdim = build_backbone("vit_small", 32)
    assert vdim == 384 and vit(torch.zeros(1, 3, 32, 32)).shape == (1, 384)
    with pytest.raises(ValueError, match="backbone must be"):
        build_backbone("vgg", 32)
