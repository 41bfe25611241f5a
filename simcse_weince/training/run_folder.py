"""One run per output folder: a lock held for the run's life, and the folder's housekeeping.

The main process takes an OS file lock on ``<output_dir>/.run.lock`` (``filelock``; the kernel releases it when
the process dies, however it dies) and writes who holds it to ``.run.lock.json`` (pid, host, start time). A
second run into the same folder fails at once, in one line naming the holder. A lock file left by a run that
died without releasing it is found free; the run that finds it says which run that was (it is not running:
the OS lock would still be held) before taking the folder over.

Housekeeping: :func:`check_writable_folder` before anything loads, :func:`clear_previous_run` for
``--overwrite_output_dir true`` (a clean run: nothing of the old one can be resumed or exported by accident),
:func:`remove_incomplete_checkpoints` once a resumed run has saved past them.
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
from typing import Any

from filelock import FileLock, Timeout

import simcse_weince.training.run_record as run_record
from simcse_weince.digests import TRANSIENT
from simcse_weince.training.config import ConfigError

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
    (:data:`~simcse_weince.digests.TRANSIENT`): left there, the save did not end."""
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
