"""Vision companion: backbones, the zip reader, one optimisation step, probes, k-NN, recall@k, a tiny run."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.vision.backbones import build_backbone
from simcse_weince.vision.data import Indexed, ZipImageFolder, balanced_subset, collate
from simcse_weince.vision.evaluation import knn_accuracy, knn_predict, linear_probe, recall_at_k
from simcse_weince.vision.model import SimCLRModel
from tests.vision.fake_cifar import write_cifar10_zips, write_zip


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


def test_model_one_pass_two_views() -> None:
    model = SimCLRModel("resnet18_slim", 32, projection_dim=16)
    seen = []
    model.backbone.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    out = model(torch.randn(3, 2, 3, 32, 32))
    assert seen == [6] and out["anchors"].shape == out["positives"].shape == (3, 16)


@pytest.mark.parametrize("loss_fn", [InfoNCELoss(0.5, layout="ntxent"),
                                     WeinceLoss(0.5, layout="ntxent", min_tail_points=10)])  # fmt: skip
def test_one_step_reduces_the_loss_on_a_fixed_batch(loss_fn) -> None:
    torch.manual_seed(0)
    model = SimCLRModel("resnet18_slim", 32, projection_dim=16)
    base = torch.randn(16, 3, 32, 32)
    batch = torch.stack([base + 0.1 * torch.randn_like(base), base + 0.1 * torch.randn_like(base)], dim=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def value() -> torch.Tensor:
        out = model(batch)
        return loss_fn(out["anchors"], out["positives"])

    before = value()
    before.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        after = value()
    assert after.item() < before.item()


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
    with pytest.raises(ValueError, match=r"d\.zip: cannot decode member 'train/dog/9999\.jpg'"):
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


def _separable(n_per: int = 30, classes: int = 3, d: int = 8, sep: float = 8.0, seed: int = 0):
    """Train and test sets drawn around the same class centres."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, d, generator=g) * sep
    y = torch.arange(classes).repeat_interleave(n_per)
    return centers[y] + torch.randn(len(y), d, generator=g), y, centers[y] + torch.randn(len(y), d, generator=g), y


def test_probe_and_knn_on_separable_data() -> None:
    xtr, ytr, xte, yte = _separable()
    assert linear_probe(xtr, ytr, xte, yte) == pytest.approx(100.0)
    assert knn_accuracy(xtr, ytr, xte, yte, k=20, num_classes=3) == pytest.approx(100.0)
    noise_tr, noise_te = torch.randn_like(xtr), torch.randn_like(xte)  # no signal: the checks can fail
    assert knn_accuracy(noise_tr, ytr, noise_te, yte, k=20, num_classes=3) < 70


def test_knn_weighting_hand_example() -> None:
    bank = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.05, 0.95]])
    labels = torch.tensor([0, 0, 1, 1, 1])
    query = torch.tensor([[1.0, 0.05]])
    # k = 5: class 1 has three votes, class 0 two, but class 0's are far closer (exp(s/0.07) weighting).
    assert knn_predict(bank, labels, query, k=5, num_classes=2).item() == 0
    # With a huge temperature the votes are almost unweighted and the majority (class 1) wins.
    assert knn_predict(bank, labels, query, k=5, num_classes=2, temperature=1e6).item() == 1


def test_recall_at_k_hand_example() -> None:
    f = torch.tensor([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.2, 0.9]])
    y = torch.tensor([0, 1, 1, 0])
    # nearest other: 0->1 (miss), 1->0 (miss), 2->3 (miss), 3->2 (miss): R@1 = 0
    # second nearest: 0->3 (hit), 1->3 (miss; 2 is third), 2->1 (hit), 3->1 (miss; 0 is third)
    r = recall_at_k(f, y, ks=(1, 2, 3))
    assert r == {1: 0.0, 2: 50.0, 3: 100.0}


def test_indexed_and_collate(tmp_path: Path) -> None:
    from simcse_weince.vision.augment import TwoViews, eval_transform, simclr_transform

    ds = ZipImageFolder(write_zip(tmp_path / "d.zip", "train"), "train")
    two = Indexed(ds, [0, 5], TwoViews(simclr_transform("cifar10_zip", 32)))
    batch = collate([two[0], two[1]])
    assert batch["pixel_values"].shape == (2, 2, 3, 32, 32) and batch["labels"].tolist() == [0, 1]
    assert not torch.equal(batch["pixel_values"][0, 0], batch["pixel_values"][0, 1])  # two random views
    plain = Indexed(ds, None, eval_transform("cifar10_zip", 32))
    assert plain[3]["pixel_values"].shape == (3, 32, 32) and plain.targets.tolist() == ds.targets


