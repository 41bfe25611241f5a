"""One run per output folder: a lock held for the run's life, and the folder's housekeeping.

The main process takes an OS file lock on ``<output_dir>/.run.lock`` (``filelock``; the kernel releases it when
the process dies, however it dies) and writes who holds it to ``.run.lock.json`` (pid, host, start time). A
second run into the same folder fails at once, in one line naming the holder. A lock file left by a run that
died without releasing it is found free; the run that finds it says which run that was (it is not running:
the OS lock would still be held) before taking the folder over.

Housekeeping: :func:`check_writable_folder` before anything loads, :func:`clear_previous_run` for
``--overwrite_output_dir true`` (a clean run: nothing of the old one can be resumed or exported by accident),
:func:`remove_incomplete_checkpoints` once a resumed run has saved past them.

Checkpoints: :func:`resume_value` resolves ``--resume_from_checkpoint last`` to the newest complete checkpoint
(:func:`latest_complete_checkpoint`, setting aside the ones a kill cut short), :func:`check_checkpoint_path` and
:func:`verify_checkpoint` check the one named (its files against their digests), :func:`check_fresh_output_dir`
refuses a folder holding a previous run, :func:`kept` says what a stopped run kept, and :func:`apply_save_limit`
applies ``save_total_limit`` once the model is exported.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

import simcse_weince.training.run_record as run_record
from simcse_weince.core.digests import TRANSIENT
from simcse_weince.core.file_errors import FileFault
from simcse_weince.training.config import ConfigError

if TYPE_CHECKING:
    from transformers import Trainer, TrainingArguments

logger = logging.getLogger(__name__)

LOCK = ".run.lock"
HOLDER = ".run.lock.json"
WRITE_TEST = ".write-test-"  # + pid: check_writable_folder's probe
# Files of this machine, never of the run's results: no push to the Hub carries them (the holder names the pid and
# the host).
LOCAL_ONLY = (LOCK, HOLDER, f"{WRITE_TEST}*")
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
INCOMPLETE = re.compile(r"^checkpoint-(\d+)-incomplete$")
RUN_FILES = (
    "model", "model.partial", "results.json", "results.md", "run_config.yaml", "run_record.json", "last-checkpoint"
)  # fmt: skip

_held: dict[Path, FileLock] = {}


def check_writable_folder(folder: str | Path) -> Path:
    """``folder``, created if needed, once it is known to be a folder this process can write.

    Raises:
        ConfigError: it is a file, or it (or its parent) cannot be written.
    """
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output_dir {path} is a file; expected a folder (or a path where one can be created)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f"{WRITE_TEST}{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            f"output_dir {path} cannot be written ({err.strerror or err}); choose another --output_dir"
        ) from err
    return path


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "holder unknown"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    return f"pid {holder.get('pid')} on {holder.get('host')}, started {started}"


def read_holder(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / HOLDER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def acquire(output_dir: str | Path) -> Path:
    """Lock ``output_dir`` for this process until :func:`release` (or the process's end).

    Raises:
        ConfigError: another live run holds it (the message names it), or the folder cannot be written.
    """
    folder = check_writable_folder(output_dir).resolve()
    if folder in _held:
        return folder
    lock = FileLock(folder / LOCK)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(
            f"output_dir {folder} is in use by another run ({describe_holder(read_holder(folder))}); wait for it to "
            "end, or choose another --output_dir"
        ) from None
    stale = read_holder(folder)
    if stale is not None:
        logger.warning(
            "output_dir %s was held by a run that ended without releasing it (%s; it is not running now: its lock "
            "was free); this run takes the folder over",
            folder,
            describe_holder(stale),
        )
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    (folder / HOLDER).write_text(json.dumps(holder), encoding="utf-8")
    _held[folder] = lock
    return folder


def release(output_dir: str | Path) -> None:
    """Give ``output_dir`` back (a no-op if this process does not hold it)."""
    folder = Path(output_dir).resolve()
    lock = _held.pop(folder, None)
    if lock is None:
        return
    (folder / HOLDER).unlink(missing_ok=True)
    lock.release()


def is_temporary(name: str) -> bool:
    """A file a save writes beside its target and renames (``*.tmp*``, ``tmp*``), or a marker it deletes once done
    (:data:`~simcse_weince.core.digests.TRANSIENT`): left there, the save did not end."""
    return ".tmp" in name or name.startswith("tmp") or name in TRANSIENT


def checkpoint_folders(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, newest (highest N) first."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := CHECKPOINT.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def is_complete(checkpoint: Path) -> bool:
    """Whether a save of ``checkpoint`` finished: ``trainer_state.json`` there, no temporary file left, and its
    record's digests written (the save's last step; :func:`~simcse_weince.training.run_record.saved_in_full`)."""
    return (
        (checkpoint / "trainer_state.json").is_file()
        and not any(is_temporary(f.name) for f in checkpoint.iterdir())
        and run_record.saved_in_full(checkpoint)
    )


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """The checkpoints of ``output_dir`` whose save finished, newest first (their files are not checked)."""
    return [c for c in checkpoint_folders(output_dir) if is_complete(c)]


def previous_run(output_dir: str | Path) -> list[str]:
    """What a finished or interrupted run left in ``output_dir`` (checkpoints, ``model/``, ``results.json``)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = sorted(p.name for p in folder.iterdir() if CHECKPOINT.match(p.name) or INCOMPLETE.match(p.name))
    return found + [name for name in ("model", "results.json") if (folder / name).exists()]


