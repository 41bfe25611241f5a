"""SimCLR model: backbone + projection head; both views go through the backbone in one batch.

Also the one owner of its save format: :func:`save_simclr` writes ``config.json`` (construction arguments),
``model.safetensors`` (backbone + head) and ``backbone.safetensors`` (the backbone alone, for transfer);
:func:`load_simclr` reads it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from simcse_weince.core.model_sources import simclr_folder  # re-exported: a vision run's folder, found without torch
from simcse_weince.vision.backbones import build_backbone


class ProjectionHead(nn.Sequential):
    """SimCLR's 2-layer MLP: Linear(d, h) → BatchNorm → ReLU → Linear(h, out)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int = 64) -> None:
        super().__init__(
            nn.Linear(in_dim, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, out_dim),
        )


class SimCLRModel(nn.Module):
    """Backbone (features for evaluation) + projection head (embeddings for the loss).

    Args:
        backbone: see :func:`build_backbone`.
        image_size: input resolution (selects the CIFAR stem for ≤ 64).
        projection_dim: output size of the head (64 in the paper's runs).
        projection_hidden: hidden size of the head (default: the feature size).
    """

    def __init__(
        self,
        backbone: str = "resnet18",
        image_size: int = 32,
        projection_dim: int = 64,
        projection_hidden: int | None = None,
        cifar_stem: bool | None = None,
    ) -> None:
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


CONFIG_KEYS = ("backbone", "image_size", "projection_dim", "projection_hidden", "cifar_stem")


def save_simclr(model: SimCLRModel, folder: str | Path, config: dict[str, Any]) -> Path:
    """Write ``folder`` with the construction ``config`` (keys :data:`CONFIG_KEYS`) and the weights."""
    from safetensors.torch import save_file

    unknown = set(config) - set(CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown SimCLR config keys {sorted(unknown)}; expected {CONFIG_KEYS}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.backbone.state_dict().items()}, str(folder / "backbone.safetensors"))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def load_simclr(path: str | Path) -> tuple[SimCLRModel, dict[str, Any]]:
    """A trained :class:`SimCLRModel` and its config from a vision run folder or its ``model/`` folder."""
    from safetensors.torch import load_file

    folder = simclr_folder(path)
    if folder is None:
        raise FileNotFoundError(f"{path}: no config.json of a SimCLR model (expected a vision run's model/ folder)")
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model = SimCLRModel(**cfg)
    model.load_state_dict(load_file(str(folder / "model.safetensors")))
    return model, cfg
