"""The run skeleton both commands share: logging, seeding, resume resolution, training, the run record.

A command (``cli/train_text.py``, ``cli/train_vision.py``) parses its argument groups, builds the loss (so every
setting is validated before anything heavy loads), then::

    t0 = start_run(training_args)
    ...  # data, model, evaluator, trainer (with the caller's extra callbacks)
    results = {**scores_before, **train_and_record(trainer, training_args), **scores_after}
    finish_run(trainer, results, export=..., render_card=..., what=..., t_start=t0)  # training/ending.py
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import transformers
from transformers import Trainer, TrainingArguments, set_seed

from simcse_weince.training.config import ConfigError
from simcse_weince.training.hub import HubAccessError, check_hub_access, download_last_checkpoint, repo_name

logger = logging.getLogger(__name__)


def setup_logging(training_args: TrainingArguments) -> None:
    """Our INFO logs on the main process only (WARNING elsewhere); library logs at WARNING."""
    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, stream=sys.stdout)
    datasets.utils.logging.set_verbosity(logging.WARNING)
    transformers.utils.logging.set_verbosity(logging.WARNING)


def start_run(training_args: TrainingArguments) -> float:
    """Set up logging and the seed and resolve ``resume_from_checkpoint: last`` to a complete checkpoint
    (so that a run with nothing to resume stops before loading anything); returns the start time."""
    setup_logging(training_args)
    set_seed(training_args.seed)
    resume = training_args.resume_from_checkpoint
    if resume is not None and resume.lower() == "hub":
        repo = repo_name(training_args.hub_model_id, training_args.output_dir)
        with training_args.main_process_first(desc="download the Hub's last-checkpoint"):
            folder = download_last_checkpoint(
                repo, training_args.output_dir, training_args.hub_token, training_args.hub_revision
            )
        resume = str(folder)
        logger.info("resuming from %s, the last checkpoint pushed to %s", resume, repo)
    training_args.resume_from_checkpoint = resume_value(
        resume, training_args.output_dir, training_args.process_index == 0
    )
    if training_args.resume_from_checkpoint is None and not getattr(training_args, "overwrite_output_dir", False):
        check_fresh_output_dir(training_args.output_dir)
    if training_args.push_to_hub:
        prepare_hub(training_args)
    return time.perf_counter()


def prepare_hub(training_args: TrainingArguments) -> None:
    """Check that the run's Hub repository can be written before anything loads.

    Raises:
        HubAccessError: it cannot, and ``hub_push_optional`` is off. With it on, pushing is turned off for
            this run and the reason kept in ``training_args.hub_error`` (it goes into ``results.json``).
    """
    repo = repo_name(training_args.hub_model_id, training_args.output_dir)
    try:
        full_id = check_hub_access(repo, training_args.hub_token, training_args.hub_private_repo)
    except HubAccessError as err:
        if not getattr(training_args, "hub_push_optional", False):
            raise
        logger.warning("%s -- training without pushing (hub_push_optional)", err)
        training_args.push_to_hub = False
        training_args.hub_error = str(err)
        return
    logger.info("pushing to the Hub repository %s (hub_strategy %s)", full_id, training_args.hub_strategy)


def previous_run(output_dir: str | Path) -> list[str]:
    """What a finished or interrupted run left in ``output_dir`` (checkpoints, ``model/``, ``results.json``)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = sorted(p.name for p in folder.iterdir() if CHECKPOINT.match(p.name))
    found += [name for name in ("model", "results.json") if (folder / name).exists()]
    return found


def check_fresh_output_dir(output_dir: str | Path) -> None:
    """Refuse to train into a folder holding a previous run (the Trainer would rotate its checkpoints away).

    Raises:
        ConfigError: naming what is there and the two ways on.
    """
    found = previous_run(output_dir)
    if found:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise ConfigError(
            f"output_dir {output_dir} holds a previous run ({shown}); continue it with --resume_from_checkpoint "
            "last, replace it with --overwrite_output_dir true, or choose another --output_dir"
        )


CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def is_temporary(name: str) -> bool:
    return ".tmp" in name or name.startswith("tmp")


