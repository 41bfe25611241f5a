"""Several machines, tested as several machines on one host: each an ``accelerate launch --num_machines 2
--machine_rank R`` of its own, meeting at 127.0.0.1 (gloo). A run on two machines equals one machine with the same
global batch; a folder that is not one folder for the run, or machines started with other settings, are refused in
one line before training; a machine killed mid-run stops the other at once, in one line, keeping the checkpoints."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from simcse_weince.cli.train_text import run
from simcse_weince.training import machines
from tests.helpers import REPO, argv, start_machines, wait_machines, without_dropout

SCRIPT = str(REPO / "train_unsup.py")


@pytest.fixture(scope="module")
def tiny(tiny_bert_dir: Path) -> Path:
    """The tiny BERT without dropout: one step's weights are then a function of the global batch only."""
    return without_dropout(tiny_bert_dir)


def step_args(tiny: Path, wiki: Path, out: Path | str, batch: int, **flags: object) -> list[str]:
    """One plain SGD step (lr 1, no clipping) on exactly the 32 sentences of that step: the global batch is the same
    set however it is split over processes."""
    base = dict(
        model_name_or_path=tiny, init_from_config=True, pooler="avg", train_files=wiki,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=32, max_seq_length=16,
        per_device_train_batch_size=batch, max_steps=1, optim="sgd", learning_rate="1.0", lr_scheduler_type="constant",
        max_grad_norm=0, weight_decay=0, eval_strategy="no", save_strategy="no", load_best_model_at_end=False,
        eval_test_at_end=False, output_dir=out, disable_tqdm=True, seed=3, min_tail_points=10, logging_steps=1,
    )  # fmt: skip
    return argv(**(base | flags))


def log(folder: Path, machine: int) -> str:
    return (folder / f"machine-{machine}.log").read_text(encoding="utf-8")


def our_lines(text: str, start: str) -> list[str]:
    """The ``error:`` / ``stopped:`` lines our command printed (the launcher's own report follows them)."""
    return [line for line in text.splitlines() if line.startswith(start)]


