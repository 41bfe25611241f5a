"""SimCLR model: backbone + projection head; both views go through the backbone in one batch."""

from __future__ import annotations

import torch
from torch import nn

from simcse_weince.vision.backbones import build_backbone


class ProjectionHead(nn.Sequential):
    """SimCLR's 2-layer MLP: Linear(d, h) → BatchNorm → ReLU → Linear(h, out)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int = 64) -> None:
        super().__init__(nn.Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True),
                         nn.Linear(hidden_dim, out_dim))  # fmt: skip


class SimCLRModel(nn.Module):
    """Backbone (features for evaluation) + projection head (embeddings for the loss).

    Args:
        backbone: see :func:`build_backbone`.
        image_size: input resolution (selects the CIFAR stem for ≤ 64).
        projection_dim: output size of the head (64 in the paper's runs).
        projection_hidden: hidden size of the head (default: the feature size).
    """

    def __init__(self, backbone: str = "resnet18", image_size: int = 32, projection_dim: int = 64,
                 projection_hidden: int | None = None, cifar_stem: bool | None = None) -> None:  # fmt: skip
        super().__init__()
        self.backbone, self.feature_dim = build_backbone(backbone, image_size, cifar_stem)
        self.head = ProjectionHead(self.feature_dim, projection_hidden or self.feature_dim, projection_dim)

    def forward(self, pixel_values: torch.Tensor) -> dict[str, torch.Tensor]:
        """(B, 2, C, H, W) two views -> ``anchors``, ``positives`` (B, projection_dim), one backbone pass."""
        b = pixel_values.shape[0]
        x = torch.cat([pixel_values[:, 0], pixel_values[:, 1]])  # (2B, C, H, W)
        z = self.head(self.backbone(x))
        return {"anchors": z[:b], "positives": z[b:]}

    @torch.no_grad()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Frozen backbone features (N, feature_dim), before the head."""
        return self.backbone(images)
