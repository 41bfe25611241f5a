"""Image data sets for SimCLR: a zip-of-JPEGs reader (CIFAR-10 here) and torchvision sets for users.

``ZipImageFolder`` reads ``<split>/<class>/<file>.jpg`` members straight from a zip archive (nothing is
extracted): the class list comes from the member names, sorted; each worker process opens its own handle. A
member that cannot be decoded raises an error naming the archive and the member.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
ImageDataset = Literal["cifar10_zip", "cifar10", "cifar100", "stl10", "tinyimagenet", "imagenet32", "folder"]
DATASETS: tuple[str, ...] = get_args(ImageDataset)


class ZipImageFolder(Dataset):
    """Images in a zip archive laid out as ``<split>/<class>/<name>.<ext>``.

    Args:
        zip_path: the archive.
        split: top-level folder inside the archive (``train`` / ``test``).
        transform: applied to the PIL image.

    Raises:
        FileNotFoundError: the archive does not exist.
        ValueError: not a zip, or no image under ``split/``.
    """

    def __init__(self, zip_path: str | Path, split: str, transform: Callable | None = None) -> None:
        self.zip_path = Path(zip_path)
        if not self.zip_path.is_file():
            raise FileNotFoundError(f"image archive not found: {self.zip_path}")
        try:
            with zipfile.ZipFile(self.zip_path) as z:
                names = [n for n in z.namelist() if n.startswith(f"{split}/") and n.lower().endswith(IMAGE_SUFFIXES)]
        except zipfile.BadZipFile as err:
            raise ValueError(f"{self.zip_path} is not a zip archive: {err}") from err
        if not names:
            raise ValueError(f"{self.zip_path}: no images under '{split}/'; expected {split}/<class>/<image>.jpg")
        for n in names:
            if n.count("/") != 2:
                raise ValueError(f"{self.zip_path}: member {n!r} is not laid out as {split}/<class>/<image>")
        names.sort()
        self.classes = sorted({n.split("/")[1] for n in names})
        index = {c: i for i, c in enumerate(self.classes)}
        self.members = names
        self.targets = [index[n.split("/")[1]] for n in names]
        self.transform = transform
        self._zip: zipfile.ZipFile | None = None

    def __len__(self) -> int:
        return len(self.members)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_zip"] = None  # each worker opens its own handle
        return state

    def load(self, i: int) -> Image.Image:
        if self._zip is None:
            self._zip = zipfile.ZipFile(self.zip_path)
        name = self.members[i]
        try:
            with Image.open(io.BytesIO(self._zip.read(name))) as img:
                return img.convert("RGB")
        except Exception as err:  # PIL and zlib raise many types for a broken member
            # PIL's own message names an anonymous BytesIO object, not the member
            reason = "not a format PIL can read" if isinstance(err, UnidentifiedImageError) else str(err)
            reason = " ".join(reason.split()) or type(err).__name__
            raise ValueError(
                f"{self.zip_path}: cannot decode member {name!r} ({reason}); "
                f"expected an image file ({', '.join(IMAGE_SUFFIXES)})"
            ) from err

    def __getitem__(self, i: int):
        img = self.load(i)
        return (self.transform(img) if self.transform else img), self.targets[i]


def balanced_subset(targets: Sequence[int], per_class: int, seed: int = 0) -> np.ndarray:
    """Indices of ``per_class`` samples of every class (seeded, sorted); errors if a class has fewer."""
    targets = np.asarray(targets)
    rng = np.random.default_rng(seed)
    out = []
    for c in np.unique(targets):
        idx = np.flatnonzero(targets == c)
        if len(idx) < per_class:
            raise ValueError(f"class {c} has {len(idx)} samples, fewer than the {per_class} asked for")
        out.append(rng.choice(idx, per_class, replace=False))
    return np.sort(np.concatenate(out))


class Indexed(Dataset):
    """A view of ``base`` at ``indices`` with its own transform; yields ``{"pixel_values", "labels"}``."""

    def __init__(self, base, indices: Sequence[int] | None, transform: Callable) -> None:
        self.base = base
        self.indices = np.arange(len(base)) if indices is None else np.asarray(indices)
        self.transform = transform
        targets = getattr(base, "targets", None)
        if targets is None:
            targets = getattr(base, "labels", None)
        self.targets = np.asarray(targets)[self.indices] if targets is not None else None

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> dict:
        img, label = self.base[int(self.indices[i])]
        return {"pixel_values": self.transform(img), "labels": int(label)}


def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
    return {
        "pixel_values": torch.stack([r["pixel_values"] for r in rows]),
        "labels": torch.tensor([r["labels"] for r in rows]),
    }


def load_image_dataset(name: str, root: str | Path, split: str, download: bool = False):
    """The raw (untransformed) train or test set of ``name``.

    ``cifar10_zip`` reads ``root/cifar10_{split}_jpeg.zip``; ``tinyimagenet``, ``imagenet32`` and ``folder``
    read ``root/<split>/<class>/*`` image folders; CIFAR-10/100 and STL-10 use torchvision (``download`` for
    users with a network). STL-10's train split is ``train+unlabeled`` for SimCLR pre-training, ``train`` for
    the probes; pass ``split="unlabeled"`` to get the former.
    """
    import torchvision

    root = Path(root)
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    if name == "cifar10_zip":
        return ZipImageFolder(root / f"cifar10_{split}_jpeg.zip", split)
    if name in ("cifar10", "cifar100"):
        cls = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
        return cls(str(root), train=split == "train", download=download)
    if name == "stl10":
        stl_split = {"train": "train", "test": "test", "unlabeled": "train+unlabeled"}[split]
        return torchvision.datasets.STL10(str(root), split=stl_split, download=download)
    folder = root / split
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder not found: {folder}; expected {root}/<train|test>/<class>/<image>")
    return torchvision.datasets.ImageFolder(str(folder))
