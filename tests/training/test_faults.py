"""The fault catalogue: signals at each phase, a file-size limit and a full disk during saves, damaged checkpoints,
models and token caches, training files edited in place. Each case asserts its one-line outcome (``stopped:`` or
``error:``, no traceback) and that nothing was lost: the last complete checkpoint is there and a resume finishes.

One uninterrupted 6-step tiny run (module fixture, checkpoints 3 and 6 and the export) is copied for the cases
that damage what a run left; the others run the same settings with ``save_total_limit: 1`` (the quickstarts').
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
from pathlib import Path

import pytest
from transformers import TrainerCallback

import simcse_weince.cli.train_text as train_text
from simcse_weince.cli.evaluate import main as evaluate_main
from simcse_weince.cli.train_text import main, run
from simcse_weince.training.run_folder import HOLDER
from tests.helpers import text_run_args

pytestmark = pytest.mark.slow

STEPS = dict(
    max_steps=6, eval_steps=3, save_steps=3, save_total_limit=1, lr_scheduler_type="constant", max_train_samples=160
)


def message(capsys: pytest.CaptureFixture) -> str:
    """The one ``error:`` / ``stopped:`` message on stderr, and no traceback (progress bars, redrawn with ``\\r``,
    may share its line: the message starts where the bar ends)."""
    err = capsys.readouterr().err
    found = [m.group(0) for m in re.finditer(r"(?:error|stopped): [^\n]*", err)]
    assert len(found) == 1 and "Traceback" not in err, err
    return found[0]


def checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("checkpoint-*"))


@pytest.fixture(scope="module")
def finished(tiny_bert_dir: Path, wiki_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run (save_total_limit 4: checkpoints 3 and 6 both kept) and its export."""
    out = tmp_path_factory.mktemp("finished")
    assert run(text_run_args(tiny_bert_dir, wiki_sample, out, **(STEPS | {"save_total_limit": 4})))["steps"] == 6
    return out


def copy_of(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


class SendAt(TrainerCallback):
    """At the start of step ``step``, deliver SIGTERM to this process (as a scheduler would)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


# ---- a signal never costs more than the steps since the signal -------------------------------------------------
def test_the_sigterm_checkpoint_survives_save_total_limit_1(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The quickstarts' setting: the best checkpoint (3) and the one saved for the signal (5) are both kept (the
    Trainer's end-of-training clean-up used to delete 5). Fails if the stop leaves save_total_limit in force."""
    out = tmp_path / "run"
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS), callbacks=[SendAt(5)]) == 130
    line = message(capsys)
    assert line.startswith("stopped: SIGTERM at step 5; the last complete checkpoint is") and "checkpoint-5" in line
    assert "checkpoint-5" in checkpoints(out) and not (out / HOLDER).exists()
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last"))
    assert resumed["steps"] == 6 and resumed["steps_this_session"] == 1


@pytest.mark.parametrize("phase", ["preparing", "exporting"])
def test_a_sigterm_outside_the_training_loop_ends_in_one_stopped_line(
    phase: str,
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM while the corpus is read, or while the model is exported: one ``stopped:`` line saying what was kept,
    the lock released, no half-written ``model/``; after the export's stop, a resume finishes it."""
    target = {"preparing": "prepare_corpus", "exporting": "export_sentence_transformer"}[phase]
    real = getattr(train_text, target)

    def signalled(*args, **kwargs):
        result = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(train_text, target, signalled)
    out = tmp_path / "run"
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS)) == 130
    line = message(capsys)
    assert not (out / HOLDER).exists() and not (out / "model").exists() and not (out / "model.partial").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if phase == "preparing":
        assert (
            line
            == "stopped: SIGTERM while preparing the run; no checkpoint was saved yet, so there is nothing to resume"
        )
        return
    assert line.startswith(f"stopped: SIGTERM while exporting the model to {out / 'model'} (training had finished); ")
    assert "--resume_from_checkpoint last" in line
    monkeypatch.setattr(train_text, target, real)
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last"))
    assert resumed["steps_this_session"] == 0 and (out / "model" / "model.safetensors").is_file()


