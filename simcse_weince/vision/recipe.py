"""A SimCLR run's parts: the data sets (two augmented views to train on, plain probe sets), SyncBatchNorm for
several GPU processes, the frozen-feature evaluation and its table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from simcse_weince.core.paths import resolve_data_path
from simcse_weince.vision.arguments import SimCLRTrainingArguments, VisionDataArguments
from simcse_weince.vision.augment import TwoViews, eval_transform, simclr_transform
from simcse_weince.vision.data import Indexed, balanced_subset, load_image_dataset
from simcse_weince.vision.evaluation import evaluate_features, extract_features


def _targets(ds) -> list[int]:
    t = getattr(ds, "targets", None)
    return list(t if t is not None else ds.labels)


def build_datasets(data: VisionDataArguments):
    """(train two-view set, probe train set, probe test set, number of classes)."""
    root = resolve_data_path(data.data_dir)
    pre_split = "unlabeled" if data.dataset == "stl10" else "train"
    pretrain = load_image_dataset(data.dataset, root, pre_split, data.download)
    probe_base = load_image_dataset(data.dataset, root, "train", data.download) if pre_split != "train" else pretrain
    test_base = load_image_dataset(data.dataset, root, "test", data.download)

    def subset(ds, per_class):
        return None if per_class is None else balanced_subset(_targets(ds), per_class, data.subset_seed)

    aug = TwoViews(simclr_transform(data.dataset, data.image_size, data.augment_strength, data.crop_min_scale))
    plain = eval_transform(data.dataset, data.image_size)
    train = Indexed(pretrain, subset(pretrain, data.train_per_class) if pre_split == "train" else None, aug)
    probe_train = Indexed(probe_base, subset(probe_base, data.probe_train_per_class), plain)
    probe_test = Indexed(test_base, subset(test_base, data.probe_test_per_class), plain)
    num_classes = len(set(_targets(test_base)))
    return train, probe_train, probe_test, num_classes


@contextmanager
def cpu_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` CPU threads in torch's operators and in the BLAS / OpenMP pools of the probes
    (scikit-learn's, through threadpoolctl, which it depends on); the previous counts are restored after.
    ``None``: leave the libraries' own counts (one thread per core).

    Why: a reduction split over another number of threads adds in another order, so the features, the gradients
    and the logistic-regression fit differ in the last bits, and training grows that into other figures. With a
    fixed count, two runs on CPUs of one kind print the same table whatever their number of cores.
    """
    if n is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


def maybe_sync_batchnorm(model: torch.nn.Module, enabled: bool, world_size: int, device: torch.device):
    """Convert BatchNorm to SyncBatchNorm for multi-process training on GPUs.

    Raises:
        ValueError: asked for on CPU processes (torch's SyncBatchNorm only works with GPU modules).
    """
    if not enabled or world_size <= 1:
        return model
    if torch.device(device).type != "cuda":
        raise ValueError(
            f"sync_batchnorm needs CUDA processes (torch's SyncBatchNorm only works with GPU modules), but this "
            f"run has {world_size} processes on {device}; run without --sync_batchnorm on CPU"
        )
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)


def full_evaluation(model, probe_train, probe_test, num_classes, args: SimCLRTrainingArguments) -> dict:
    bs, dev = args.per_device_eval_batch_size, args.device
    tr_f, tr_y = extract_features(model, probe_train, bs, dev)
    te_f, te_y = extract_features(model, probe_test, bs, dev)
    return evaluate_features(tr_f, tr_y, te_f, te_y, num_classes)


METRICS = ("linear_probe", "knn200", "knn20", "knn50", "R@1", "R@2", "R@4", "R@8")


def results_table(results: dict) -> str:
    rows = [r for r in ("before", "after") if r in results]
    head = (
        f"SimCLR {results['backbone']} on {results['dataset']} ({results['loss']['name']}), "
        f"{results['steps']} steps, {results['train_seconds']:.0f} s training"
    )
    lines = [head, "", "| encoder | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    label = {"before": "random init", "after": "trained (best k-NN checkpoint)"}
    for r in rows:
        lines.append(f"| {label[r]} | " + " | ".join(f"{results[r][m]:.2f}" for m in METRICS) + " |")
    if results.get("mean_lambda") is not None:
        lines += ["", f"mean λ over training: {results['mean_lambda']:.3f}"]
    return "\n".join(lines)
