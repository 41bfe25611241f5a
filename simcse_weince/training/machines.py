"""A run on several processes, maybe on several machines: checked to be one run before anything loads.

Two checks, each one collective step of every process (gloo or NCCL, as the launcher set up), so that every
process reaches the same verdict and none waits on another that stopped:

* **One folder** (:func:`check_shared_folder`): the main process writes a random token into ``output_dir``; every
  process must read it back there. A process that does not sees another folder under the same name (node-local
  disks, or a relative ``--output_dir`` resolved in each machine's own working directory): its checkpoints would
  hold only its own share (its RNG state) and no machine could resume, so the run is refused. The run's files —
  checkpoints, run record, digests, the exported model, ``results.json`` — are written by the main process into
  that one folder (``save_on_each_node`` is refused when the run spans machines: every machine would write the same
  files at once).
* **One run** (:func:`check_same_run`): the settings that shape the run (its run record) and the package's source
  are the same on every process; a machine started with other settings or other code is refused, naming it.

During training, a collective that fails because a process went away ends the others in one ``stopped:`` line
naming the machines and ranks that may be gone and the last complete checkpoint (:func:`lost_contact`).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path
from typing import Any

from simcse_weince.core.stopping import Stopped
from simcse_weince.training.config import ConfigError

MARK = ".shared-folder-check"
PACKAGE = Path(__file__).resolve().parents[1]


def machine_of_this_process() -> int:
    """This process's machine (node) rank as the launcher set it (torchrun and accelerate: ``GROUP_RANK``)."""
    return int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "0")))


def per_machine(world_size: int) -> int:
    """Processes per machine, as the launcher set it (``LOCAL_WORLD_SIZE``; all of them without one)."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size))))


def machines(world_size: int) -> int:
    """How many machines the run spans: processes over processes per machine."""
    return max(1, world_size // per_machine(world_size))


def _gather(value: Any, world_size: int) -> list[Any]:
    import torch.distributed as dist

    found: list[Any] = [None] * world_size
    dist.all_gather_object(found, value)
    return found


def from_main(value: Any, world_size: int) -> Any:
    """The main process's ``value``, on every process (itself for one process)."""
    return value if world_size <= 1 else _gather(value, world_size)[0]


def _who(entries: list[tuple[int, int]]) -> str:
    """``machine 1 (rank 1)``, ``machines 1, 2 (ranks 2, 3, 4, 5)``."""
    machine_ids = sorted({m for _, m in entries})
    ranks = ", ".join(str(r) for r, _ in entries)
    word = "machine" if len(machine_ids) == 1 else "machines"
    return f"{word} {', '.join(map(str, machine_ids))} (rank{'s' if len(entries) > 1 else ''} {ranks})"


def check_shared_folder(output_dir: str | Path, process_index: int, world_size: int, save_on_each_node: bool) -> None:
    """Every process sees the folder the main process writes (see the module's docstring). A no-op for one process.

    Raises:
        ConfigError: a process sees another folder, or ``save_on_each_node`` with a run across machines; on every
            process alike (one line saying what to pass).
    """
    if world_size <= 1:
        return
    import torch.distributed as dist

    if save_on_each_node and machines(world_size) > 1:
        raise ConfigError(
            "save_on_each_node is not supported across machines: every machine would write the same checkpoint "
            "files; put --output_dir on a folder every machine sees and pass --save_on_each_node false"
        )
    token = [uuid.uuid4().hex, str(Path(output_dir).resolve())] if process_index == 0 else [None, None]
    dist.broadcast_object_list(token, src=0)  # the main process's token and its folder
    mark = Path(output_dir) / MARK
    if process_index == 0:
        mark.write_text(token[0], encoding="utf-8")
    dist.barrier()
    try:
        sees = mark.read_text(encoding="utf-8") == token[0]
    except OSError:
        sees = False
    seen = _gather((sees, machine_of_this_process()), world_size)
    dist.barrier()
    if process_index == 0:
        mark.unlink(missing_ok=True)
    blind = [(rank, machine) for rank, (ok, machine) in enumerate(seen) if not ok]
    if blind:
        raise ConfigError(
            f"output_dir {output_dir} is not one folder for the whole run: {_who(blind)} "
            f"{'does' if len(blind) == 1 else 'do'} not see what machine 0 writes there ({token[1]}; node-local "
            "disks, or a relative path in each machine's own working directory), so each would keep only its share "
            "of every checkpoint and none could resume; pass an --output_dir on a filesystem every machine sees"
        )


def source_digest() -> str:
    """SHA-256 of the package's Python source (file names and contents): the same code on every machine."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def check_same_run(record: dict[str, Any], world_size: int) -> None:
    """The run's settings (``record``, the run record) and the package's source are the same on every process.
    A no-op for one process.

    Raises:
        ConfigError: a process differs from the main one (naming its machine, rank and the settings that differ).
    """
    if world_size <= 1:
        return
    found = _gather((record, source_digest(), machine_of_this_process()), world_size)
    main_record, main_code, _ = found[0]
    settings = [(rank, m, sorted(k for k in main_record.keys() | r.keys() if main_record.get(k) != r.get(k)))
                for rank, (r, _, m) in enumerate(found) if r != main_record]  # fmt: skip
    if settings:
        keys = sorted({k for _, _, ks in settings for k in ks})
        raise ConfigError(
            f"{_who([(r, m) for r, m, _ in settings])} started with other settings than machine 0: "
            f"{', '.join(keys)}; start every machine with the same command and config"
        )
    code = [(rank, m) for rank, (_, c, m) in enumerate(found) if c != main_code]
    if code:
        raise ConfigError(
            f"{_who(code)} {'run' if len({m for _, m in code}) > 1 else 'runs'} other code than machine 0 (the "
            "simcse_weince package's source differs); install the same version on every machine"
        )


# A collective that fails because a peer went away: gloo's socket errors, the collective timeout (--ddp_timeout),
# NCCL's aborted communicator. torch raises these as DistError subclasses, or (gloo) as a RuntimeError that names
# the backend; a timeout of anything else (a Hub upload, a lock) is not one.
LOST = re.compile(
    r"Connection (?:reset|closed) by peer|Broken pipe|timed out|Timeout|communicator was aborted|watchdog",
    re.IGNORECASE,
)
BACKEND = re.compile(r"gloo|nccl|ProcessGroup|c10d", re.IGNORECASE)


def lost_contact(err: BaseException, step: int, process_index: int, world_size: int, kept: str) -> Stopped | None:
    """The stop to end with when ``err`` is a collective that failed because another process of the run went away
    (killed, stopped, its machine or network lost), else ``None``. It names the processes that may be gone: the
    other machines' (ranks are numbered machine by machine, ``LOCAL_WORLD_SIZE`` each), or this machine's others
    when the run has one machine. A killed peer is seen at once (its connection closes); a silent one at the
    collective timeout (``--ddp_timeout``, seconds)."""
    import torch.distributed as dist

    text = str(err)
    collective = isinstance(err, dist.DistError) or (BACKEND.search(text) and LOST.search(text))
    if world_size <= 1 or not collective:
        return None
    each = per_machine(world_size)
    mine = process_index // each
    others = [(r, r // each) for r in range(world_size) if r // each != mine] or [
        (r, mine) for r in range(world_size) if r != process_index
    ]
    cause = f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"
    verb = "was" if len({m for _, m in others}) == 1 else "were"
    return Stopped(
        f"lost contact with the run's other processes at step {step}: {_who(others)} stopped, {verb} killed or lost "
        f"the network ({cause}); {kept}"
    )
