"""Image backbones for SimCLR: ResNet-18/50 (torchvision), a slim ResNet-18 for CPUs (timm), ViT-Small (timm).

For 32×32 inputs (CIFAR, ImageNet-32) the ResNets get the CIFAR stem: a 3×3 stride-1 first convolution and
no max-pool. Every backbone returns pooled features (N, feature_dim) with its classifier removed.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn

Backbone = Literal["resnet18", "resnet50", "resnet18_slim", "vit_small"]
BACKBONES: tuple[str, ...] = get_args(Backbone)


def _cifar_stem(model: nn.Module) -> None:
    """3×3 stride-1 first convolution (same width as before) and no max-pool."""
    model.conv1 = nn.Conv2d(3, model.conv1.out_channels, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()


def build_backbone(name: str, image_size: int = 32, cifar_stem: bool | None = None) -> tuple[nn.Module, int]:
    """(backbone, feature_dim). ``cifar_stem`` defaults to ``image_size <= 64``."""
    if name not in BACKBONES:
        raise ValueError(f"backbone must be one of {BACKBONES}, got {name!r}")
    small = image_size <= 64 if cifar_stem is None else cifar_stem
    if name in ("resnet18", "resnet50"):
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        dim = model.fc.in_features
        model.fc = nn.Identity()
        if small:
            _cifar_stem(model)
        return model, dim
    if name == "resnet18_slim":
        from timm.models.resnet import BasicBlock, ResNet

        # ResNet-18 layout at a quarter of the width (16-32-64-128 channels): ~16x fewer FLOPs, for CPUs.
        model = ResNet(BasicBlock, (2, 2, 2, 2), num_classes=0, stem_width=16, channels=(16, 32, 64, 128))
        if small:
            _cifar_stem(model)
        return model, model.num_features
    import timm

    patch = 4 if image_size <= 64 else 16
    model = timm.create_model(
        "vit_small_patch16_224", pretrained=False, num_classes=0, img_size=image_size, patch_size=patch
    )
    return model, model.num_features


@torch.no_grad()
def feature_dim(model: nn.Module, image_size: int) -> int:
    """Feature size by a dry run (for backbones built elsewhere)."""
    was = model.training
    model.eval()
    out = model(torch.zeros(1, 3, image_size, image_size)).shape[-1]
    model.train(was)
    return int(out)
