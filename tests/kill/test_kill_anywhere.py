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
    outputs: Callable[[Path], dict[str, bytes | float]]
    rel: float = 0.0  # the tolerance of float outputs (0: equal)


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


def check_stop_then_again(command: Command, point: Point, sig: str, folder: Path, expected: dict) -> None:
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
    for name, want in expected.items():
        same = got[name] == pytest.approx(want, rel=command.rel) if isinstance(want, float) else got[name] == want
        assert same, f"{name} differs from the uninterrupted run's after {sig} at {point.name}"


# ---- the commands --------------------------------------------------------------------------------------------
def resume_or_restart(folder: Path, cmd: list[str]) -> list[str]:
    """What a user runs after a stop of training: the stop's own advice, as the experiment drivers follow it
    (:func:`weince_lab.experiments.common.continue_argv`: resume from the last complete checkpoint, else start over)."""
    from weince_lab.experiments.common import continue_argv

    return [*cmd, *continue_argv(folder)[0]]


def without_timings(obj):
    """``obj`` (JSON) without its timings: keys ending in ``seconds`` or ``_s``, at any depth."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if not k.endswith(("seconds", "_s", "runtime"))}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def model_outputs(folder: Path) -> dict[str, bytes]:
    """The exported weights and the scores the run reports (not its timings)."""
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    scores = without_timings(
        {k: v for k, v in results.items() if k in ("after", "before", "best_metric_during_training")}
    )
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


def uninterrupted(command: Command, folder: Path) -> dict:
    code, err, _ = run(command.argv(folder), env_for())
    assert code == 0, err[-3000:]
    return command.outputs(folder)


_whole: dict[str, dict] = {}


def whole_run(command: Command, factory: pytest.TempPathFactory) -> dict:
    """The command's uninterrupted outputs, once per test session."""
    if command.name not in _whole:
        _whole[command.name] = uninterrupted(command, factory.mktemp(command.name.replace(" ", "_")) / "whole")
    return _whole[command.name]


# ---- text training, unsupervised ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def text_command(tiny_bert_dir: Path, wiki_sample: Path) -> Command:
    return Command(
        "text training",
        lambda out: [sys.executable, "train_unsup.py", *text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS)],
        resume_or_restart,
        model_outputs,
    )


# ---- text training, supervised with a hard-negative column ------------------------------------------------------
SUP_POINTS = (
    Point("mid-step", f"{TRAINER}.compute_loss", 4),
    Point("during a save", "simcse_weince.training.run_record:save_record", 3),
)


@pytest.fixture(scope="module")
def sup_command(tiny_bert_dir: Path, wiki_sample: Path, tmp_path_factory) -> Command:
    lines = [s.strip().replace('"', "") for s in wiki_sample.read_text(encoding="utf-8").splitlines() if s.strip()]
    rows = tmp_path_factory.mktemp("sup") / "triplets.csv"
    body = "".join(f'"{lines[i]}","{lines[i + 1]}","{lines[i + 2]}"\n' for i in range(0, 3 * 100, 3))
    rows.write_text("sent0,sent1,hard_neg\n" + body, encoding="utf-8")
    flags = STEPS | {"drop_unterminated_last_line": None, "max_train_samples": 100}
    return Command(
        "supervised training",
        lambda out: [sys.executable, "train_unsup.py", *text_run_args(tiny_bert_dir, rows, out, **flags)],
        resume_or_restart,
        model_outputs,
    )


# ---- vision training ---------------------------------------------------------------------------------------------
VISION_POINTS = (
    Point("loading", "simcse_weince.vision.model:SimCLRModel.__init__", 1),
    Point("mid-step", f"{TRAINER}.compute_loss", 4),
    Point("during an evaluation", f"{TRAINER}.evaluation_loop", 1),
)


def vision_outputs(folder: Path) -> dict[str, bytes]:
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return {
        "model.safetensors": (folder / "model" / "model.safetensors").read_bytes(),
        "scores": json.dumps(
            without_timings({k: results.get(k) for k in ("after", "before")}), sort_keys=True
        ).encode(),
    }


@pytest.fixture(scope="module")
def vision_command(tmp_path_factory) -> Command:
    from tests.helpers import write_cifar10_zips

    root = write_cifar10_zips(tmp_path_factory.mktemp("cifar"))
    flags = dict(
        backbone="resnet18_slim", dataset="cifar10_zip", data_dir=root, per_device_train_batch_size=4,
        per_device_eval_batch_size=8, max_steps=6, save_steps=3, eval_steps=3, eval_strategy="steps",
        save_strategy="steps", save_total_limit=2, temperature=0.5, min_tail_points=10, logging_steps=1,
        disable_tqdm=True, dataloader_num_workers=0, report_to="none", seed=3,
    )  # fmt: skip
    return Command(
        "vision training",
        lambda out: [sys.executable, "-m", "simcse_weince.cli.train_vision", *argv(**flags, output_dir=out)],
        resume_or_restart,
        vision_outputs,
    )