def latest_complete_checkpoint(output_dir: str | Path, clean: bool = True) -> Path | None:
    """The newest ``checkpoint-N`` folder that a save finished (``trainer_state.json`` written last, no
    temporary file left), or ``None``.

    Newer folders that a kill interrupted mid-save are reported; with ``clean`` their temporary files are
    deleted and the folder is renamed ``checkpoint-N-incomplete`` (removed if nothing else is in it), so that
    neither resuming nor the Trainer's checkpoint rotation takes it for a checkpoint.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = sorted(
        ((int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := CHECKPOINT.match(p.name))),
        reverse=True,
    )
    for _, ckpt in found:
        temporary = [f for f in ckpt.iterdir() if is_temporary(f.name)]
        if (ckpt / "trainer_state.json").is_file() and not temporary:
            return ckpt
        logger.warning("skipping the incomplete checkpoint %s (a save that did not finish)", ckpt)
        if clean:
            for f in temporary:
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            if any(ckpt.iterdir()):
                ckpt.rename(ckpt.with_name(ckpt.name + "-incomplete"))
            else:
                ckpt.rmdir()
    return None


def resume_value(value: str | None, output_dir: str | Path, main_process: bool = True) -> str | None:
    """``--resume_from_checkpoint`` as the Trainer takes it: ``last``/``latest``/``true`` -> the newest
    *complete* checkpoint of ``output_dir`` (incomplete ones skipped and, on the main process, cleaned).

    Raises:
        ConfigError: ``last`` but no complete checkpoint exists.
    """
    if value is None or value.lower() not in ("true", "last", "latest"):
        return value
    ckpt = latest_complete_checkpoint(output_dir, clean=main_process)
    if ckpt is None:
        raise ConfigError(f"--resume_from_checkpoint {value}: no complete checkpoint-N folder in {output_dir}")
    logger.info("resuming from %s", ckpt)
    return str(ckpt)


def lambda_curve(log_history: Sequence[dict[str, Any]]) -> list[tuple[int, float]]:
    """(step, mean λ) of every training log that carries it."""
    return [(e["step"], e["lambda_mean"]) for e in log_history if "lambda_mean" in e]


def train_and_record(trainer: Trainer, training_args: TrainingArguments) -> dict[str, Any]:
    """Train (resuming if asked) and return what every run reports: steps, times, loss, λ curve, best
    checkpoint. With ``load_best_model_at_end`` the model holds the best checkpoint's weights afterwards."""
    t0 = time.perf_counter()
    try:
        out = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)  # resolved by start_run
    except BaseException as err:
        if training_args.should_save:
            ckpt = latest_complete_checkpoint(training_args.output_dir, clean=False)
            where = f"the last complete checkpoint is {ckpt}" if ckpt else "no checkpoint was saved yet"
            logger.error(
                "training stopped at step %d (%s: %s); %s. Resume with the same command plus "
                "--resume_from_checkpoint last",
                trainer.state.global_step,
                type(err).__name__,
                " ".join(str(err).split())[:200],
                where,
            )
        raise
    seconds = time.perf_counter() - t0
    curve = lambda_curve(trainer.state.log_history)
    return {
        "steps": trainer.state.global_step,
        "epochs": trainer.state.epoch,
        "world_size": training_args.world_size,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "best_metric_during_training": trainer.state.best_metric,
        "train_seconds": seconds,
        "train_seconds_trainer": out.metrics.get("train_runtime"),
        "train_loss": out.training_loss,
        "mean_lambda": sum(v for _, v in curve) / len(curve) if curve else None,
        "lambda_curve": curve,
        **{f"mean_{key}": log_mean(trainer.state.log_history, f"{key}_mean") for key in ("delta_aic", "rho", "beta")},
    }


def log_mean(log_history: Sequence[dict[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over the training logs that carry it (``None`` if none does)."""
    values = [e[key] for e in log_history if key in e]
    return sum(values) / len(values) if values else None


def card_facts(trainer: Trainer, loss_name: str, loss: Any) -> dict[str, Any]:
    """What both model cards say about the training run: loss (display name, config, citation), steps, batch per
    process, processes, learning rate and precision, as keyword arguments of the card renderers."""
    args = trainer.args
    return {
        "loss_name": {"weince": "WEINCE", "infonce": "InfoNCE"}.get(loss_name, loss_name),
        "loss_config": loss.get_config_dict(),
        "citation": loss.citation,
        "steps": trainer.state.global_step,
        "batch": args.per_device_train_batch_size,
        "processes": args.world_size,
        "lr": args.learning_rate,
        "precision": args.precision_name,
    }


def write_results(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """``<output_dir>/results.json``."""
    path = Path(output_dir) / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return path
