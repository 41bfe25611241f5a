"""SimCLR-style image encoders trained with the same InfoNCE / WEINCE loss (NT-Xent layout)."""

from simcse_weince.vision.backbones import BACKBONES, build_backbone
from simcse_weince.vision.model import ProjectionHead, SimCLRModel

__all__ = ["BACKBONES", "ProjectionHead", "SimCLRModel", "build_backbone"]