# ---- every file is named when it fails ---------------------------------------------------------------------------
class LimitFileSizeAt(TrainerCallback):
    """From step ``step`` on, this process may write no file larger than ``limit`` bytes (``ulimit -f``)."""

    def __init__(self, step: int, limit: int) -> None:
        self.step, self.limit = step, limit
        self.saved = resource.getrlimit(resource.RLIMIT_FSIZE)

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit, self.saved[1]))

    def restore(self) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, self.saved)


def test_a_file_size_limit_during_a_save_is_one_error_naming_the_checkpoint(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Checkpoint 3 is saved; a limit below the weights' size makes checkpoint 6's save fail: one ``error:`` line
    naming checkpoint-6, the cause and checkpoint-3; a resume (no limit) finishes the run."""
    out = tmp_path / "run"
    limit = LimitFileSizeAt(4, 64 << 10)
    try:
        code = main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS), callbacks=[limit])
    finally:
        limit.restore()
    line = message(capsys)
    assert code == 2 and line.startswith(f"error: could not write the checkpoint {out / 'checkpoint-6'}: ")
    assert "file-size limit of this process (ulimit -f: 64 KB)" in line and f"{out / 'checkpoint-3'}" in line
    assert checkpoints(out) == ["checkpoint-3"]  # the half-written checkpoint-6 removed, its space with it
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last"))
    assert resumed["steps"] == 6 and resumed["steps_this_session"] == 3


def test_a_full_disk_while_writing_the_results_names_the_file(
    finished: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``results.json`` on a full disk (``/dev/full``): one error naming it and the free space; the model is kept."""
    out = copy_of(finished, tmp_path)
    (out / "results.json").unlink()
    (out / "results.json").symlink_to("/dev/full")
    argv = text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last")
    assert main(argv) == 2
    line = message(capsys)
    assert line.startswith(f"error: could not write the results {out / 'results.json'}: the disk holding ")
    assert " is full: " in line and f"the model is complete in {out / 'model'}" in line


# ---- a checkpoint knows its contents -------------------------------------------------------------------------------
def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_checkpoint_is_refused_by_name_and_the_previous_one_offered(
    damage: str,
    finished: Path,
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    """A byte flipped in the middle of the weights (which loading alone would not notice), or the optimizer state cut
    short: refused in one line naming the file; the offered previous checkpoint resumes and finishes the run.
    Fails if the resume does not check the digests."""
    out = copy_of(finished, tmp_path)
    if damage == "flipped":
        flip_a_byte(out / "checkpoint-6" / "model.safetensors")
        why = "model.safetensors: its content differs from when it was saved"
    else:
        opt = out / "checkpoint-6" / "optimizer.pt"
        size = opt.stat().st_size
        opt.write_bytes(opt.read_bytes()[: size // 2])
        why = f"optimizer.pt is {size // 2} bytes, {size} when it was saved (truncated)"
    argv = text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint="last")
    assert main(argv) == 2
    previous = out / "checkpoint-3"
    assert message(capsys) == (
        f"error: checkpoint {out / 'checkpoint-6'} is damaged ({why}); resume from the previous complete checkpoint "
        f"instead: --resume_from_checkpoint {previous}"
    )
    resumed = run(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint=previous))
    assert resumed["steps"] == 6 and resumed["steps_this_session"] == 3


def test_a_damaged_checkpoint_without_digests_fails_in_one_line_naming_it(
    finished: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A checkpoint of an earlier version (no digests) whose optimizer state is cut short: the Trainer's load fails,
    in one line naming the checkpoint, not a traceback."""
    out = copy_of(finished, tmp_path)
    ckpt = out / "checkpoint-3"
    record = json.loads((ckpt / "run_record.json").read_text())
    del record["files"]
    (ckpt / "run_record.json").write_text(json.dumps(record))
    opt = ckpt / "optimizer.pt"
    opt.write_bytes(opt.read_bytes()[:100])
    argv = text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint=ckpt)
    assert main(argv) == 2
    line = message(capsys)
    assert line.startswith(f"error: could not read the optimizer state in {ckpt} (") and "is damaged" in line


@pytest.mark.parametrize("digests", [True, False])
def test_a_damaged_model_is_refused_by_the_evaluation(
    digests: bool, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A truncated ``model.safetensors`` in the exported folder: with its digests, refused naming the file before
    loading; without them (an earlier export), the load fails in one line naming the folder."""
    model = tmp_path / "model"
    shutil.copytree(finished / "model", model)
    weights = model / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[: size - 1000])
    if not digests:
        (model / "run_record.json").unlink()
    code = evaluate_main(["--model", str(model), "--tasks", "STSBenchmark", "--output_dir", str(tmp_path / "ev")])
    line = message(capsys)
    assert code == 2
    if digests:
        assert line.startswith(
            f"error: model {model} is damaged (model.safetensors is {size - 1000} bytes, {size} when it was saved "
            "(truncated)); expected a complete model folder"
        )
    else:
        assert line.startswith(f"error: could not read the model {model} (") and "complete model folder" in line


# ---- a run knows its inputs by content ------------------------------------------------------------------------------
def test_a_training_file_edited_in_place_is_refused_on_resume(
    finished: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The same file under another folder resumes (the same run); one byte changed, same size, is refused by name."""
    out = copy_of(finished, tmp_path)
    (tmp_path / "moved").mkdir()
    moved = tmp_path / "moved" / wiki_sample.name
    shutil.copy(wiki_sample, moved)
    argv = text_run_args(tiny_bert_dir, moved, out, **STEPS, resume_from_checkpoint="last")
    assert run(argv)["steps_this_session"] == 0
    text = bytearray(moved.read_bytes())
    at = text.index(b"e", len(text) // 2)
    text[at : at + 1] = b"a"
    moved.write_bytes(bytes(text))
    assert main(argv) == 2
    line = message(capsys)
    assert "belongs to a run with other settings (train_files:" in line and wiki_sample.name in line


def test_a_file_size_limit_while_writing_the_evaluation_report_names_it(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The evaluation's report under a 512-byte file-size limit: one error naming the file, before any task runs."""
    out = tmp_path / "ev"
    saved = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, saved[1]))
    try:
        code = evaluate_main(["--model", str(finished / "model"), "--tasks", "STSBenchmark", "--output_dir", str(out)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, saved)
    line = message(capsys)
    assert code == 2 and line.startswith(f"error: could not write the evaluation report {out / 'eval_test.json'}: ")
    assert "the file-size limit of this process (ulimit -f: 512 bytes)" in line


# ---- one handler of SIGTERM --------------------------------------------------------------------------------------
def test_jit_checkpointing_is_refused_before_anything_loads(
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers' ``enable_jit_checkpoint`` would replace the run's SIGTERM handler (a stop then exported the model
    as finished, exit 0): refused in one line naming the flag and the run's own stop, before any file is read."""

    def loaded(*args, **kwargs):
        raise AssertionError("a model or data set was loaded before the setting was refused")

    for name in ("load_hf_encoder", "prepare_corpus", "stsb_task"):
        monkeypatch.setattr(train_text, name, loaded)
    out = tmp_path / "run"
    assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, enable_jit_checkpoint=True)) == 2
    line = message(capsys)
    assert "--enable_jit_checkpoint" in line and "enable_jit_checkpoint is not supported" in line
    assert "saves a checkpoint at the next step on SIGTERM and ends in a stopped: line" in line
    assert not out.exists() or not any(out.iterdir())  # nothing of the refused run was written


# ---- what a run writes, others may read ---------------------------------------------------------------------------
def test_saved_files_have_the_mode_open_gives_them(finished: Path) -> None:
    """Every file of a checkpoint and of the exported model is ``0o666 & ~umask``, as ``open()`` makes it: the weights
    were written 0600 (a temporary file renamed), unreadable to another user of a shared machine."""
    from simcse_weince.core.file_modes import current_umask

    usual = 0o666 & ~current_umask()
    if usual & 0o066 == 0:  # umask 077 (or stricter): the usual mode is the bug's 0600, nothing to tell apart
        pytest.skip(f"umask {oct(current_umask())} gives every file 0600; tests/test_file_modes.py covers the rule")
    for folder in (finished / "checkpoint-6", finished / "model"):
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in folder.rglob("*") if p.is_file()}
        assert "model.safetensors" in modes and set(modes.values()) == {oct(usual)}, modes


