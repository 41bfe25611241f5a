"""The run skeleton both commands share: logging, seeding, resume resolution, training, the run record.

A command (``cli/train_text.py``, ``cli/train_vision.py``) parses its argument groups, builds the loss (so every
setting is validated before anything heavy loads), then::

    with start_run(groups) as state:  # logging, seed, the output folder's lock, resume checks, Hub check
        ...  # data, model, evaluator, trainer (the caller's extra callbacks, run_state=state)
        results = {**scores_before, **train_and_record(trainer, training_args), **scores_after}
        finish_run(trainer, results, export=..., render_card=..., what=...)  # training/ending.py
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import datasets
import transformers
from transformers import Trainer, TrainerState, TrainingArguments, set_seed

import simcse_weince.core.strict_json as strict_json
import simcse_weince.training.machines as machines
import simcse_weince.training.run_folder as run_folder
import simcse_weince.training.run_record as run_record
from simcse_weince.core.file_errors import FileFault
from simcse_weince.core.stopping import Stopped
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.training.config import ConfigError
from simcse_weince.training.hub import HubAccessError, check_hub_access, download_last_checkpoint, repo_name
from simcse_weince.training.run_folder import kept
from simcse_weince.training.signals import SaveAndStopOnSigterm, Terminated, TerminationHandler

logger = logging.getLogger(__name__)
TRAINER_STATE = "trainer_state.json"


def setup_logging(training_args: TrainingArguments) -> None:
    """Our INFO logs on the main process only (WARNING elsewhere); library logs at WARNING."""
    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, stream=sys.stdout)
    datasets.utils.logging.set_verbosity(logging.WARNING)
    transformers.utils.logging.set_verbosity(logging.WARNING)


@contextmanager
def start_run(groups: dict[str, Any]) -> Iterator[run_record.RunState]:
    """The run's setting-up and its folder, for the ``with`` block of a command; yields the run's state (its start
    time, record and Hub outcome: :class:`~simcse_weince.training.run_record.RunState`), for the trainer.

    Sets up logging and the seed, then, before anything loads: locks ``output_dir`` for this run
    (:mod:`~simcse_weince.training.run_folder`; the main process, released when the block ends), clears it for
    ``--overwrite_output_dir true``, resolves ``--resume_from_checkpoint`` (``hub``: the Hub's
    ``last-checkpoint``; ``last``: the newest complete checkpoint) and refuses a checkpoint of another run
    (:mod:`~simcse_weince.training.run_record`), refuses a folder holding a previous run otherwise, and checks
    the Hub. ``groups``: the parsed argument groups (``model``, ``data``, ``loss``, ``training``).
    """
    args = groups["training"]
    setup_logging(args)
    set_seed(args.seed)
    main = args.process_index == 0
    state = run_record.RunState(started=time.perf_counter())
    with TerminationHandler() as termination:
        state.termination = termination
        if main:
            run_folder.acquire(args.output_dir)
        try:
            machines.check_shared_folder(args.output_dir, args.process_index, args.world_size, args.save_on_each_node)
            prepare_folder(args, groups, main, state)
            machines.check_same_run(state.record, args.world_size)
            if args.push_to_hub:
                prepare_hub(args, state)
            yield state
        except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (Terminated) outside the training loop
            raise Stopped(f"{signal_name(err)} while {state.phase}; {kept(args)}") from None
        finally:
            if main:
                run_folder.release(args.output_dir)


def signal_name(err: BaseException) -> str:
    return "SIGTERM" if isinstance(err, Terminated) else "interrupted (Ctrl-C)"


def prepare_folder(args: TrainingArguments, groups: dict[str, Any], main: bool, state: run_record.RunState) -> None:
    """Clear (overwrite), resolve and check the resume, or check that the folder holds no previous run."""
    resume = args.resume_from_checkpoint
    if getattr(args, "overwrite_output_dir", False):
        if resume is not None and resume.lower() != "hub":  # a checkpoint inside the folder would be deleted
            raise ConfigError(
                f"--overwrite_output_dir true starts a clean run, so --resume_from_checkpoint {resume} has nothing "
                "to resume; drop one of them"
            )
        if main:
            run_folder.clear_previous_run(args.output_dir)
    if resume is not None and resume.lower() == "hub":
        repo = repo_name(args.hub_model_id, args.output_dir)
        with args.main_process_first(desc="download the Hub's last-checkpoint"):
            resume = str(download_last_checkpoint(repo, args.output_dir, args.hub_token, args.hub_revision))
        logger.info("resuming from %s, the last checkpoint pushed to %s", resume, repo)
    args.resume_from_checkpoint = run_folder.resume_value(resume, args.output_dir, main)
    state.record = run_record.run_record(groups, args.world_size)  # saved into every checkpoint
    allowed = run_record.parse_allowed(getattr(args, "resume_allow_changes", None))
    unknown = allowed - run_record.fields_of(groups)
    if unknown:
        raise ConfigError(
            f"--resume_allow_changes: unknown setting(s) {', '.join(sorted(unknown))}; expected setting names "
            "(e.g. max_steps,num_train_epochs) or all"
        )
    if args.resume_from_checkpoint is not None:
        run_folder.check_checkpoint_path(args.resume_from_checkpoint)
        # its files against their digests, its record too, before it is read
        run_folder.verify_checkpoint(Path(args.resume_from_checkpoint), args.output_dir)
        accepted = run_record.check_resume(args.resume_from_checkpoint, state.record, allowed)
        if accepted:
            logger.warning("resuming with changed settings (accepted): %s", ", ".join(accepted))
    elif not getattr(args, "overwrite_output_dir", False):
        run_folder.check_fresh_output_dir(args.output_dir, main)


def prepare_hub(training_args: TrainingArguments, state: run_record.RunState) -> None:
    """Check that the run's Hub repository can be written before anything loads: the main process checks (the one
    that pushes; the Trainer pushes from it alone) and every other process takes its outcome, so that only it
    needs a token and every process goes on, or stops, alike.

    Raises:
        HubAccessError: it cannot, and ``hub_push_optional`` is off. With it on, pushing is turned off for
            this run and the reason kept in ``state.hub_error`` (it goes into ``results.json``).
    """
    full_id = error = None
    if training_args.process_index == 0:
        repo = repo_name(training_args.hub_model_id, training_args.output_dir)
        try:
            full_id = check_hub_access(repo, training_args.hub_token, training_args.hub_private_repo)
        except HubAccessError as err:
            error = str(err)
    full_id, error = machines.from_main((full_id, error), training_args.world_size)
    if error is not None:
        if not getattr(training_args, "hub_push_optional", False):
            raise HubAccessError(error)
        logger.warning("%s -- training without pushing (hub_push_optional)", error)
        training_args.push_to_hub = False
        state.hub_error = error
        return
    logger.info("pushing to the Hub repository %s (hub_strategy %s)", full_id, training_args.hub_strategy)


def train_and_record(trainer: Trainer, training_args: TrainingArguments) -> dict[str, Any]:
    """Train (resuming if asked) and return what every run reports: steps, times, loss, best checkpoint, and what
    the loss says of its logged diagnostics (its ``run_summary``: WEINCE's λ curve and means). With
    ``load_best_model_at_end`` the model holds the best checkpoint's weights afterwards.

    A resumed checkpoint that already reached the run's last step trains nothing: its weights (the best
    checkpoint's) are loaded and the run goes on to export and scoring. ``SIGTERM`` saves a checkpoint at the
    next step boundary and ends in :class:`~simcse_weince.core.stopping.Stopped`, as Ctrl-C does (keeping the last
    complete checkpoint); the message says what was kept and how to resume.
    """
    t0 = time.perf_counter()
    resume = training_args.resume_from_checkpoint  # resolved by start_run
    resumed = TrainerState.load_from_json(str(Path(resume) / TRAINER_STATE)) if resume is not None else None
    done = resumed if resumed is not None and reached_the_end(resumed, training_args) else None
    state = trainer.run_state
    sigterm = SaveAndStopOnSigterm(state.termination)
    trainer.add_callback(sigterm)
    state.phase = "training"
    try:
        if done is not None:
            load_finished(trainer, resume, done, training_args)
            out = None
        else:
            out = trainer.train(resume_from_checkpoint=resume)
    except KeyboardInterrupt as err:
        raise Stopped(f"{signal_name(err)} at step {trainer.state.global_step}; {kept(training_args)}") from None
    except FileFault:
        raise  # it names the file and what was kept
    except Exception as err:
        step, rank, world = trainer.state.global_step, training_args.process_index, training_args.world_size
        lost = machines.lost_contact(err, step, rank, world, kept(training_args))
        if lost is not None:
            raise lost from None
        if training_args.should_save:
            logger.error(
                "training failed at step %d (%s: %s); %s",
                trainer.state.global_step,
                type(err).__name__,
                " ".join(str(err).split())[:200],
                kept(training_args),
            )
        raise
    finally:
        sigterm.restore(training_args)
        trainer.remove_callback(sigterm)
    if sigterm.stopped or sigterm.received is not None:  # received after the last step's end: stopped all the same
        raise Stopped(f"SIGTERM at step {trainer.state.global_step}; {kept(training_args)}")
    state.phase = "scoring the trained model"
    if training_args.should_save:
        run_folder.remove_incomplete_checkpoints(training_args.output_dir)
    return {
        "steps": trainer.state.global_step,
        "steps_this_session": trainer.state.global_step - (resumed.global_step if resumed else 0),
        "epochs": trainer.state.epoch,
        "world_size": training_args.world_size,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "best_metric_during_training": trainer.state.best_metric,
        "train_seconds": time.perf_counter() - t0,
        "train_seconds_trainer": out.metrics.get("train_runtime") if out else None,
        "train_loss": out.training_loss if out else None,
        **trainer.contrastive_loss.run_summary(trainer.state.log_history),
    }


def reached_the_end(state: TrainerState, training_args: TrainingArguments) -> bool:
    """Whether a resumed checkpoint's state already reached the run's last step: ``max_steps``, or for an
    epoch-based run with unchanged epochs, the step count the checkpoint's run planned."""
    if training_args.max_steps > 0:
        return state.global_step >= training_args.max_steps
    if state.num_train_epochs == training_args.num_train_epochs and state.max_steps:
        return state.global_step >= state.max_steps
    return False


def load_finished(trainer: Trainer, resume: str, state: TrainerState, training_args: TrainingArguments) -> None:
    """Put a finished checkpoint's state and weights into the trainer, as ``train`` would have left them: with
    ``load_best_model_at_end``, the best checkpoint's weights."""
    logger.warning(
        "%s is at step %d, the run's last: nothing left to train; exporting and scoring it", resume, state.global_step
    )
    trainer.state = state
    weights = Path(resume)
    best = state.best_model_checkpoint
    if training_args.load_best_model_at_end and best:
        moved = Path(training_args.output_dir) / Path(best).name  # the run's folder may have moved (Hub resume)
        found = Path(best) if Path(best).is_dir() else moved if moved.is_dir() else None
        if found is None:  # e.g. the Hub's last-checkpoint, without the best one beside it
            logger.warning("the best checkpoint %s is not here: exporting the last checkpoint's weights", best)
            state.best_model_checkpoint = None
        weights = found or weights
    trainer._load_from_checkpoint(str(weights))  # the Trainer's own loader, as its resume uses


def card_facts(trainer: Trainer, loss: ContrastiveLoss) -> dict[str, Any]:
    """What both model cards say about the training run: loss (display name, config, citation), steps, batch per
    process, processes, learning rate and precision, as keyword arguments of the card renderers."""
    args = trainer.args
    return {
        "loss_name": loss.display_name,
        # with what the loss learned (the link losses' (a, b)) beside its settings
        "loss_config": loss.get_config_dict() | ({"learned": learned} if (learned := loss.learned_values()) else {}),
        "citation": loss.citation,
        "steps": trainer.state.global_step,
        "batch": batch_used(args.per_device_train_batch_size, len(trainer.train_dataset), args.world_size),
        "processes": args.world_size,
        "lr": args.learning_rate,
        "precision": args.precision_name,
    }


def batch_used(per_device: int, rows: int, processes: int) -> int:
    """The batch per process the data loader actually forms: the configured one, or fewer when each process's
    share of the data is smaller (a batch of 100,000 over 300 sentences is a batch of 300)."""
    return max(1, min(per_device, -(-rows // processes)))


def write_results(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """``<output_dir>/results.json``, strict JSON: a score that is not a number is ``null``
    (:mod:`~simcse_weince.core.strict_json`)."""
    path = Path(output_dir) / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(strict_json.dumps(results, indent=2, default=str), encoding="utf-8")
    return path
