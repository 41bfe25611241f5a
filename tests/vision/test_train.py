"""The SimCLR pipeline: a tiny run, the shipped configs, two processes, SyncBatchNorm on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from simcse_weince.losses import WeinceLoss
from simcse_weince.vision.model import SimCLRModel
from tests.vision.fake_cifar import write_cifar10_zips


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["weince", "infonce"])
def test_tiny_training_run(tmp_path: Path, loss: str) -> None:
    from simcse_weince.vision.train import run

    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    results = run(
        [
            "--loss",
            loss,
            "--backbone",
            "resnet18_slim",
            "--dataset",
            "cifar10_zip",
            "--data_dir",
            str(root),
            "--per_device_train_batch_size",
            "8",
            "--per_device_eval_batch_size",
            "8",
            "--num_train_epochs",
            "2",
            "--logging_steps",
            "1",
            "--temperature",
            "0.5",
            "--min_tail_points",
            "10",
            "--eval_before_training",
            "true",
            "--output_dir",
            str(out),
            "--disable_tqdm",
            "true",
            "--dataloader_num_workers",
            "0",
        ]
    )
    assert results["steps"] == 4 and results["world_size"] == 1
    for key in ("linear_probe", "knn200", "knn20", "knn50", "R@1", "R@8"):
        assert 0 <= results["after"][key] <= 100 and key in results["before"]
    saved = json.loads((out / "results.json").read_text())
    if loss == "weince":
        assert saved["lambda_curve"] and all(0 <= lam <= 1 for _, lam in saved["lambda_curve"])
        assert saved["mean_delta_aic"] is not None and saved["mean_rho"] is not None
    else:  # InfoNCE logs no statistics (every training log still happens)
        assert saved["lambda_curve"] == [] and saved["mean_lambda"] is None and saved["mean_delta_aic"] is None
    assert (out / "results.md").read_text().count("|") > 10
    assert (out / "model" / "backbone.safetensors").is_file() and (out / "run_config.yaml").is_file()


@pytest.mark.parametrize(
    "cfg", sorted((Path(__file__).resolve().parents[2] / "configs" / "vision").glob("*.yaml")), ids=lambda p: p.name
)
def test_vision_configs_parse(cfg: Path, tmp_path: Path) -> None:
    from simcse_weince.training.config import parse_config
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


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_process_run_with_sync_batchnorm(tmp_path: Path) -> None:
    """``accelerate launch`` with 2 CPU processes (gloo): gathered negatives, world size 2."""
    from tests.launch import accelerate_launch

    root = write_cifar10_zips(tmp_path / "data")
    out = tmp_path / "run"
    target = [
        "-m",
        "simcse_weince.vision.train",
        "--backbone",
        "resnet18_slim",
        "--data_dir",
        str(root),
        "--per_device_train_batch_size",
        "4",
        "--per_device_eval_batch_size",
        "8",
        "--num_train_epochs",
        "1",
        "--temperature",
        "0.5",
        "--min_tail_points",
        "10",
        "--logging_steps",
        "1",
        "--output_dir",
        str(out),
        "--disable_tqdm",
        "true",
        "--dataloader_num_workers",
        "0",
    ]
    accelerate_launch(2, target)
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and results["steps"] == 2  # 16 images / (2 processes x 4)


def test_sync_batchnorm_is_refused_on_cpu_processes() -> None:
    from simcse_weince.vision.train import maybe_sync_batchnorm

    model = SimCLRModel("resnet18_slim", 32)
    assert maybe_sync_batchnorm(model, True, 1, torch.device("cpu")) is model  # single process: nothing to sync
    with pytest.raises(ValueError, match="sync_batchnorm needs CUDA"):
        maybe_sync_batchnorm(model, True, 2, torch.device("cpu"))


def test_invalid_setting_fails_before_the_data_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from simcse_weince.vision import train as train_module

    def loaded(*args, **kwargs):
        raise AssertionError("data was loaded before the settings were checked")

    monkeypatch.setattr(train_module, "build_datasets", loaded)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("beta_mode: mle\n")
    assert train_module.main([str(cfg), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: beta_mode must be one of") and err.count("\n") == 1
