"""``python -m simcse_weince.cli.train_vision CONFIG.yaml`` / ``simclr-train``: SimCLR with InfoNCE or WEINCE.

Parse the config (YAML + command line, as for the text command), build the data sets (two augmented views per
image for training; plain probe sets), train with :class:`~simcse_weince.vision.trainer.SimCLRTrainer` (k-NN
every epoch, best checkpoint kept, resumable, ``accelerate launch`` ready), score the best backbone with the
full protocol (linear probe, k-NN k = 200/20/50, R@1/2/4/8), end the run
(:func:`~simcse_weince.training.ending.finish_run`) and write ``results.md``. With ``cpu_threads`` set, the whole
run uses that many CPU threads (:func:`~simcse_weince.vision.recipe.cpu_threads`), so that it prints the same
table on any machine of the CPU kind.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from transformers import TrainerCallback

from simcse_weince.cli.errors import command_main
from simcse_weince.core.hardware import warn_if_slow_bf16
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import parse_config, save_run_info
from simcse_weince.training.ending import exit_code, finish_run
from simcse_weince.training.run import card_facts, start_run, train_and_record
from simcse_weince.training.run_record import RunState
from simcse_weince.vision.arguments import SimCLRTrainingArguments, VisionDataArguments, VisionModelArguments
from simcse_weince.vision.data import collate
from simcse_weince.vision.model import SimCLRModel, save_simclr
from simcse_weince.vision.model_card import render_vision_card
from simcse_weince.vision.recipe import (
    METRICS,
    build_datasets,
    cpu_threads,
    full_evaluation,
    maybe_sync_batchnorm,
    results_table,
)
from simcse_weince.vision.trainer import KNNEvaluator, SimCLRTrainer

logger = logging.getLogger(__name__)
ARG_GROUPS = (VisionModelArguments, VisionDataArguments, LossArguments, SimCLRTrainingArguments)


def run(argv: Sequence[str], callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Train from a config (YAML path + overrides); ``callbacks`` are added to the Trainer's."""
    model_args, data_args, loss_args, args = parse_config(ARG_GROUPS, argv)
    warn_if_slow_bf16(args.precision_name, "cpu" if args.use_cpu else None, "training with")
    loss = loss_args.build("ntxent")
    groups = {"model": model_args, "data": data_args, "loss": loss_args, "training": args}
    # the thread count before anything runs: the figures depend on it (recipe.cpu_threads)
    with cpu_threads(args.cpu_threads), start_run(groups) as state:  # the output folder locked, the resume checked
        return train(groups, loss, state, callbacks)


def train(groups: dict, loss, state: RunState, callbacks: Sequence[TrainerCallback]) -> dict:
    model_args, data_args, _, args = groups.values()
    train, probe_train, probe_test, num_classes = build_datasets(data_args)
    sizes = {"train": len(train), "probe_train": len(probe_train), "probe_test": len(probe_test)}
    logger.info("data: %d training images, probe %d / %d, %d classes", *sizes.values(), num_classes)
    config = {
        "backbone": model_args.backbone, "image_size": data_args.image_size,
        "projection_dim": model_args.projection_dim, "projection_hidden": model_args.projection_hidden,
        "cifar_stem": model_args.cifar_stem,
    }  # fmt: skip
    model = SimCLRModel(**config)
    model = maybe_sync_batchnorm(model, model_args.sync_batchnorm, args.world_size, args.device)
    if args.should_save:
        save_run_info(args.output_dir, groups)
    show = not args.disable_tqdm and args.process_index == 0
    bs = args.per_device_eval_batch_size
    evaluator = KNNEvaluator(probe_train, probe_test, num_classes, bs, args.device, show)
    trainer = SimCLRTrainer(
        model=model, args=args, train_dataset=train, data_collator=collate, evaluator=evaluator, loss=loss,
        callbacks=list(callbacks) or None, run_state=state,
    )  # fmt: skip
    results: dict = {}
    if data_args.eval_before_training:
        results["before"] = full_evaluation(model, probe_train, probe_test, num_classes, args)
    results |= train_and_record(trainer, args)  # the model now holds the best checkpoint's weights
    results |= {
        "after": full_evaluation(model, probe_train, probe_test, num_classes, args),
        "loss": loss.get_config_dict() | {"name": loss.name}, "backbone": model_args.backbone,
        "dataset": data_args.dataset, "sizes": sizes,
    }  # fmt: skip

    def card(usage_path: str) -> str:
        return render_vision_card(
            config=config, dataset=data_args.dataset, train_images=len(train),
            **card_facts(trainer, loss), scores={m: results["after"][m] for m in METRICS},
            usage_path=usage_path,
        )  # fmt: skip

    finish_run(
        trainer, results, export=lambda folder: save_simclr(model, folder, config), render_card=card,
        what="backbone",
    )  # fmt: skip
    if trainer.is_world_process_zero():
        table = results_table(results)
        (Path(args.output_dir) / "results.md").write_text(table + "\n", encoding="utf-8")
        print("\n" + table)
    return results


def main(argv: Sequence[str] | None = None, callbacks: Sequence[TrainerCallback] = ()) -> int:
    return command_main(lambda a: run(a, callbacks), argv, exit_code=exit_code)


if __name__ == "__main__":
    raise SystemExit(main())
