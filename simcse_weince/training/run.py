"""The run skeleton both pipelines share: logging, seeding, resume resolution, training, the run record.

A pipeline (``text/train.py``, ``vision/train.py``) parses its argument groups, builds the loss (so every
setting is validated before anything heavy loads), then::

    t0 = start_run(training_args)
    ...  # data, model, evaluator, trainer (with the caller's extra callbacks)
    record = train_and_record(trainer, training_args)
    ...  # export, final scores
    write_results(training_args.output_dir, results)
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import datasets
import transformers
from transformers import Trainer, TrainingArguments, set_seed

from simcse_weince.training.config import ConfigError

logger = logging.getLogger(__name__)


def setup_logging(training_args: TrainingArguments) -> None:
    """Our INFO logs on the main process only (WARNING elsewhere); library logs at WARNING."""
    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, stream=sys.stdout)
    datasets.utils.logging.set_verbosity(logging.WARNING)
    transformers.utils.logging.set_verbosity(logging.WARNING)


def start_run(training_args: TrainingArguments) -> float:
    """Set up logging and the seed; returns the start time (``perf_counter``)."""
    setup_logging(training_args)
    set_seed(training_args.seed)
    return time.perf_counter()


def resume_value(value: str | None) -> str | bool | None:
    """``--resume_from_checkpoint`` as the Trainer takes it: ``last``/``latest``/``true`` -> True."""
    if value is None:
        return None
    return True if value.lower() in ("true", "last", "latest") else value


def lambda_curve(log_history: Sequence[dict[str, Any]]) -> list[tuple[int, float]]:
    """(step, mean λ) of every training log that carries it."""
    return [(e["step"], e["lambda_mean"]) for e in log_history if "lambda_mean" in e]


def train_and_record(trainer: Trainer, training_args: TrainingArguments) -> dict[str, Any]:
    """Train (resuming if asked) and return what every run reports: steps, times, loss, λ curve, best
    checkpoint. With ``load_best_model_at_end`` the model holds the best checkpoint's weights afterwards."""
    t0 = time.perf_counter()
    out = trainer.train(resume_from_checkpoint=resume_value(training_args.resume_from_checkpoint))
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
    }


def write_results(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """``<output_dir>/results.json``."""
    path = Path(output_dir) / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return path


def cli_main(run: Callable[[Sequence[str]], dict[str, Any]], argv: Sequence[str]) -> dict[str, Any] | None:
    """Call ``run(argv)``; a configuration error is printed as one line (no traceback) and gives ``None``."""
    try:
        return run(argv)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return None
