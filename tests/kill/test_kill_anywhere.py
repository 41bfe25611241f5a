"""The kill-anywhere suite: each long command stopped with SIGTERM and with SIGKILL at chosen points (during
loading, mid-step, during a save, during an evaluation), then run again as a user would.

Each case checks that no process of the stopped command is left (its session is empty), that the command run
again (resumed from the last complete checkpoint when there is one, else restarted) finishes, that its final
outputs equal an uninterrupted run's (bitwise: these runs are deterministic on the CPU) and that no lock is left
held (the second run would be refused). The stop is placed by ``stopper/sitecustomize.py``: ``KILL_AT`` names a
function and the call at which the process signals itself, so a point is hit exactly, not by timing.

Run by ``make test-bench`` (marker ``bench``): a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import argv, text_run_args

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[2]
STOPPER = Path(__file__).resolve().parent / "stopper"
TRAINER = "simcse_weince.training.trainer:ContrastiveTrainer"
STEPS = dict(max_steps=6, eval_steps=3, save_steps=3, save_total_limit=2, lr_scheduler_type="constant",
             max_train_samples=160)  # fmt: skip


@dataclass(frozen=True)
class Point:
    """Where a command is stopped: the ``n``-th call of ``function`` (``module:Qualified.name``)."""

    name: str
    function: str
    n: int


@dataclass(frozen=True)
class Command:
    """A long command: how it is run (``argv(folder)``), run again after a stop (``again(folder, argv)``), and
    what of its output must equal an uninterrupted run's (``outputs(folder)``: name -> bytes)."""

    name: str
    argv: Callable[[Path], list[str]]
    again: Callable[[Path, list[str]], list[str]]
    outputs: Callable[[Path], dict[str, bytes]]
    points: tuple[Point, ...]


def session_processes(sid: int) -> list[str]:
    """The processes of session ``sid`` still there (zombies excluded)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(") ", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            left.append(f"{entry.name} {stat.split(' (', 1)[1].split(')')[0]}")
    return left


def run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str, int]:
    """(exit code, stderr, session id) of ``cmd`` run in a session of its own."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, proc.pid


def env_for(kill_at: str | None = None, mark: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STOPPER), str(REPO)]), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("KILL_AT", None)
    if kill_at is not None:
        env |= {"KILL_AT": kill_at, "KILL_MARK": str(mark)}
    return env


def check_stop_then_again(command: Command, point: Point, sig: str, folder: Path, expected: dict[str, bytes]) -> None:
    mark = folder.parent / f"{folder.name}.mark"
    cmd = command.argv(folder)
    code, err, sid = run(cmd, env_for(f"{point.function}:{point.n}:{sig}", mark))
    assert mark.is_file(), f"the stop point {point.name} was never reached (exit {code}): {err[-2000:]}"
    assert code != 0, f"{command.name} finished although stopped by {sig} at {point.name}"
    if sig == "SIGTERM":  # one line saying what was kept, no traceback
        assert "Traceback" not in err and ("stopped:" in err or "error:" in err), err[-2000:]
    deadline = time.monotonic() + 15
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not session_processes(sid), f"left running after {sig} at {point.name}: {session_processes(sid)}"
    again = command.again(folder, cmd)
    code, err, _ = run(again, env_for())
    assert code == 0, f"run again after {sig} at {point.name}: {' '.join(again)}\n{err[-3000:]}"
    got = command.outputs(folder)
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name] == expected[name], f"{name} differs from the uninterrupted run's after {sig} at {point.name}"


# ---- the commands --------------------------------------------------------------------------------------------
def resume_or_restart(folder: Path, cmd: list[str]) -> list[str]:
    """What a user runs after a stop of training: the stop's own advice, i.e. resume from the last complete
    checkpoint when there is one, else the same command over the folder."""
    from simcse_weince.training.run_folder import latest_complete_checkpoint

    if latest_complete_checkpoint(folder, clean=False) is not None:
        return [*cmd, "--resume_from_checkpoint", "last"]
    return [*cmd, "--overwrite_output_dir", "true"]


def model_outputs(folder: Path) -> dict[str, bytes]:
    """The exported weights and the scores the run reports (not its timings)."""
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    scores = {k: v for k, v in results.items() if k in ("after", "before", "best_metric_during_training")}
    return {
        "model.safetensors": (folder / "model" / "model.safetensors").read_bytes(),
        "scores": json.dumps(scores, sort_keys=True).encode(),
    }


TEXT_POINTS = (
    Point("loading", "simcse_weince.text.model:load_hf_encoder", 1),
    Point("mid-step", f"{TRAINER}.compute_loss", 5),
    Point("during a save", "simcse_weince.training.run_record:save_record", 3),  # checkpoint-6's, mid-way
    Point("during an evaluation", f"{TRAINER}.evaluation_loop", 2),
)


@pytest.fixture(scope="module")
def text_command(tiny_bert_dir: Path, wiki_sample: Path) -> Command:
    return Command(
        "text training",
        lambda out: [sys.executable, "train_unsup.py", *text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS)],
        resume_or_restart,
        model_outputs,
        TEXT_POINTS,
    )


@pytest.fixture(scope="module")
def text_uninterrupted(text_command: Command, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("text") / "whole"
    code, err, _ = run(text_command.argv(out), env_for())
    assert code == 0, err[-3000:]
    return text_command.outputs(out)


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("point", TEXT_POINTS, ids=[p.name for p in TEXT_POINTS])
def test_text_training(text_command, text_uninterrupted, point: Point, sig: str, tmp_path: Path) -> None:
    check_stop_then_again(text_command, point, sig, tmp_path / "run", text_uninterrupted)


assert argv  # re-exported for the commands below
