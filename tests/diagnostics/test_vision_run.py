"""Diagnostics of a trained SimCLR run: scored in the NT-Xent layout, on the head outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.vision.fake_cifar import write_cifar10_zips

pytestmark = pytest.mark.slow  # subprocesses and end-to-end runs


def test_diagnostics_on_a_vision_run(tmp_path: Path) -> None:
    from simcse_weince.diagnostics.cli import run as diagnose
    from simcse_weince.vision.train import run

    root = write_cifar10_zips(tmp_path / "data", test_per_class=16)
    out = tmp_path / "run"
    run(
        [
            "--backbone",
            "resnet18_slim",
            "--data_dir",
            str(root),
            "--per_device_train_batch_size",
            "8",
            "--num_train_epochs",
            "1",
            "--temperature",
            "0.5",
            "--min_tail_points",
            "10",
            "--output_dir",
            str(out),
            "--disable_tqdm",
            "true",
            "--dataloader_num_workers",
            "0",
            "--save_strategy",
            "no",
            "--eval_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
        ]
    )
    report = diagnose(
        [
            "--model",
            str(out),
            "--out",
            str(tmp_path / "diag"),
            "--vision_data_dir",
            str(root),
            "--batch_size",
            "16",
            "--num_batches",
            "2",
            "--q",
            "0.9",
            "--qs",
            "0.8",
            "0.9",
            "--bootstrap",
            "10",
        ]
    )
    assert report["kind"] == "vision" and report["batches"] == 2
    assert report["negative_scores"] == 2 * 32 * 30  # NT-Xent: 2N anchors x (2N - 2) negatives
    assert report["geometry"]["alignment_positives"] == "two augmented views"
