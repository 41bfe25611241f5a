"""A run knows what it is: the settings that shape its result, saved with every checkpoint and compared on resume.

The record is a flat mapping ``{"group.field": value}`` of the model, data and loss groups (minus fields that
only say where things go or how fast they run) and the training settings that change the trained weights:
seed, batch, processes, schedule, optimiser, precision, gradient caching, evaluation cadence (it picks the best
checkpoint). Local training files are identified by name, size and content digest
(:func:`~simcse_weince.core.digests.file_digest`: a file edited in place is another file). The trainer writes it as
``run_record.json`` into each checkpoint folder with its model, and writes it again once every file of the
checkpoint is saved, now with each file's digest under ``files`` (``null`` until then: a save that did not get
that far is incomplete). Resuming and evaluation check the files against those digests
(:func:`checkpoint_damage`); the exported model folder holds its own record and digests.

Resuming (``last``, a path, or the Hub's ``last-checkpoint``) compares the checkpoint's record with the current
one and refuses any difference in one line listing them, unless ``--resume_allow_changes`` names them
(``max_steps,num_train_epochs`` to train longer; ``all`` to accept anything).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from simcse_weince.core import strict_json
from simcse_weince.core.atomic import write_text_atomic
from simcse_weince.core.digests import FILES_KEY, RECORD_FILE, damage, file_digest, folder_digests
from simcse_weince.core.paths import resolve_data_path
from simcse_weince.core.setting_changes import setting_changes
from simcse_weince.losses import loss_configs
from simcse_weince.training.config import ConfigError, to_plain

RECORD = RECORD_FILE
FILES = FILES_KEY  # the record's key holding the folder's digests (not a setting)

# Fields of the model / data / loss groups that do not change what is trained.
NOT_SHAPING = frozenset(
    {
        "data_cache_dir",
        "preprocessing_num_workers",
        "eval_batch_size",
        "eval_before_training",
        "eval_test_at_end",
        "model_card_note",
        "senteval_dir",
        "download",
        "data_dir",
    }
)
# TrainingArguments that change the trained weights or the checkpoint kept as best.
TRAINING_FIELDS = (
    "seed",
    "data_seed",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "loss_learning_rate",
    "loss_weight_decay",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "optim",
    "lr_scheduler_type",
    "warmup_ratio",
    "warmup_steps",
    "max_steps",
    "num_train_epochs",
    "precision",
    "gradient_cache_chunk_size",
    "dataloader_drop_last",
    "eval_strategy",
    "eval_steps",
    "metric_for_best_model",
)


@dataclasses.dataclass
class RunState:
    """What a run knows of itself beyond its settings, owned by the run (:func:`~simcse_weince.training.run.start_run`
    makes it, the trainer and the ending read it), not by ``TrainingArguments``.

    Attributes:
        started: ``time.perf_counter()`` when the run began.
        record: the run's record (:func:`run_record`), saved into every checkpoint; None until it is made.
        hub_error: why an optional Hub push was turned off before training (it goes into ``results.json``).
        phase: what the run is doing (``preparing the run``, ``training``, ``scoring``, ``exporting the model``,
            ...), for the message of a stop outside the training loop.
        termination: the run's ``SIGTERM`` handler (:class:`~simcse_weince.training.signals.TerminationHandler`),
            deferred by the training loop.
    """

    started: float
    record: dict[str, Any] | None = None
    hub_error: str | None = None
    phase: str = "preparing the run"
    termination: Any = None


def file_label(path: str) -> str:
    """``<file name> (<size> bytes, digest <digest>)`` of a local file (the name as given for anything else):
    the same data under another folder (a resume on another machine) is the same run; the same name and size with
    other bytes is not."""
    local = Path(resolve_data_path(path))
    if not local.is_file():
        return path
    return f"{local.name} ({local.stat().st_size} bytes, digest {file_digest(local)})"


_LABEL = re.compile(r"^(.*) \((\d+) bytes(?:, digest [0-9a-f]+)?\)$")


def _without_digest(label: Any) -> Any:
    """A file label as records before content digests wrote it (``name (N bytes)``)."""
    found = _LABEL.match(label) if isinstance(label, str) else None
    return f"{found.group(1)} ({found.group(2)} bytes)" if found else label


def run_record(groups: dict[str, Any], world_size: int) -> dict[str, Any]:
    """The record of a run from its argument groups (``model``, ``data``, ``loss``, ``training``)."""
    record: dict[str, Any] = {"training.processes": world_size}
    for name, group in groups.items():
        if name == "training":
            plain = to_plain({f: getattr(group, f, None) for f in TRAINING_FIELDS})
        else:
            plain = {k: v for k, v in to_plain(group).items() if k not in NOT_SHAPING}
        if name == "data" and plain.get("train_files"):
            plain["train_files"] = [file_label(f) for f in plain["train_files"]]
        record.update({f"{name}.{key}": value for key, value in plain.items()})
    return record


def save_record(folder: str | Path, record: dict[str, Any], with_digests: bool = False) -> None:
    """Write ``<folder>/run_record.json`` (replacing it whole: written beside and renamed): the settings, and
    under ``files`` the digests of every other file in ``folder`` with ``with_digests``, else ``null`` (the
    folder's files are not all written yet)."""
    files = folder_digests(folder, exclude=(RECORD,)) if with_digests else None
    write_text_atomic(Path(folder, RECORD), strict_json.dumps({**record, FILES: files}, indent=1, sort_keys=True))


class DamagedRecord(ConfigError):
    """A ``run_record.json`` that its save cannot have written (not JSON, not an object, a key that is not a
    setting); ``what`` says how, ``path`` names it."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path} is damaged ({what}); expected the run record its save wrote")
        self.path, self.what = path, what


def read_record_file(folder: str | Path) -> dict[str, Any] | None:
    """The whole ``run_record.json`` of ``folder`` (settings and ``files``), or ``None`` if there is none.

    Raises:
        DamagedRecord: it is there but is not what a save writes (not JSON, not an object, a stray key).
    """
    path = Path(folder) / RECORD
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise DamagedRecord(path, f"not JSON: {err}") from err
    if not isinstance(saved, dict):
        raise DamagedRecord(path, "not a JSON object")
    # Every key a save writes is a setting (``group.field``) or ``files``: any other is damage, which would
    # otherwise pass as a record of an earlier version (no digests) and fail deep in the comparison of settings.
    stray = sorted(k for k in saved if k != FILES and "." not in k)
    if stray:
        raise DamagedRecord(path, f"key {stray[0]!r} is neither a setting (group.name) nor {FILES!r}")
    if saved.get(FILES) is not None and not isinstance(saved[FILES], dict):
        raise DamagedRecord(path, f"{FILES!r} is a {type(saved[FILES]).__name__}, not the table of file digests")
    return saved


def load_record(checkpoint: str | Path) -> dict[str, Any] | None:
    """The settings a checkpoint's record holds (without its digests), or ``None``."""
    saved = read_record_file(checkpoint)
    return None if saved is None else {k: v for k, v in saved.items() if k != FILES}


def saved_in_full(checkpoint: str | Path) -> bool:
    """Whether a checkpoint's save got to its last step (its record's digests); a checkpoint without a record,
    or whose record predates digests, counts as saved in full, and so does one whose record is damaged (its
    writes are atomic, so damage came later: the resume's check names it, rather than skipping the checkpoint as
    if a kill had cut its save short)."""
    try:
        saved = read_record_file(checkpoint)
    except DamagedRecord:
        return True
    return saved is None or FILES not in saved or saved[FILES] is not None


def checkpoint_damage(folder: str | Path) -> list[str] | None:
    """The files of ``folder`` that differ from the digests its record holds (empty: all match), or ``None`` when
    it holds no digests to check against (no record, or one written before digests or by a save cut short)."""
    saved = read_record_file(folder)  # a record that is not JSON is an error naming it
    files = saved.get(FILES) if saved else None
    return damage(folder, files) if isinstance(files, dict) else None


# Settings added after runs were first recorded, with the value every run recorded before them had: such a run's
# record lacks the key, and resuming it with that value is no change.
ADDED_SETTINGS: dict[str, Any] = {
    "data.validation": "stsb",
    "model.length_groups": 1,  # one forward a batch, before length groups
    # every loss's knobs and the extra top-M terms (off), at their defaults: a loss or a knob added later is one
    # the earlier run did not have, so at its default it is no change (a knob of several losses: the first's)
    **{f"loss.{f.name}": f.default for config in reversed(loss_configs()) for f in dataclasses.fields(config)},
    "training.loss_learning_rate": None,  # a loss's own parameters (none before them)
    "training.loss_weight_decay": 0.0,
}


def differences(saved: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (checkpoint's value, current value)}`` for every setting that differs, sorted
    (:func:`~simcse_weince.core.setting_changes.setting_changes`; a key the checkpoint's record lacks has its
    :data:`ADDED_SETTINGS` value there)."""
    now = dict(current)
    old_labels = saved.get("data.train_files")
    if isinstance(old_labels, list) and old_labels == [_without_digest(x) for x in old_labels]:  # before digests
        now["data.train_files"] = [_without_digest(x) for x in current.get("data.train_files") or []]
    return setting_changes(saved, now, ignore={FILES}, added=ADDED_SETTINGS)


def parse_allowed(value: str | None) -> set[str]:
    """``--resume_allow_changes``: comma-separated field names (``max_steps``) or ``all``."""
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def check_resume(checkpoint: str | Path, current: dict[str, Any], allowed: set[str]) -> dict[str, tuple[Any, Any]]:
    """Refuse to resume ``checkpoint`` into a run it does not belong to; returns the allowed differences.

    Raises:
        ConfigError: the checkpoint holds no record (another program, or a different version of this one) or
            its settings differ from the current ones in fields ``allowed`` does not name.
    """
    saved = load_record(checkpoint)
    if saved is None:
        if "all" in allowed:
            return {}
        raise ConfigError(
            f"--resume_from_checkpoint {checkpoint}: it holds no {RECORD} (not a checkpoint of this run, or written "
            "by another program or version), so it cannot be checked against this run's settings; pass "
            "--resume_allow_changes all to resume it anyway"
        )
    diff = differences(saved, current)
    refused = {k: v for k, v in diff.items() if "all" not in allowed and k.split(".", 1)[1] not in allowed}
    if refused:
        listed = "; ".join(f"{k.split('.', 1)[1]}: {a!r} in the checkpoint, {b!r} now" for k, (a, b) in refused.items())
        names = ",".join(k.split(".", 1)[1] for k in refused)
        raise ConfigError(
            f"--resume_from_checkpoint {checkpoint} belongs to a run with other settings ({listed}); resume with the "
            "same settings, start a new run in another --output_dir, or accept the differences with "
            f"--resume_allow_changes {names}"
        )
    return diff


def fields_of(groups: dict[str, Any]) -> set[str]:
    """Every field name of the argument groups (to validate ``--resume_allow_changes``)."""
    return {f.name for g in groups.values() for f in dataclasses.fields(g)} | {"processes", "all"}