# ---- simcse-mine ---------------------------------------------------------------------------------------------------
MINE_POINTS = (
    Point("loading", "simcse_weince.text.mining:read_pairs", 1),
    Point("mid-mining", "simcse_weince.text.mining:pair_scores", 1),
    Point("during writing", "simcse_weince.text.mining_output:plot_scores", 1),
)


@pytest.fixture(scope="module")
def mine_command(tiny_bert_weights_dir: Path, shared_data: Path, tmp_path_factory) -> Command:
    sick = shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt"
    pairs = [line.split("\t")[1:3] for line in sick.read_text(encoding="utf-8").splitlines()[1:80]]
    csv = tmp_path_factory.mktemp("mine") / "pairs.csv"
    csv.write_text("sent0,sent1\n" + "".join(f'"{a}","{b}"\n' for a, b in pairs), encoding="utf-8")

    def cmd(out: Path) -> list[str]:
        out.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-m", "simcse_weince.cli.mine", "--pairs", str(csv), "--model",
                str(tiny_bert_weights_dir), "--pooler", "avg", "--output", str(out / "mined.csv")]  # fmt: skip

    def again(out: Path, argv_: list[str]) -> list[str]:  # what the stop says: the same command (--overwrite if
        return [*argv_, "--overwrite"] if (out / "mined.csv").exists() else argv_  # the triplets were kept)

    return Command("simcse-mine", cmd, again, lambda out: {"mined.csv": (out / "mined.csv").read_bytes()})


# ---- evaluate_sts.py -------------------------------------------------------------------------------------------------
EVAL_POINTS = (
    Point("loading", "simcse_weince.evaluation.runner:load_tasks", 1),
    Point("between tasks", "simcse_weince.evaluation.runner:write_report", 2),
)


def eval_outputs(out: Path) -> dict[str, bytes]:
    report = json.loads((out / "eval_fast.json").read_text(encoding="utf-8"))
    assert report["complete"] and not report["missing_tasks"]
    return {"results": json.dumps(without_timings(report), sort_keys=True).encode()}


@pytest.fixture(scope="module")
def eval_command(tiny_bert_weights_dir: Path) -> Command:
    def cmd(out: Path) -> list[str]:
        return [sys.executable, "evaluate_sts.py", "--model", str(tiny_bert_weights_dir), "--pooler", "avg",
                "--tasks", "STS12,SICKRelatedness,MR", "--mode", "fast", "--output_dir", str(out),
                "--no_progress"]  # fmt: skip

    return Command("evaluate_sts.py", cmd, lambda out, argv_: [*argv_, "--overwrite"], eval_outputs)


# ---- simcse-simulate (a ground-truth sweep, its cells in a pool of 2 workers) -----------------------------------
SIMULATE_POINTS = (Point("between cells", "weince_lab.simulation.cell_store:CellStore.add", 2),)