def clear_previous_run(output_dir: str | Path) -> list[str]:
    """Remove what an earlier run left in ``output_dir`` (checkpoints, incomplete ones, ``model/``, results,
    its run record): ``--overwrite_output_dir true`` starts a clean run. Returns the names removed."""
    folder = Path(output_dir)
    removed = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if CHECKPOINT.match(path.name) or INCOMPLETE.match(path.name) or path.name in RUN_FILES:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append(path.name)
    if removed:
        logger.warning("overwrite_output_dir: removed the previous run's %s from %s", ", ".join(removed), folder)
    return removed


def remove_incomplete_checkpoints(output_dir: str | Path) -> list[str]:
    """Delete the ``checkpoint-N-incomplete`` folders a killed save left (kept aside until a resumed run has
    trained past them). Returns their names."""
    folder = Path(output_dir)
    removed = sorted(p.name for p in folder.iterdir() if p.is_dir() and INCOMPLETE.match(p.name))
    for name in removed:
        shutil.rmtree(folder / name)
    if removed:
        logger.info("removed the incomplete checkpoint folder(s) %s of an earlier interrupted save", ", ".join(removed))
    return removed


def check_checkpoint_path(path: str) -> None:
    """Raises: ConfigError: ``--resume_from_checkpoint`` names no folder."""
    where = Path(path)
    if not where.exists():
        raise ConfigError(
            f"command line: --resume_from_checkpoint {path}: no such folder ({where.absolute()}); expected a "
            "checkpoint-N folder of this run, or last (the newest complete one in --output_dir) or hub"
        )
    if not where.is_dir():
        raise ConfigError(f"command line: --resume_from_checkpoint {path}: a file; expected a checkpoint-N folder")


def verify_checkpoint(checkpoint: Path, output_dir: str | Path) -> None:
    """Check every file of ``checkpoint`` against the digests its save recorded
    (:func:`~simcse_weince.training.run_record.checkpoint_damage`); a checkpoint saved without digests (by an
    earlier version) is resumed unchecked, with a warning.

    Raises:
        FileFault: a file is missing, truncated or changed, or the record itself is damaged; the message names it
            and offers the previous complete checkpoint that is intact.
    """
    t0 = time.perf_counter()
    damaged = checkpoint_damage(checkpoint)
    if damaged is None:
        logger.warning("%s holds no file digests (saved by an earlier version): its files are not checked", checkpoint)
        return
    if not damaged:
        logger.info("checked the files of %s against their digests (%.1f s)", checkpoint, time.perf_counter() - t0)
        return
    earlier = (c for c in complete_checkpoints(output_dir) if step_of(c) < step_of(checkpoint))
    intact = next((c for c in earlier if not checkpoint_damage(c)), None)  # newest first
    offer = (
        f"resume from the previous complete checkpoint instead: --resume_from_checkpoint {intact}"
        if intact is not None
        else "no earlier intact checkpoint is there: start again with --overwrite_output_dir true"
    )
    raise FileFault(f"checkpoint {checkpoint} is damaged ({'; '.join(damaged)}); {offer}")


def checkpoint_damage(checkpoint: Path) -> list[str] | None:
    """:func:`~simcse_weince.training.run_record.checkpoint_damage`, with a damaged record as one more damaged file
    (so that it, too, is named with the previous intact checkpoint offered)."""
    try:
        return run_record.checkpoint_damage(checkpoint)
    except run_record.DamagedRecord as err:
        return [f"{run_record.RECORD}: {err.what}"]


def step_of(checkpoint: Path) -> int:
    found = CHECKPOINT.match(checkpoint.name)
    return int(found.group(1)) if found else -1


