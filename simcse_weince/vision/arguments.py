"""Argument groups of SimCLR training (model, data, training); the loss group is the shared one."""

from __future__ import annotations

from dataclasses import dataclass, field

from simcse_weince.core import checks
from simcse_weince.core.checks import check_at_least, check_choice
from simcse_weince.training.arguments import ContrastiveTrainingArguments
from simcse_weince.vision.backbones import Backbone
from simcse_weince.vision.data import ImageDataset


@dataclass
class VisionModelArguments:
    backbone: Backbone = field(default="resnet18", metadata={"help": "resnet18 | resnet50 | resnet18_slim | vit_small"})
    projection_dim: int = 64
    projection_hidden: int | None = field(default=None, metadata={"help": "Head hidden size (default: feature size)."})
    cifar_stem: bool | None = field(default=None, metadata={"help": "3x3 stem, no max-pool (default: images <= 64px)."})
    sync_batchnorm: bool = field(default=False, metadata={"help": "SyncBatchNorm across processes."})

    def __post_init__(self) -> None:
        check_choice("backbone", self.backbone, Backbone)
        check_at_least("projection_dim", self.projection_dim, 1)
        check_at_least("projection_hidden", self.projection_hidden, 1)


@dataclass
class VisionDataArguments:
    dataset: ImageDataset = field(
        default="cifar10_zip",
        metadata={"help": "cifar10_zip | cifar10 | cifar100 | stl10 | tinyimagenet | imagenet32 | folder"},
    )
    data_dir: str = field(default="{data}/cifar10_jpeg", metadata={"help": "Data root ('{data}' = shared data)."})
    image_size: int = 32
    download: bool = field(default=False, metadata={"help": "Let torchvision download CIFAR/STL-10."})
    train_per_class: int | None = field(default=None, metadata={"help": "Class-balanced training subset."})
    probe_train_per_class: int | None = field(default=None, metadata={"help": "Subset for probe / k-NN bank."})
    probe_test_per_class: int | None = field(default=None, metadata={"help": "Subset of the test set."})
    augment_strength: float = 1.0
    crop_min_scale: float = field(default=0.08, metadata={"help": "Smallest crop area of RandomResizedCrop."})
    eval_before_training: bool = field(default=False, metadata={"help": "Also score the random-init encoder."})
    subset_seed: int = 0

    def __post_init__(self) -> None:
        check_choice("dataset", self.dataset, ImageDataset)
        check_at_least("image_size", self.image_size, 8)
        for name in ("train_per_class", "probe_train_per_class", "probe_test_per_class"):
            check_at_least(name, getattr(self, name), 1)
        check_at_least("augment_strength", self.augment_strength, 0.0)
        checks.within(0, 1, open_low=True)("crop_min_scale", self.crop_min_scale)


@dataclass
class SimCLRTrainingArguments(ContrastiveTrainingArguments):
    """SimCLR defaults of the paper's reference runs: batch 256, lr 3e-4, weight decay 1e-6, 100 epochs; k-NN
    top-1 (k = 200) on the probe sets every epoch; the best checkpoint kept. (The Trainer's AdamW with weight
    decay 1e-6 stands in for Adam with an L2 term of 1e-6; at this size the two are indistinguishable.)"""

    output_dir: str | None = field(default="outputs/simclr", metadata={"help": "Where checkpoints and results go."})
    per_device_train_batch_size: int = 256
    per_device_eval_batch_size: int = 512
    learning_rate: float = 3e-4
    weight_decay: float = 1e-6
    num_train_epochs: float = 100.0
    eval_strategy: str = "epoch"
    save_strategy: str = "epoch"
    save_total_limit: int | None = 2
    load_best_model_at_end: bool = True
    metric_for_best_model: str | None = "knn200"
    greater_is_better: bool | None = True
    logging_steps: float = 20
    dataloader_drop_last: bool = True
    cpu_threads: int | None = field(
        default=None,
        metadata={
            "help": "CPU threads of torch's operators and of the probes' BLAS / OpenMP for the run (default: the "
            "libraries' own, one per core). The results depend on it in the last bits (reductions are split by "
            "thread), which training grows into other figures: fix it to reproduce a run on another machine."
        },
    )

    def __post_init__(self) -> None:
        check_at_least("cpu_threads", self.cpu_threads, 1)
        super().__post_init__()