def sweep_outputs(out: Path) -> dict[str, bytes]:
    cells = [json.loads(line) for line in (out / "negatives.cells.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = sorted(json.dumps({k: v for k, v in c.items() if k != "seconds"}, sort_keys=True) for c in cells)
    return {"cells": "\n".join(kept).encode()}


@pytest.fixture(scope="module")
def simulate_command() -> Command:
    def cmd(out: Path) -> list[str]:
        return [sys.executable, "-m", "weince_lab.simulate", "negatives", "--quick", "--kernels", "endpoint",
                "--ks", "4", "16", "--steps", "60", "--workers", "2", "--out", str(out)]  # fmt: skip

    return Command("simcse-simulate", cmd, lambda out, argv_: argv_, sweep_outputs)


# ---- the MLM pretraining (weince_lab/experiments/pretrain_mlm.py --quick)
# --------------------------------------------------
MLM_POINTS = (
    Point("mid-step", "transformers.trainer:Trainer.training_step", 12),
    Point("during a save", "transformers.trainer:Trainer._save_checkpoint", 1),
)


def mlm_outputs(out: Path) -> dict[str, float]:
    """The steps, the held-out losses (fixed masks) and every weight tensor's norm of the MLM model. Not the
    training-loss curve: a run resumed from a SIGTERM's checkpoint (step 11) starts a new logging window there, so
    its log at step 12 averages one step where the uninterrupted run's averages two."""
    from safetensors.torch import load_file

    r = json.loads((out / "results.json").read_text(encoding="utf-8"))
    weights = load_file(str(out / "mlm" / "model.safetensors"))
    return {"steps": float(r["steps"]), "heldout_loss": float(r["heldout_loss"]),
            **{f"held-out loss at step {s}": float(x) for s, x in r["heldout_curve"]},
            **{f"norm of {k}": float(v.float().norm()) for k, v in weights.items()}}  # fmt: skip


@pytest.fixture(scope="module")
def mlm_command(shared_data: Path, tmp_path_factory) -> Command:
    lines = (shared_data / "wikipedia_en_gensim_sample" / "sentences.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(lines[:1500]) + "\n", encoding="utf-8")

    def cmd(out: Path) -> list[str]:
        return [sys.executable, "-m", "weince_lab.experiments.pretrain_mlm", "--quick", "--corpus", str(corpus),
        "--out",
                str(out), "--no_progress"]  # fmt: skip

    # the same command resumes (its own checkpoints); quick mode's resume equals the uninterrupted run to 1e-5
    return Command("MLM pretraining", cmd, lambda out, argv_: argv_, mlm_outputs, rel=1e-5)


# ---- every command x stop point x signal ---------------------------------------------------------------------------
COMMANDS = {
    "text_command": TEXT_POINTS,
    "sup_command": SUP_POINTS,
    "vision_command": VISION_POINTS,
    "mine_command": MINE_POINTS,
    "eval_command": EVAL_POINTS,
    "simulate_command": SIMULATE_POINTS,
    "mlm_command": MLM_POINTS,
}
CASES = [
    pytest.param(command, point, sig, id=f"{command.removesuffix('_command')}-{point.name}-{sig}")
    for command, points in COMMANDS.items()
    for point in points
    for sig in ("SIGKILL", "SIGTERM")
]


@pytest.mark.parametrize(("command", "point", "sig"), CASES)
def test_stopped_then_run_again(
    command: str, point: Point, sig: str, request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory
) -> None:
    cmd = request.getfixturevalue(command)
    check_stop_then_again(cmd, point, sig, tmp_path / "run", whole_run(cmd, tmp_path_factory))


# ---- an experiment driver (weince_lab/experiments/text_runs.py), killed with -9 while its run trains
# ------------------------
def driver_argv(tiny_bert_dir: Path, wiki_sample: Path, folder: Path) -> list[str]:
    long = STEPS | {"max_steps": 60, "eval_steps": 10, "save_steps": 10}  # still training when the driver dies
    flags = text_run_args(tiny_bert_dir, wiki_sample, folder / "unused", **long)
    flags = flags[: flags.index("--output_dir")] + flags[flags.index("--output_dir") + 2 :]
    return [sys.executable, "-m", "weince_lab.experiments.text_runs", "--config", "configs/quickstart.yaml",
    "--variants",
            "infonce", "--seeds", "0", "--eval_tasks", "STS12", "--eval_mode", "fast", "--runs_dir",
            str(folder / "runs"), "--out", str(folder / "summary"), "--extra", *flags]  # fmt: skip


def driver_outputs(folder: Path) -> dict[str, bytes]:
    return model_outputs(folder / "runs" / "infonce-seed0")


def test_an_experiment_driver_killed_mid_run_leaves_nothing_running_and_resumes(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """The driver killed with -9 once its run has a checkpoint: the run (a process of the driver's run server)
    gets SIGTERM, saves and stops, the server exits; the same driver command resumes the run to the uninterrupted
    run's weights and scores. The drivers start runs through ``weince_lab/experiments/common.py`` (run server,
    ``run_child``)
    or the simulation's worker pool only, so this holds for each of them (``tests/lab/experiments/test_common.py``)."""
    whole = tmp_path / "whole"
    code, err, _ = run(driver_argv(tiny_bert_dir, wiki_sample, whole), env_for())
    assert code == 0, err[-3000:]
    folder = tmp_path / "killed"
    proc = subprocess.Popen(driver_argv(tiny_bert_dir, wiki_sample, folder), cwd=REPO, env=env_for(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        first = folder / "runs" / "infonce-seed0" / "checkpoint-10" / "trainer_state.json"
        deadline = time.monotonic() + 240
        while not first.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first.is_file() and proc.poll() is None, "the run never saved its first checkpoint"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 60
        while session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not session_processes(proc.pid), f"left running: {session_processes(proc.pid)}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if session_processes(proc.pid) else None
    assert not (folder / "runs" / "infonce-seed0" / "results.json").exists()  # stopped before its end
    log = (folder / "runs" / "infonce-seed0.train.log").read_text(encoding="utf-8")
    assert "stopped: SIGTERM at step" in log, log[-2000:]  # told to stop: it saved a checkpoint and said so
    code, err, _ = run(driver_argv(tiny_bert_dir, wiki_sample, folder), env_for())
    assert code == 0, err[-3000:]
    assert driver_outputs(folder) == driver_outputs(whole)
