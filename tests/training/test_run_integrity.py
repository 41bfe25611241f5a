"""Runs never mix or vanish: one run per folder, resume only what belongs to the run, clean stops on signals.

One uninterrupted 6-step text run (module fixture) is the reference the interrupted and resumed runs must equal
bit for bit; the other cases refuse before anything loads.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from simcse_weince.cli.train_text import main, run
from simcse_weince.training import run_folder
from simcse_weince.training.config import ConfigError
from simcse_weince.training.run import batch_used
from tests.helpers import Interrupt, text_run_args

# 160 sentences in batches of 16: 10 steps an epoch, so step 6 is mid-epoch (where resuming at the end trained a
# 7th step)
STEPS = dict(
    max_steps=6, eval_steps=3, save_steps=3, save_total_limit=4, lr_scheduler_type="constant", max_train_samples=160
)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def assert_bitwise(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def one_stderr_line(capsys: pytest.CaptureFixture) -> str:
    """The one message line on stderr. Progress bars (redrawn with ``\r``: the token cache's build, when this test
    is the first of its worker to tokenise) are not messages."""
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line and "\r" not in line]
    assert len(lines) == 1 and err.endswith("\n"), err
    return lines[0] + "\n"


@pytest.fixture(scope="module")
def reference(tiny_bert_dir: Path, wiki_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run: 6 steps, checkpoints 3 and 6, exported model."""
    out = tmp_path_factory.mktemp("reference")
    assert run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS))["steps"] == 6
    return out


class SendAt(TrainerCallback):
    """At the start of step ``step``, deliver ``signum`` to this process (as a scheduler or Ctrl-C would)."""

    def __init__(self, step: int, signum: int) -> None:
        self.step, self.signum = step, signum

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            os.kill(os.getpid(), self.signum)


class FailAtTrainEnd(TrainerCallback):
    """Dies after the last checkpoint was saved, before export and scoring (a kill during export)."""

    def on_train_end(self, args, state, control, **kwargs):
        raise Interrupt("killed during export")


