"""Image data: the zip-of-JPEGs reader (real CIFAR-10 and broken archives), views and collation."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from simcse_weince.vision.data import Indexed, ZipImageFolder, balanced_subset, collate
from tests.helpers import write_zip


def test_zip_reader_real_cifar(shared_data: Path) -> None:
    ds = ZipImageFolder(shared_data / "cifar10_jpeg" / "cifar10_test_jpeg.zip", "test")
    assert len(ds) == 10_000 and len(ds.classes) == 10 and ds.classes[0] == "airplane"
    img, label = ds[1234]
    assert img.size == (32, 32) and img.mode == "RGB" and label == ds.targets[1234]
    idx = balanced_subset(ds.targets, 7, seed=1)
    assert len(idx) == 70 and np.bincount(np.asarray(ds.targets)[idx]).tolist() == [7] * 10


def test_zip_reader_errors_name_the_bad_member(tmp_path: Path) -> None:
    zp = write_zip(tmp_path / "d.zip", "train")
    with zipfile.ZipFile(zp, "a") as z:
        z.writestr("train/dog/9999.jpg", b"definitely not a jpeg")
    ds = ZipImageFolder(zp, "train")
    with pytest.raises(ValueError, match=r"d\.zip: cannot decode member 'train/dog/9999\.jpg' \(not a format PIL can "
                       r"read\); expected an image file \(\.jpg, \.jpeg, \.png, \.bmp, \.webp\)$"):  # fmt: skip
        ds[len(ds) - 1]
    with pytest.raises(ValueError, match="no images under 'test/'"):
        ZipImageFolder(zp, "test")
    bad = tmp_path / "nested.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("train/dog/extra/0.jpg", b"x")
    with pytest.raises(ValueError, match="not laid out as train/<class>/<image>"):
        ZipImageFolder(bad, "train")
    (tmp_path / "nozip.zip").write_text("plain text")
    with pytest.raises(ValueError, match="is not a zip archive"):
        ZipImageFolder(tmp_path / "nozip.zip", "train")
    with pytest.raises(FileNotFoundError, match=r"missing\.zip"):
        ZipImageFolder(tmp_path / "missing.zip", "train")
    with pytest.raises(ValueError, match="fewer than"):
        balanced_subset([0, 0, 1], 2)


def test_a_worker_error_ends_in_one_line_naming_the_archive_and_member(tmp_path: Path) -> None:
    """A DataLoader worker re-raises the decode error with its whole traceback in the message (2 kB); the
    command's error line keeps the final exception line only."""
    from torch.utils.data import DataLoader, Subset

    from simcse_weince.cli.errors import one_line

    zp = write_zip(tmp_path / "d.zip", "train")
    with zipfile.ZipFile(zp, "a") as z:
        z.writestr("train/dog/9999.jpg", b"\xff\xd8\xff truncated jpeg")
    ds = ZipImageFolder(zp, "train")
    with pytest.raises(ValueError) as direct:
        ds.load(len(ds) - 1)
    loader = DataLoader(Subset(ds, [len(ds) - 1]), num_workers=1, collate_fn=list)
    with pytest.raises(ValueError) as from_worker:
        next(iter(loader))
    assert "Original Traceback" in str(from_worker.value)
    assert one_line(from_worker.value) == str(direct.value)
    assert str(direct.value).startswith(f"{zp}: cannot decode member 'train/dog/9999.jpg' (")
    # a chained, module-qualified exception: the last one, without its type
    text = (
        "Caught BadZipFile in DataLoader worker process 3.\nOriginal Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nKeyError: 1\n\nThe above exception was the direct cause of the following '
        'exception:\n\nTraceback (most recent call last):\n  File "x.py", line 2, in g\n'
        "zipfile.BadZipFile: Bad CRC-32 for file 'train/a/1.jpg'\n"
    )
    assert one_line(ValueError(text)) == "Bad CRC-32 for file 'train/a/1.jpg'"
    assert one_line(ValueError("plain\n  message")) == "plain message"


def test_indexed_and_collate(tmp_path: Path) -> None:
    from simcse_weince.vision.augment import TwoViews, eval_transform, simclr_transform

    ds = ZipImageFolder(write_zip(tmp_path / "d.zip", "train"), "train")
    two = Indexed(ds, [0, 5], TwoViews(simclr_transform("cifar10_zip", 32)))
    batch = collate([two[0], two[1]])
    assert batch["pixel_values"].shape == (2, 2, 3, 32, 32) and batch["labels"].tolist() == [0, 1]
    assert not torch.equal(batch["pixel_values"][0, 0], batch["pixel_values"][0, 1])  # two random views
    plain = Indexed(ds, None, eval_transform("cifar10_zip", 32))
    assert plain[3]["pixel_values"].shape == (3, 32, 32) and plain.targets.tolist() == ds.targets
