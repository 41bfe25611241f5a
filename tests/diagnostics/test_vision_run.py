"""Diagnostics of a trained SimCLR run: scored in the NT-Xent layout, on the head outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import argv, write_cifar10_zips

pytestmark = pytest.mark.slow  # subprocesses and end-to-end runs


def test_diagnostics_on_a_vision_run(tmp_path: Path) -> None:
    from simcse_weince.cli.diagnose import run as diagnose
    from simcse_weince.cli.train_vision import run

    root = write_cifar10_zips(tmp_path / "data", test_per_class=16)
    out = tmp_path / "run"
    run(
        argv(
            backbone="resnet18_slim", data_dir=root, per_device_train_batch_size=8, num_train_epochs=1,
            temperature=0.5, min_tail_points=10, output_dir=out, disable_tqdm=True, dataloader_num_workers=0,
            save_strategy="no", eval_strategy="no", load_best_model_at_end=False,
        )
    )  # fmt: skip
    report = diagnose(
        argv(
            model=out, out=tmp_path / "diag", vision_data_dir=root, batch_size=16, num_batches=2, q=0.9,
            qs=[0.8, 0.9], bootstrap=10,
        )
    )  # fmt: skip
    assert report["kind"] == "vision" and report["batches"] == 2
    assert report["negative_scores"] == 2 * 32 * 30  # NT-Xent: 2N anchors x (2N - 2) negatives
    assert report["geometry"]["alignment_positives"] == "two augmented views"