def assert_same_step(folder: Path, single: dict, two: dict) -> None:
    """The run in ``folder/two`` trained what the one in ``folder/one`` did: its loss, and every weight to DDP's
    rounding (the attention key biases get a zero gradient in exact arithmetic: rounding noise only)."""
    assert two["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    w1, w2 = (load_file(folder / d / "model" / "model.safetensors") for d in ("one", "two"))
    for key in (k for k in w1 if not k.endswith("attention.self.key.bias")):
        torch.testing.assert_close(w2[key], w1[key], rtol=1e-4, atol=1e-4 * float(w1[key].abs().max()), msg=key)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("loss", ["weince", "learned_link"])
def test_two_machines_equal_one_machine(tiny: Path, wiki_sample: Path, tmp_path: Path, loss: str) -> None:
    """2 machines × 1 process (batch 16 each, negatives gathered across machines) = 1 process with batch 32: the
    loss, every weight, the loss's own parameters (the learned link's a and b); one model folder, one results.json."""
    flags = {"loss": loss, "loss_learning_rate": "0.5"} if loss == "learned_link" else {"loss": loss}
    single = run(step_args(tiny, wiki_sample, tmp_path / "one", 32, **flags))
    codes = wait_machines(start_machines([SCRIPT, *step_args(tiny, wiki_sample, tmp_path / "two", 16, **flags)],
                                         logs=tmp_path))  # fmt: skip
    assert codes == [0, 0], log(tmp_path, 0)[-3000:] + log(tmp_path, 1)[-3000:]
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert (single["world_size"], two["world_size"], two["steps"]) == (1, 2, 1)
    assert two["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    w1, w2 = (load_file(tmp_path / run_dir / "model" / "model.safetensors") for run_dir in ("one", "two"))
    assert set(w1) == set(w2)
    for key in w1:
        torch.testing.assert_close(w2[key], w1[key], rtol=1e-4, atol=1e-6)
    if loss == "learned_link":
        s1, s2 = (torch.load(tmp_path / d / "model" / "loss_state.pt") for d in ("one", "two"))
        assert s1.keys() == s2.keys() and s1
        for key in s1:
            torch.testing.assert_close(s2[key], s1[key], rtol=1e-5, atol=1e-6)
        assert two["link_a_final"] == pytest.approx(single["link_a_final"], rel=1e-5)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_folder_each_machine_sees_alone_is_refused(tiny: Path, wiki_sample: Path, tmp_path: Path) -> None:
    """Each machine in its own working directory with a relative --output_dir (node-local disks): refused on both
    machines in one line naming the machine that does not see the folder, before anything trains."""
    cwd = [tmp_path / "machine0", tmp_path / "machine1"]
    for folder in cwd:
        folder.mkdir()
    started = start_machines([SCRIPT, *step_args(tiny, wiki_sample, "out", 16)], cwd=cwd, logs=tmp_path)
    assert wait_machines(started) != [0, 0]
    for machine in (0, 1):
        (line,) = our_lines(log(tmp_path, machine), "error:")
        assert line.startswith(
            "error: output_dir out is not one folder for the whole run: machine 1 (rank 1) does not see what "
            f"machine 0 writes there ({cwd[0] / 'out'};"
        ) and line.endswith("pass an --output_dir on a filesystem every machine sees")
    assert not (cwd[1] / "out").exists() and [p.name for p in (cwd[0] / "out").iterdir()] in ([], [".run.lock"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_machines_started_with_other_settings_are_refused(tiny: Path, wiki_sample: Path, tmp_path: Path) -> None:
    base = step_args(tiny, wiki_sample, tmp_path / "out", 16)
    other = step_args(tiny, wiki_sample, tmp_path / "out", 16, learning_rate="0.5", temperature="0.1")
    started = start_machines([[SCRIPT, *base], [SCRIPT, *other]], logs=tmp_path)
    assert wait_machines(started) != [0, 0]
    for machine in (0, 1):
        assert our_lines(log(tmp_path, machine), "error:") == [
            "error: machine 1 (rank 1) started with other settings than machine 0: loss.temperature, "
            "training.learning_rate; start every machine with the same command and config"
        ]
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.bench
@pytest.mark.timeout(300)
def test_machines_running_other_code_are_refused(tiny: Path, wiki_sample: Path, tmp_path: Path) -> None:
    """Machine 1 runs a copy of the package one comment apart (an older install, an edited checkout): refused in one
    line on every machine, before training."""
    other = tmp_path / "other_code"
    shutil.copytree(REPO / "simcse_weince", other / "simcse_weince", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SCRIPT, other / "train_unsup.py")
    with (other / "simcse_weince" / "losses" / "weince.py").open("a", encoding="utf-8") as f:
        f.write("# edited on this machine only\n")
    args = step_args(tiny, wiki_sample, tmp_path / "out", 16)
    started = start_machines([[SCRIPT, *args], [str(other / "train_unsup.py"), *args]], logs=tmp_path)
    assert wait_machines(started) != [0, 0]
    for machine in (0, 1):
        assert our_lines(log(tmp_path, machine), "error:") == [
            "error: machine 1 (rank 1) runs other code than machine 0 (the simcse_weince package's source differs); "
            "install the same version on every machine"
        ]
    assert not (tmp_path / "out" / "results.json").exists()


def test_save_on_each_node_across_machines_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert machines.machines(2) == 2
    with pytest.raises(
        ValueError, match=r"save_on_each_node is not supported across machines: .* --save_on_each_node false"
    ):
        machines.check_shared_folder(tmp_path, 0, 2, save_on_each_node=True)
    machines.check_shared_folder(tmp_path, 0, 1, save_on_each_node=True)  # one process: nothing to check


def test_a_lost_peer_is_named() -> None:
    """Which processes a failed collective may have lost: the other machines' (ranks numbered machine by machine)."""
    err = RuntimeError(
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:22943"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCAL_WORLD_SIZE", "2")
        stop = machines.lost_contact(err, 7, 1, 6, "the last complete checkpoint is X")
        assert str(stop).startswith(
            "lost contact with the run's other processes at step 7: machines 1, 2 (ranks 2, 3, 4, 5) stopped, were "
            "killed or lost the network (RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561]"
        )
        assert str(stop).endswith("; the last complete checkpoint is X")
        mp.setenv("LOCAL_WORLD_SIZE", "3")
        assert "machine 0 (ranks 0, 1, 2) stopped, was killed" in str(machines.lost_contact(err, 7, 4, 6, "k"))
        assert machines.lost_contact(ValueError("bad value"), 7, 1, 6, "k") is None  # not a lost peer
        upload = RuntimeError("HTTPSConnectionPool(host='huggingface.co'): Read timed out")
        assert machines.lost_contact(upload, 7, 1, 6, "k") is None  # a timeout, but not of a collective
        assert machines.lost_contact(err, 7, 0, 1, "k") is None  # one process: nothing to lose


def kill_machine(launcher: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """``sig`` to a machine's launcher and every process under it (torch's launcher starts its workers in sessions
    of their own, so a process group is not enough)."""
    root = psutil.Process(launcher.pid)
    for proc in [*root.children(recursive=True), root]:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


LONG = dict(max_train_samples=4000, max_steps=100, save_strategy="steps", save_steps=20, learning_rate="1e-3",
            optim="adamw_torch")  # fmt: skip


@pytest.mark.bench
@pytest.mark.timeout(600)
@pytest.mark.parametrize("stop", ["kill -9 of machine 1", "SIGTERM to every machine"])
def test_a_stopped_run_on_two_machines_keeps_its_checkpoints_and_resumes(
    stop: str, tiny: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """Once checkpoint-40 exists, either machine 1 is killed (``kill -9`` of its every process: a lost node) or every
    process of both gets SIGTERM (a preempted job). Killed: machine 0 stops within seconds (a closed connection is
    seen at once; a silent machine at --ddp_timeout) in one ``stopped:`` line naming machine 1 and the last complete
    checkpoint. SIGTERM: the run saves a checkpoint at the step it stopped and says so. Either way the same command on
    both machines with --resume_from_checkpoint last ends at the last step."""
    out = tmp_path / "out"
    started = start_machines([SCRIPT, *step_args(tiny, wiki_sample, out, 16, **LONG)], logs=tmp_path)
    deadline = time.monotonic() + 240
    while not (out / "checkpoint-40").is_dir() and time.monotonic() < deadline and started[0].poll() is None:
        time.sleep(0.1)
    assert (out / "checkpoint-40").is_dir(), log(tmp_path, 0)[-3000:]
    stopped = time.monotonic()
    for launcher in started[1:] if stop.startswith("kill") else started:
        kill_machine(launcher, signal.SIGKILL if stop.startswith("kill") else signal.SIGTERM)
    assert all(code != 0 for code in wait_machines(started, timeout=120)) and time.monotonic() - stopped < 60
    (line,) = our_lines(log(tmp_path, 0), "stopped:")
    named = re.search(r"the last complete checkpoint is (\S+): resume with the same command", line)
    assert named and (Path(named.group(1)) / "trainer_state.json").is_file(), line
    if stop.startswith("kill"):
        assert line.startswith("stopped: lost contact with the run's other processes at step ")
        assert "machine 1 (rank 1) stopped, was killed or lost the network" in line
    else:
        step = int(re.match(r"stopped: SIGTERM at step (\d+);", line).group(1))
        assert named.group(1) == str(out / f"checkpoint-{step}")  # saved at the stop
    resumed = start_machines([SCRIPT, *step_args(tiny, wiki_sample, out, 16, **LONG, resume_from_checkpoint="last")],
                             logs=tmp_path)  # fmt: skip
    assert wait_machines(resumed) == [0, 0], log(tmp_path, 0)[-3000:]
    assert json.loads((out / "results.json").read_text())["steps"] == LONG["max_steps"]


@pytest.mark.bench
@pytest.mark.timeout(300)
def test_a_silent_machine_is_found_at_the_collective_timeout(tiny: Path, wiki_sample: Path, tmp_path: Path) -> None:
    """Machine 1 stopped (SIGSTOP of its every process: a hung node that keeps its connections open): machine 0 stops
    at the collective timeout (--ddp_timeout 20), not before it and not long after, in one ``stopped:`` line naming
    machine 1 and the last complete checkpoint."""
    out, timeout = tmp_path / "out", 20
    args = step_args(tiny, wiki_sample, out, 16, **LONG, ddp_timeout=timeout)
    started = start_machines([SCRIPT, *args], logs=tmp_path)
    deadline = time.monotonic() + 240
    while not (out / "checkpoint-20").is_dir() and time.monotonic() < deadline and started[0].poll() is None:
        time.sleep(0.1)
    assert (out / "checkpoint-20").is_dir(), log(tmp_path, 0)[-3000:]
    silent = time.monotonic()
    kill_machine(started[1], signal.SIGSTOP)
    try:
        code = started[0].wait(timeout=timeout + 60)
        waited = time.monotonic() - silent
    finally:
        kill_machine(started[1], signal.SIGKILL)
        started[1].wait(timeout=60)
    assert code != 0 and timeout - 1 < waited < timeout + 30, waited
    (line,) = our_lines(log(tmp_path, 0), "stopped:")
    assert line.startswith("stopped: lost contact with the run's other processes at step "), line
    assert "machine 1 (rank 1) stopped, was killed or lost the network" in line
    named = re.search(r"the last complete checkpoint is (\S+): resume with the same command", line)
    assert named and (Path(named.group(1)) / "trainer_state.json").is_file(), line


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_two_machines_equal_one_machine_with_hard_negatives(tiny: Path, shared_data: Path, tmp_path: Path) -> None:
    """Supervised SimCSE, 16 triplets and 16 pairs (every column gathered across machines, absent negatives masked):
    2 machines × 1 process = 1 process with the 32 rows."""
    from tests.text.test_supervised import write_rows
    from weince_lab.experiments.sick_nli import build_rows, read_sick

    triplets, pairs = build_rows(read_sick(shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt"))
    files = [
        str(write_rows(tmp_path / "triplets.csv", ("sent0", "sent1", "hard_neg"), triplets[:16])),
        str(write_rows(tmp_path / "pairs.csv", ("sent0", "sent1"), pairs[:16])),
    ]
    supervised = dict(train_files=files, drop_unterminated_last_line=None, max_train_samples=None,
                      allow_missing_negatives=True, hard_negative_weight=0.5)  # fmt: skip
    single = run(step_args(tiny, Path(files[0]), tmp_path / "one", 32, **supervised))
    started = start_machines([SCRIPT, *step_args(tiny, Path(files[0]), tmp_path / "two", 16, **supervised)],
                             logs=tmp_path)  # fmt: skip
    assert wait_machines(started) == [0, 0], log(tmp_path, 0)[-3000:]
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    negatives = single["text"]["rows_by_negatives"]
    assert two["world_size"] == 2 and two["text"]["rows_by_negatives"] == negatives == [16, 16]
    assert_same_step(tmp_path, single, two)


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_two_machines_equal_two_processes_of_one_machine_in_vision(tmp_path: Path) -> None:
    """SimCLR: 2 machines × 1 process = 1 machine × 2 processes (the same ranks, per-process batches and BatchNorm
    statistics; negatives gathered): the same weights and figures; one results.json."""
    from tests.helpers import accelerate_launch, write_cifar10_zips
    from tests.vision.test_train import _vision_args

    root = write_cifar10_zips(tmp_path / "data")
    module = ["-m", "simcse_weince.cli.train_vision"]
    accelerate_launch(2, [*module, *_vision_args(root, tmp_path / "one", sync_batchnorm=False)])
    started = start_machines([*module, *_vision_args(root, tmp_path / "two", sync_batchnorm=False)], logs=tmp_path)
    assert wait_machines(started) == [0, 0], log(tmp_path, 0)[-3000:]
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert one["world_size"] == two["world_size"] == 2 and one["steps"] == two["steps"] == 2
    assert two["train_loss"] == pytest.approx(one["train_loss"], rel=1e-6)
    w1, w2 = (load_file(tmp_path / d / "model" / "backbone.safetensors") for d in ("one", "two"))
    for key in w1:
        torch.testing.assert_close(w2[key], w1[key], rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_two_machines_of_two_processes_equal_one_process_with_batches_from_one_file(
    tiny: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """2 machines × 2 processes (batch 8 each, negatives gathered over the 4) = 1 process of batch 32, two SGD steps
    of batches from one file at a time (two files of 32 sentences: each step is one file's global batch)."""
    from simcse_weince.text.sources.lines import read_sentences

    lines = read_sentences(wiki_sample, drop_unterminated_last_line=True)
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for f, start in zip(files, (0, 300), strict=True):
        f.write_text("\n".join(lines[start : start + 32]) + "\n", encoding="utf-8")
    flags = dict(train_files=[str(f) for f in files], drop_unterminated_last_line=None, max_train_samples=None,
                 source_batches="proportional", max_steps=2, loss="infonce")  # fmt: skip
    single = run(step_args(tiny, files[0], tmp_path / "one", 32, **flags))
    started = start_machines([SCRIPT, *step_args(tiny, files[0], tmp_path / "two", 8, **flags)], processes=2,
                             logs=tmp_path)  # fmt: skip
    assert wait_machines(started) == [0, 0], log(tmp_path, 0)[-3000:] + log(tmp_path, 1)[-3000:]
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert (single["world_size"], two["world_size"], two["steps"]) == (1, 4, 2)
    assert_same_step(tmp_path, single, two)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_machines_push_to_the_hub_once(tiny: Path, wiki_sample: Path, tmp_path: Path) -> None:
    """push_to_hub on 2 machines (one process each), every save pushed: the main process alone checks (creates) the
    repository and pushes each checkpoint, then the model and its card, as one machine does; the other machine
    makes no Hub call, so it needs no token."""
    hub = tmp_path / "hub"
    hub.mkdir()
    push = dict(push_to_hub=True, hub_strategy="every_save", hub_model_id="me/two-machines")
    args = step_args(tiny, wiki_sample, tmp_path / "out", 16, max_train_samples=64, max_steps=4, save_strategy="steps",
                     save_steps=2, **push)  # fmt: skip
    script = str(REPO / "tests" / "training" / "hub_recorded_run.py")
    started = start_machines([script, str(hub), *args], logs=tmp_path)
    assert wait_machines(started) == [0, 0], log(tmp_path, 0)[-3000:] + log(tmp_path, 1)[-3000:]
    main, other = (json.loads((hub / f"calls-{rank}.json").read_text()) for rank in (0, 1))
    assert main["commits"] == [
        "Training in progress, step 2",
        "Training in progress, step 4",
        "End of training: SentenceTransformer model",
        "End of training: model card",
    ]
    assert main["calls"][0] == ["create_repo", "me/two-machines"]
    assert other == {"calls": [], "commits": []}
    card = (hub / "me__two-machines" / "README.md").read_text()
    assert card == (tmp_path / "out" / "model" / "README.md").read_text() and "me/two-machines" in card


@pytest.mark.bench
@pytest.mark.timeout(300)
def test_two_machines_without_hub_access_stop_alike(
    tiny: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No token on the main machine: every machine stops before training with the main process's one line."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    args = step_args(tiny, wiki_sample, tmp_path / "out", 16, push_to_hub=True, hub_model_id="me/two-machines")
    assert wait_machines(start_machines([SCRIPT, *args], logs=tmp_path)) != [0, 0]
    lines = [our_lines(log(tmp_path, machine), "error:") for machine in (0, 1)]
    assert lines[0] == lines[1] and len(lines[0]) == 1
    assert lines[0][0].startswith("error: --push_to_hub: no Hugging Face token for 'me/two-machines'")
    assert not (tmp_path / "out" / "results.json").exists()
