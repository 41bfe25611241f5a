"""SimCLR training with InfoNCE / WEINCE (NT-Xent layout): ``python -m simcse_weince.vision.train cfg.yaml``.

Steps: parse the config (YAML + command line, as for the text trainer), build the data sets (two augmented
views per image for training; plain probe train/test sets), train with :class:`SimCLRTrainer` (k-NN every
epoch, best checkpoint kept, resumable, ``accelerate launch`` ready), then score the final backbone with the
full protocol (linear probe, k-NN k = 200/20/50, R@1/2/4/8) and write ``results.json`` / ``results.md``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import TrainerCallback

from simcse_weince.errors import run_command
from simcse_weince.paths import resolve_data_path
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import parse_config, save_run_info
from simcse_weince.training.hub import HubPushError
from simcse_weince.training.run import card_facts, start_run, train_and_record, write_results
from simcse_weince.vision.arguments import SimCLRTrainingArguments, VisionDataArguments, VisionModelArguments
from simcse_weince.vision.augment import TwoViews, eval_transform, simclr_transform
from simcse_weince.vision.data import Indexed, balanced_subset, collate, load_image_dataset
from simcse_weince.vision.evaluation import evaluate_features, extract_features
from simcse_weince.vision.model import SimCLRModel, save_simclr
from simcse_weince.vision.model_card import render_vision_card
from simcse_weince.vision.trainer import KNNEvaluator, SimCLRTrainer

logger = logging.getLogger(__name__)
ARG_GROUPS = (VisionModelArguments, VisionDataArguments, LossArguments, SimCLRTrainingArguments)


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


def run(argv: Sequence[str], callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Train from a config (YAML path + overrides); ``callbacks`` are added to the Trainer's."""
    model_args, data_args, loss_args, training_args = parse_config(ARG_GROUPS, argv)
    loss = loss_args.build("ntxent")
    t_start = start_run(training_args)
    train, probe_train, probe_test, num_classes = build_datasets(data_args)
    logger.info(
        "data: %d training images, probe %d / %d, %d classes",
        len(train),
        len(probe_train),
        len(probe_test),
        num_classes,
    )
    model = SimCLRModel(
        model_args.backbone,
        data_args.image_size,
        model_args.projection_dim,
        model_args.projection_hidden,
        model_args.cifar_stem,
    )
    model = maybe_sync_batchnorm(model, model_args.sync_batchnorm, training_args.world_size, training_args.device)
    groups = {"model": model_args, "data": data_args, "loss": loss_args, "training": training_args}
    if training_args.should_save:
        save_run_info(training_args.output_dir, groups)

    show_progress = not training_args.disable_tqdm and training_args.process_index == 0
    evaluator = KNNEvaluator(
        probe_train,
        probe_test,
        num_classes,
        training_args.per_device_eval_batch_size,
        training_args.device,
        show_progress,
    )
    trainer = SimCLRTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        data_collator=collate,
        evaluator=evaluator,
        loss=loss,
        callbacks=list(callbacks) or None,
    )
    results: dict = {}
    if data_args.eval_before_training:
        results["before"] = full_evaluation(model, probe_train, probe_test, num_classes, training_args)
    record = train_and_record(trainer, training_args)
    results["after"] = full_evaluation(model, probe_train, probe_test, num_classes, training_args)
    results.update(
        record,
        loss=loss.get_config_dict() | {"name": loss_args.loss},
        backbone=model_args.backbone,
        dataset=data_args.dataset,
        sizes={"train": len(train), "probe_train": len(probe_train), "probe_test": len(probe_test)},
    )
    if trainer.is_world_process_zero():
        out_dir = Path(training_args.output_dir)
        config = {
            "backbone": model_args.backbone,
            "image_size": data_args.image_size,
            "projection_dim": model_args.projection_dim,
            "projection_hidden": model_args.projection_hidden,
            "cifar_stem": model_args.cifar_stem,
        }
        model_dir = save_simclr(model, out_dir / "model", config)
        card = render_vision_card(
            config=config,
            dataset=data_args.dataset,
            train_images=len(train),
            **card_facts(trainer, loss_args.loss, loss),
            scores={m: results["after"][m] for m in METRICS},
        )
        (model_dir / "README.md").write_text(card, encoding="utf-8")
        results["total_seconds"] = time.perf_counter() - t_start
        if training_args.push_to_hub:
            try:
                results["hub_url"] = trainer.push_final_folder(str(model_dir), "End of training: backbone and card")
            except HubPushError as err:
                logger.error("%s", err)
                results["hub_error"] = str(err)
        elif training_args.hub_error:
            results["hub_error"] = training_args.hub_error
        write_results(out_dir, results)
        table = results_table(results)
        (out_dir / "results.md").write_text(table + "\n")
        print("\n" + table)
    return results


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


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(run, sys.argv[1:] if argv is None else argv)[1]


if __name__ == "__main__":
    raise SystemExit(main())