# ---- one run per folder ---------------------------------------------------------------------------------
HOLD = """
import sys, time
from simcse_weince.training import run_folder
run_folder.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_a_second_run_into_a_held_folder_is_refused_naming_the_holder(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(text_run_args(tiny_bert_dir, wiki_sample, out)) == 2
        err = one_stderr_line(capsys)
        assert f"is in use by another run (pid {holder.pid} on " in err and "started" in err
        assert not (out / "run_config.yaml").exists()  # nothing of the refused run was written
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: its lock is free again, and the next run says whose it was
    holder_pid = json.loads((out / run_folder.HOLDER).read_text())["pid"]
    assert holder_pid == holder.pid
    run_folder.acquire(out)
    run_folder.release(out)
    assert not (out / run_folder.HOLDER).exists()


def test_a_stale_holder_is_reported_not_silently_taken(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / run_folder.HOLDER).write_text(json.dumps({"pid": 999999, "host": "elsewhere", "started": 0}))
    run_folder.acquire(tmp_path)
    try:
        assert "ended without releasing it (pid 999999 on elsewhere" in caplog.text
        assert json.loads((tmp_path / run_folder.HOLDER).read_text())["pid"] == os.getpid()
    finally:
        run_folder.release(tmp_path)


def test_an_output_dir_that_cannot_be_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"output_dir .*file is a file; expected a folder"):
        run_folder.acquire(tmp_path / "file")
    with pytest.raises(ConfigError, match=r"output_dir .*sub cannot be written"):
        run_folder.acquire(tmp_path / "file" / "sub")


# ---- resume only what belongs to the run ------------------------------------------------------------------
@pytest.mark.slow
def test_resume_at_the_last_step_trains_nothing_and_exports_the_same_model(
    reference: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with pytest.raises(Interrupt):
        run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS), callbacks=[FailAtTrainEnd()])
    assert (out / "checkpoint-6").is_dir() and not (out / "model").exists()
    (out / "checkpoint-7").mkdir()  # a save that a kill interrupted: set aside, then removed once resumed
    (out / "checkpoint-7" / "model.safetensors").write_bytes(b"partial")
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last"))
    assert (resumed["steps"], resumed["steps_this_session"]) == (6, 0)
    assert not list(out.glob("checkpoint-7*"))  # no step 7, and the incomplete folder is gone
    assert_bitwise(weights(reference / "model"), weights(out / "model"))
    assert resumed["after"] == json.loads((reference / "results.json").read_text())["after"]


@pytest.mark.slow
def test_a_checkpoint_of_another_run_is_refused_before_anything_loads(
    reference: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference / "checkpoint-3", out / "checkpoint-3")
    other = dict(STEPS, seed=4, per_device_train_batch_size=32, resume_from_checkpoint="last")
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **other)) == 2
    err = one_stderr_line(capsys)
    assert "belongs to a run with other settings" in err
    assert "per_device_train_batch_size: 16 in the checkpoint, 32 now" in err and "seed: 3 in the checkpoint" in err
    assert "--resume_allow_changes per_device_train_batch_size,seed" in err and "Traceback" not in err
    # a foreign checkpoint (no run record: another program's, or another model's without one) is refused too
    (out / "checkpoint-3" / "run_record.json").unlink()
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last")) == 2
    assert "holds no run_record.json" in one_stderr_line(capsys)
    assert not (out / "model").exists()


@pytest.mark.slow
def test_training_longer_is_an_accepted_change(
    reference: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference / "checkpoint-6", out / "checkpoint-6")
    longer = dict(STEPS, max_steps=7, resume_from_checkpoint="last", resume_allow_changes="max_steps")
    assert run(text_run_args(tiny_bert_dir, wiki_sample, out, **longer))["steps"] == 7


@pytest.mark.slow
def test_overwrite_starts_a_clean_run(reference: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    with pytest.raises(ConfigError, match="starts a clean run"):
        run(text_run_args(tiny_bert_dir, wiki_sample, out, overwrite_output_dir=True, resume_from_checkpoint="last"))
    results = run(text_run_args(tiny_bert_dir, wiki_sample, out, max_steps=2, overwrite_output_dir=True))
    assert results["steps"] == 2
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]  # the old run's 3 and 6 are gone


# ---- clean stops --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_the_resumed_run_is_bitwise_the_same(
    reference: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS), callbacks=[SendAt(2, signal.SIGTERM)]) == 130
    err = one_stderr_line(capsys)
    assert err.startswith("stopped: SIGTERM at step 2; the last complete checkpoint is") and "checkpoint-2" in err
    assert "--resume_from_checkpoint last" in err and not (out / "model").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the run's only
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last"))
    assert resumed["steps"] == 6
    assert_bitwise(weights(reference / "checkpoint-6"), weights(out / "checkpoint-6"))


@pytest.mark.slow
@pytest.mark.parametrize(("step", "kept"), [(1, "no checkpoint was saved yet"), (5, "checkpoint-3")])
def test_ctrl_c_ends_in_one_line_saying_what_was_kept(
    step: int,
    kept: str,
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    out = tmp_path / "run"
    # A suite started in the background of a shell without job control inherits SIGINT ignored, and Python then keeps
    # it so: Ctrl-C is what a terminal delivers to a process with Python's own handler, which this test installs.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS), callbacks=[SendAt(step, signal.SIGINT)])
    finally:
        signal.signal(signal.SIGINT, previous)
    err = one_stderr_line(capsys)
    assert code == 130 and err.startswith(f"stopped: interrupted (Ctrl-C) at step {step - 1}; ") and kept in err
    assert ("--resume_from_checkpoint last" in err) == (step > 3)  # advice only when there is a checkpoint


def test_the_card_reports_the_batch_actually_used() -> None:
    assert batch_used(100_000, 300, 1) == 300
    assert batch_used(16, 300, 1) == 16
    assert batch_used(256, 300, 2) == 150


def test_overwrite_never_deletes_the_checkpoint_to_resume(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "run" / "checkpoint-3"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text("{}")
    with pytest.raises(ConfigError, match="starts a clean run"):
        run(text_run_args(tiny_bert_dir, wiki_sample, tmp_path / "run", overwrite_output_dir=True,
                          resume_from_checkpoint=ckpt))  # fmt: skip
    assert (ckpt / "trainer_state.json").is_file()


def test_a_sigterm_on_another_process_stops_this_one_as_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several processes: the signal reached another rank (the flag is all-reduced); this rank must also end as
    stopped, not export a half-trained model as final."""
    from transformers import TrainerControl

    from simcse_weince.training.signals import SaveAndStopOnSigterm

    callback = SaveAndStopOnSigterm()
    monkeypatch.setattr(callback, "any_process_received", lambda device: True)  # another rank's signal
    args = type("Args", (), {"device": "cpu", "save_total_limit": 1})()
    control = callback.on_step_end(args, None, TrainerControl())
    assert callback.received is None and callback.stopped
    assert control.should_save and control.should_training_stop


@pytest.mark.slow
def test_after_a_kill_in_the_first_save_the_same_command_starts_again(
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kill in the middle of the first checkpoint's save leaves only an incomplete checkpoint. ``last`` said there
    was none and a plain re-run said to resume with ``last``: only --overwrite_output_dir got out. Now ``last`` says
    to run the same command without it, and that run starts from the beginning, the incomplete folder set aside."""
    import simcse_weince.training.trainer as trainer_module

    real = trainer_module.save_record

    def killed(folder, record, with_digests=False):
        if with_digests:  # the save's last write: a kill just before it
            raise Interrupt("killed during the save")
        real(folder, record, with_digests)

    monkeypatch.setattr(trainer_module, "save_record", killed)
    out, short = tmp_path / "run", dict(STEPS, max_steps=2, save_steps=1, eval_steps=1)
    with pytest.raises(Interrupt):
        run(text_run_args(tiny_bert_dir, wiki_sample, out, **short))
    monkeypatch.setattr(trainer_module, "save_record", real)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    capsys.readouterr()
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **short, resume_from_checkpoint="last")) == 2
    assert one_stderr_line(capsys) == (
        f"error: --resume_from_checkpoint last: no complete checkpoint-N folder in {out} (only "
        "checkpoint-1-incomplete: saves that a stop cut short), so there is nothing to resume; start the run from the "
        "beginning with the same command without --resume_from_checkpoint\n"
    )
    results = run(text_run_args(tiny_bert_dir, wiki_sample, out, **short))
    assert results["steps"] == 2 and results["steps_this_session"] == 2
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]  # none incomplete