def test_tiny_training_run(tmp_path: Path) -> None:
    from simcse_weince.vision.train import run

    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    results = run(["--backbone", "resnet18_slim", "--dataset", "cifar10_zip", "--data_dir", str(root),
                   "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8",
                   "--num_train_epochs", "2", "--logging_steps", "1", "--temperature", "0.5",
                   "--min_tail_points", "10", "--eval_before_training", "true", "--output_dir", str(out),
                   "--disable_tqdm", "true", "--dataloader_num_workers", "0"])  # fmt: skip
    assert results["steps"] == 4 and results["world_size"] == 1
    for key in ("linear_probe", "knn200", "knn20", "knn50", "R@1", "R@8"):
        assert 0 <= results["after"][key] <= 100 and key in results["before"]
    saved = json.loads((out / "results.json").read_text())
    assert saved["lambda_curve"] and all(0 <= lam <= 1 for _, lam in saved["lambda_curve"])
    assert (out / "results.md").read_text().count("|") > 10
    assert (out / "model" / "backbone.safetensors").is_file() and (out / "run_config.yaml").is_file()


@pytest.mark.parametrize("cfg", sorted((Path(__file__).resolve().parents[2] / "configs" / "vision").glob("*.yaml")),
                         ids=lambda p: p.name)  # fmt: skip
def test_vision_configs_parse(cfg: Path, tmp_path: Path) -> None:
    from simcse_weince.config import parse_config
    from simcse_weince.losses import WeinceLoss
    from simcse_weince.vision.train import ARG_GROUPS

    m, _, loss, t = parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path)])
    built = loss.build("ntxent")
    assert built.layout == "ntxent" and built.temperature == 0.5
    assert isinstance(built, WeinceLoss) == ("weince" in cfg.name or "quickstart" in cfg.name)
    if "quickstart" not in cfg.name:
        assert (t.per_device_train_batch_size, t.learning_rate, t.weight_decay, t.num_train_epochs) == (
            256,
            3e-4,
            1e-6,
            100,
        )
        assert m.projection_dim == 64


@pytest.mark.timeout(600)
def test_two_process_run_with_sync_batchnorm(tmp_path: Path) -> None:
    """``accelerate launch`` with 2 CPU processes (gloo): gathered negatives, world size 2."""
    import os
    import subprocess
    import sys

    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m",
           "simcse_weince.vision.train", "--backbone", "resnet18_slim", "--data_dir", str(root),
           "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--num_train_epochs", "1",
           "--temperature", "0.5", "--min_tail_points", "10", "--logging_steps", "1",
           "--output_dir", str(out), "--disable_tqdm", "true", "--dataloader_num_workers", "0"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and results["steps"] == 2  # 16 images / (2 processes x 4)


def test_sync_batchnorm_is_refused_on_cpu_processes() -> None:
    from simcse_weince.vision.train import maybe_sync_batchnorm

    model = SimCLRModel("resnet18_slim", 32)
    assert maybe_sync_batchnorm(model, True, 1, torch.device("cpu")) is model  # single process: nothing to sync
    with pytest.raises(ValueError, match="sync_batchnorm needs CUDA"):
        maybe_sync_batchnorm(model, True, 2, torch.device("cpu"))


def test_diagnostics_on_a_vision_run(tmp_path: Path) -> None:
    from simcse_weince.diagnostics.cli import run as diagnose
    from simcse_weince.vision.train import run

    root = write_cifar10_zips(tmp_path / "data", test_per_class=16)
    out = tmp_path / "run"
    run(["--backbone", "resnet18_slim", "--data_dir", str(root), "--per_device_train_batch_size", "8",
         "--num_train_epochs", "1", "--temperature", "0.5", "--min_tail_points", "10", "--output_dir", str(out),
         "--disable_tqdm", "true", "--dataloader_num_workers", "0", "--save_strategy", "no", "--eval_strategy", "no",
         "--load_best_model_at_end", "false"])  # fmt: skip
    report = diagnose(["--model", str(out), "--out", str(tmp_path / "diag"), "--vision_data_dir", str(root),
                       "--batch_size", "16", "--num_batches", "2", "--q", "0.9", "--qs", "0.8", "0.9",
                       "--bootstrap", "10"])  # fmt: skip
    assert report["kind"] == "vision" and report["batches"] == 2
    assert report["negative_scores"] == 2 * 32 * 30  # NT-Xent: 2N anchors x (2N - 2) negatives
    assert report["geometry"]["alignment_positives"] == "two augmented views"
