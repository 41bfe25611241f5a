"""SimCLR augmentations (torchvision.transforms.v2) and the plain evaluation transform."""

from __future__ import annotations

import torch
from torchvision.transforms import v2

from simcse_weince.core import checks

# Per-dataset channel statistics (ImageNet's for everything but CIFAR).
MEANS = {"cifar10": (0.4914, 0.4822, 0.4465), "cifar100": (0.5071, 0.4865, 0.4409)}
STDS = {"cifar10": (0.2470, 0.2435, 0.2616), "cifar100": (0.2673, 0.2564, 0.2762)}
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _normalise(dataset: str) -> v2.Normalize:
    key = "cifar10" if dataset.startswith("cifar10_") else dataset
    return v2.Normalize(MEANS.get(key, IMAGENET_MEAN), STDS.get(key, IMAGENET_STD))


def simclr_transform(dataset: str, image_size: int, strength: float = 1.0, crop_min_scale: float = 0.08) -> v2.Compose:
    """Random resized crop (area ≥ ``crop_min_scale``), flip, colour jitter (p 0.8) of ``strength``,
    grayscale (p 0.2), and Gaussian blur for images ≥ 64 px."""
    checks.within(0, 1, open_low=True)("crop_min_scale", crop_min_scale)
    s = strength
    ops = [
        v2.ToImage(),
        v2.RandomResizedCrop(image_size, scale=(crop_min_scale, 1.0), antialias=True),
        v2.RandomHorizontalFlip(),
        v2.RandomApply([v2.ColorJitter(0.4 * s, 0.4 * s, 0.4 * s, 0.1 * s)], p=0.8),
        v2.RandomGrayscale(p=0.2),
    ]
    if image_size >= 64:
        k = int(0.1 * image_size) // 2 * 2 + 1
        ops.append(v2.RandomApply([v2.GaussianBlur(k, sigma=(0.1, 2.0))], p=0.5))
    ops += [v2.ToDtype(torch.float32, scale=True), _normalise(dataset)]
    return v2.Compose(ops)


def eval_transform(dataset: str, image_size: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.ToImage(),
            v2.Resize(image_size, antialias=True),
            v2.CenterCrop(image_size),
            v2.ToDtype(torch.float32, scale=True),
            _normalise(dataset),
        ]
    )


class TwoViews:
    """Apply a random transform twice: (2, C, H, W)."""

    def __init__(self, transform) -> None:
        self.transform = transform

    def __call__(self, img) -> torch.Tensor:
        return torch.stack([self.transform(img), self.transform(img)])
