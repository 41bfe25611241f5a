"""The vision command prints the same figures run to run: a documented table is what the command prints.

Every random draw of a run is seeded (``set_seed`` before the model is built, the Trainer's sampler and worker
seeds after it), so what is left to differ between two runs on CPUs of one kind is the number of threads:
a reduction split over another number of threads adds in another order, and training grows those last bits
into other figures. ``cpu_threads`` fixes that number for the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import argv, write_cifar10_zips

REPO = Path(__file__).resolve().parents[2]
# results.json entries that are not figures of the run: times, and the paths of this run's folder
NOT_FIGURES = {"train_seconds", "train_seconds_trainer", "total_seconds", "eval_seconds", "model_dir"}
NOT_FIGURES |= {"best_checkpoint", "train_samples_per_second", "train_steps_per_second", "train_runtime"}


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _figures(value: object) -> object:
    """``results.json`` without the entries that are not figures of the run (nested dicts too)."""
    if isinstance(value, dict):
        return {k: _figures(v) for k, v in value.items() if k not in NOT_FIGURES}
    return value


def _table(out: Path) -> list[str]:
    """results.md without its first line (which names the training time)."""
    return (out / "results.md").read_text().splitlines()[1:]


def _tiny_run(root: Path, out: Path, ambient_threads: int) -> dict:
    """A 1-epoch SimCLR run on the fake CIFAR-10 zips, with the random-init evaluation (as the quickstart), started
    from a process using ``ambient_threads`` CPU threads; the run itself asks for 2."""
    from simcse_weince.cli.train_vision import run

    torch.set_num_threads(ambient_threads)
    flags = dict(
        backbone="resnet18_slim", data_dir=root, per_device_train_batch_size=8, per_device_eval_batch_size=16,
        num_train_epochs=1, temperature=0.5, min_tail_points=10, logging_steps=1, output_dir=out, disable_tqdm=True,
        dataloader_num_workers=0, eval_before_training=True, save_total_limit=1, cpu_threads=2, seed=3,
    )  # fmt: skip
    run(argv(**flags))
    assert torch.get_num_threads() == ambient_threads  # the run's count does not outlive it
    return json.loads((out / "results.json").read_text())


def test_two_runs_print_the_same_table_whatever_the_callers_thread_count(tmp_path: Path, restore_threads) -> None:
    """Two runs, one started from a 1-thread process and one from a 2-thread one, both with ``cpu_threads 2``:
    the same table, the same results.json figures and the same trained weights, bit for bit. (Without the pinned
    count the first run trains with 1 thread, and its weights differ from the second's in the last bits.)"""
    from safetensors.torch import load_file

    root = write_cifar10_zips(tmp_path / "data")
    first = _tiny_run(root, tmp_path / "a", ambient_threads=1)
    second = _tiny_run(root, tmp_path / "b", ambient_threads=2)
    assert _table(tmp_path / "a") == _table(tmp_path / "b")
    assert _figures(first) == _figures(second)
    a, b = (load_file(tmp_path / d / "model" / "backbone.safetensors") for d in ("a", "b"))
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{len(different)} of {len(a)} tensors differ, e.g. {different[:3]}"


def test_cpu_threads_sets_torch_and_blas_for_the_block_only(restore_threads) -> None:
    from threadpoolctl import threadpool_info

    from simcse_weince.vision.recipe import cpu_threads

    torch.set_num_threads(2)
    blas_before = [p["num_threads"] for p in threadpool_info()]
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info())
        np.ones((64, 64)) @ np.ones((64, 64))  # the BLAS works inside the block
    assert torch.get_num_threads() == 2 and [p["num_threads"] for p in threadpool_info()] == blas_before
    with cpu_threads(None):  # the libraries' own counts
        assert torch.get_num_threads() == 2


def test_cpu_threads_is_checked_at_parse_time(tmp_path: Path) -> None:
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.training.config import ConfigError, parse_config

    cfg = REPO / "configs" / "vision" / "quickstart_cifar10_cpu.yaml"
    with pytest.raises((ConfigError, ValueError), match="cpu_threads must be >= 1; got 0"):
        parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path), "--cpu_threads", "0"])


def test_the_quickstart_fixes_everything_its_figures_depend_on(tmp_path: Path) -> None:
    """The documented table holds on any machine of the CPU kind only if the quickstart names its thread count and
    seeds (and a data-loading worker count: each worker draws its own augmentations)."""
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.training.config import parse_config

    cfg = REPO / "configs" / "vision" / "quickstart_cifar10_cpu.yaml"
    _, data, _, training = parse_config(ARG_GROUPS, [str(cfg), "--output_dir", str(tmp_path)])
    assert training.cpu_threads == 2 and training.seed == 0 and data.subset_seed == 0
    assert training.dataloader_num_workers == 1