# ---- a validation that cannot choose ------------------------------------------------------------------------------
def test_a_validation_file_with_one_score_is_refused_before_training(
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pair scored 3: Spearman is NaN at every evaluation and the last checkpoint was kept as "best", with
    NaN and -Infinity in results.json. Refused in one line naming the file, before the corpus or the model loads."""
    sts = tmp_path / "dev.tsv"
    rows = [f"a cat sat on mat {i}\ta dog lay on rug {i}\t3" for i in range(8)]
    sts.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")

    def loaded(*args, **kwargs):
        raise AssertionError("the corpus or the model was loaded before the validation file was refused")

    for name in ("load_hf_encoder", "prepare_corpus"):
        monkeypatch.setattr(train_text, name, loaded)
    out = tmp_path / "run"
    argv = text_run_args(
        tiny_bert_dir, wiki_sample, out, **STEPS, validation=f"sts:{sts}", metric_for_best_model="sts_spearman"
    )
    assert main(argv) == 2
    assert message(capsys) == (
        f"error: validation sts:{sts}: all 8 scored pairs have the score 3, so their correlation with the model's "
        "similarities is undefined (NaN) and no best checkpoint can be chosen; use an STS file whose scores vary (or, "
        "with eval_max_pairs, whose first pairs do), or validation: stsb"
    )
    assert not (out / "results.json").exists() and not (out / HOLDER).exists()


def test_a_validation_metric_that_turns_nan_at_run_time_stops_the_run_naming_it(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Gold scores that vary, but every row holds the same two sentences: the model's similarity is one constant,
    Spearman is NaN at every evaluation. It was trained through (exit 0, no best checkpoint, the last weights
    exported, best_metric -Infinity); now the first evaluation stops the run in one line, nothing exported."""
    sts = tmp_path / "dev.tsv"
    rows = [f"a cat sat on the mat\ta dog lay on the rug\t{i % 5}" for i in range(8)]
    sts.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    out = tmp_path / "run"
    argv = text_run_args(
        tiny_bert_dir, wiki_sample, out, **STEPS, validation=f"sts:{sts}", metric_for_best_model="sts_spearman"
    )
    assert main(argv) == 2
    text = message(capsys)
    assert text.startswith("error: the validation metric sts_spearman is nan at step 3, so the run cannot pick"), text
    assert text.endswith("no good checkpoint was saved before it, so start again with --overwrite_output_dir true "
                         "once fixed")  # fmt: skip
    assert not (out / "model").exists() and not (out / "results.json").exists() and not (out / HOLDER).exists()


def test_a_damaged_key_of_the_run_record_is_refused_by_name(
    finished: Path, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``files`` renamed ``filez`` in checkpoint-6's record (an IndexError traceback on resume): one line naming the
    file and the key, offering the previous intact checkpoint, for ``last`` and for the folder named."""
    out = copy_of(finished, tmp_path)
    record_file = out / "checkpoint-6" / "run_record.json"
    record = json.loads(record_file.read_text())
    record["filez"] = record.pop("files")
    record_file.write_text(json.dumps(record))
    expected = (
        f"error: checkpoint {out / 'checkpoint-6'} is damaged (run_record.json: key 'filez' is neither a setting "
        f"(group.name) nor 'files'); resume from the previous complete checkpoint instead: --resume_from_checkpoint "
        f"{out / 'checkpoint-3'}"
    )
    for resume in ("last", out / "checkpoint-6"):
        assert main(text_run_args(tiny_bert_dir, wiki_sample, out, **STEPS, resume_from_checkpoint=resume)) == 2
        assert message(capsys) == expected
    assert checkpoints(out) == ["checkpoint-3", "checkpoint-6"]  # nothing moved aside or deleted