def check_fresh_output_dir(output_dir: str | Path, main: bool = True) -> None:
    """Refuse to train into a folder holding a previous run (the Trainer would rotate its checkpoints away).

    A folder whose only trace of a run is checkpoints that a kill cut short (no complete checkpoint, no
    ``model/``, no ``results.json``) holds nothing to continue and nothing to lose: the run starts from the
    beginning there, those folders set aside as ``checkpoint-N-incomplete`` (removed once the run has finished), as
    ``--resume_from_checkpoint last`` advises when it finds no complete checkpoint.

    Raises:
        ConfigError: naming what is there and the ways on (resuming only when there is a complete checkpoint).
    """
    found = previous_run(output_dir)
    if not found:
        return
    complete = complete_checkpoints(output_dir)
    if not complete and not {"model", "results.json"} & set(found):
        logger.warning(
            "output_dir %s holds only checkpoints whose save did not finish (%s): nothing to resume; training from "
            "the beginning",
            output_dir,
            ", ".join(found),
        )
        latest_complete_checkpoint(output_dir, clean=main)  # sets them aside, so that no new save mixes with one
        return
    shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
    on = "continue it with --resume_from_checkpoint last, replace" if complete else "replace"
    raise ConfigError(
        f"output_dir {output_dir} holds a previous run ({shown}); {on} it with --overwrite_output_dir true, or "
        "choose another --output_dir"
    )


def latest_complete_checkpoint(output_dir: str | Path, clean: bool = True) -> Path | None:
    """The newest ``checkpoint-N`` folder that a save finished (:func:`is_complete`),
    or ``None``.

    Newer folders that a kill interrupted mid-save are reported; with ``clean`` their temporary files are
    deleted and the folder is renamed ``checkpoint-N-incomplete`` (removed if nothing else is in it), so that
    neither resuming nor the Trainer's checkpoint rotation takes it for a checkpoint.
    """
    for ckpt in checkpoint_folders(output_dir):
        if is_complete(ckpt):
            return ckpt
        logger.warning("skipping the incomplete checkpoint %s (a save that did not finish)", ckpt)
        if clean:
            for f in [f for f in ckpt.iterdir() if is_temporary(f.name)]:
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            if any(ckpt.iterdir()):
                aside = ckpt.with_name(ckpt.name + "-incomplete")
                if aside.exists():  # a save of the same step was killed before
                    shutil.rmtree(aside)
                ckpt.rename(aside)
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
        found = previous_run(output_dir)
        cut = [name for name in found if INCOMPLETE.match(name) or CHECKPOINT.match(name)]
        what = f" (only {', '.join(cut)}: saves that a stop cut short)" if cut else ""
        fresh = (
            "start it again with the same command plus --overwrite_output_dir true (it holds "
            f"{', '.join(n for n in found if n in ('model', 'results.json'))} of an earlier run)"
            if {"model", "results.json"} & set(found)
            else "start the run from the beginning with the same command without --resume_from_checkpoint"
        )
        raise ConfigError(
            f"--resume_from_checkpoint {value}: no complete checkpoint-N folder in {output_dir}{what}, so there is "
            f"nothing to resume; {fresh}"
        )
    logger.info("resuming from %s", ckpt)
    return str(ckpt)


def kept(training_args: TrainingArguments) -> str:
    """What a stopped or failed run kept, and how to go on from it (advice only when there is a checkpoint)."""
    ckpt = latest_complete_checkpoint(training_args.output_dir, clean=False)
    if ckpt is None:
        return "no checkpoint was saved yet, so there is nothing to resume"
    return (
        f"the last complete checkpoint is {ckpt}: resume with the same command plus --resume_from_checkpoint last "
        "(without --overwrite_output_dir)"
    )


def apply_save_limit(trainer: Trainer) -> None:
    """Once the model is exported: ``save_total_limit`` applied to the run's checkpoints as the Trainer applies it
    at the end of training (which this run postponed: :mod:`~simcse_weince.training.signals`). A limit of 1 with a
    best checkpoint keeps the best one only; otherwise the newest and the best are kept, then the newest of the
    others up to the limit."""
    args, best = trainer.args, trainer.state.best_model_checkpoint
    limit = args.save_total_limit
    found = checkpoint_folders(args.output_dir)  # newest first
    if not args.should_save or not limit or limit <= 0 or not found:
        return
    best_name = Path(best).name if best else None
    protected = {best_name} if limit == 1 and best_name else {found[0].name, best_name} - {None}
    others = [c for c in found if c.name not in protected]
    for ckpt in others[max(0, limit - len(protected)) :]:
        shutil.rmtree(ckpt, ignore_errors=True)
