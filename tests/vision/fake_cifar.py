"""Tiny CIFAR-style JPEG zips for the vision tests (two classes told apart by brightness)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image


def write_zip(path: Path, split: str, per_class: int = 4, classes=("cat", "dog"), size: int = 32) -> Path:
    """Append ``per_class`` JPEGs per class under ``<split>/<class>/`` to the zip at ``path``."""
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "a") as z:
        for ci, c in enumerate(classes):
            for i in range(per_class):
                arr = (rng.random((size, size, 3)) * 60 + ci * 150).astype(np.uint8)  # class = brightness
                buf = io.BytesIO()
                Image.fromarray(arr).save(buf, format="JPEG")
                z.writestr(f"{split}/{c}/{i:04d}.jpg", buf.getvalue())
    return path


def write_cifar10_zips(root: Path, train_per_class: int = 8, test_per_class: int = 4) -> Path:
    """A ``cifar10_zip`` data folder: ``root`` with the train and test archives the loader expects."""
    root.mkdir(parents=True, exist_ok=True)
    write_zip(root / "cifar10_train_jpeg.zip", "train", per_class=train_per_class)
    write_zip(root / "cifar10_test_jpeg.zip", "test", per_class=test_per_class)
    return root
