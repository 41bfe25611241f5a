"""Helpers shared by the test modules (no test module imports another one):

* :func:`argv` — a command line from keyword arguments;
* :func:`accelerate_launch` — ``accelerate launch`` of N CPU processes for the multi-process tests;
* :class:`Interrupt`, :class:`StopAt` — stop a training run with an exception after a given step;
* :func:`write_zip`, :func:`write_cifar10_zips` — tiny CIFAR-style JPEG zips for the vision tests;
* :class:`HubRecorder`, :func:`install_hub_recorder` — a local stand-in for the Hugging Face Hub's ``HfApi``;
* :func:`grads`, :func:`assert_grads_close` and the tiny-BERT gradient-caching pieces (:func:`tiny_model`,
  :func:`trainer`, :func:`collate`, :func:`make_loss`), also used by the ``tests/text/grad_cache_ddp.py`` script.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

if TYPE_CHECKING:
    import torch
    from torch import nn

    from simcse_weince.losses import WeinceLoss
    from simcse_weince.text.model import SimCSEModel
    from simcse_weince.text.trainer import SimCSETrainer

REPO = Path(__file__).resolve().parents[1]


# ---- command lines ------------------------------------------------------------------------------------------
def argv(*positional: object, **flags: object) -> list[str]:
    """``argv("c.yaml", output_dir=tmp, max_steps=4)`` → ``["c.yaml", "--output_dir", str(tmp), "--max_steps", "4"]``.

    Positional arguments come first, as strings; then ``--name value`` per flag in the order given. Booleans
    are written ``true`` / ``false`` (HfArgumentParser's spelling), ``None`` leaves the flag out, and a list or
    tuple gives the flag several values (``seeds=[0, 1]`` → ``--seeds 0 1``).
    """
    out = [str(p) for p in positional]
    for name, value in flags.items():
        if value is None:
            continue
        out.append(f"--{name}")
        if isinstance(value, bool):
            out.append("true" if value else "false")
        elif isinstance(value, (list, tuple)):
            out.extend(str(v) for v in value)
        else:
            out.append(str(value))
    return out


# ---- several processes --------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port nobody listens on now, for a launch's rendezvous (the default 29500 would collide)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accelerate_runs(processes: int, runs: list[list[str]], folder: Path) -> None:
    """The ``train_unsup.py`` command lines ``runs``, one after another, in ONE ``accelerate launch`` of
    ``processes`` processes (``tests/text/runs_in_one_launch.py``; the list is written into ``folder``)."""
    listing = folder / "runs.json"
    listing.write_text(json.dumps([[str(a) for a in run] for run in runs]), encoding="utf-8")
    accelerate_launch(processes, [str(REPO / "tests" / "text" / "runs_in_one_launch.py"), str(listing)])


def accelerate_launch(
    processes: int, target: list[str], timeout: int = 600, check: bool = True
) -> subprocess.CompletedProcess:
    """Run ``accelerate launch ... <target>``; with ``check``, raise ``AssertionError`` with its output if it fails.

    accelerate's ``--cpu`` flag starts ONE process (multi-CPU needs an MPI hostfile); ``--multi_gpu`` starts N
    processes through torchrun, and on a machine without CUDA the training arguments select CPU + gloo.
    """
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        *target,
    ]  # fmt: skip  (test workers launch side by side)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"accelerate launch failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def start_machines(
    target: list[str] | list[list[str]],
    machines: int = 2,
    processes: int = 1,
    cwd: list[Path] | None = None,
    logs: Path | None = None,
) -> list[subprocess.Popen]:
    """Start ``machines`` ``accelerate launch`` commands side by side on this host, as several machines would run
    them (``--num_machines``, ``--machine_rank``, the rendezvous at 127.0.0.1), ``processes`` processes each, each in
    its own session (so that a test can kill one machine's whole process tree) and working directory (``cwd``).
    ``target``: one command line for every machine, or one per machine. Their output goes to ``logs/machine-R.log``.
    """
    port = free_port()
    targets = target if isinstance(target[0], list) else [target] * machines
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    started = []
    for rank in range(machines):
        cmd = [
            sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
            str(machines * processes), "--num_machines", str(machines), "--machine_rank", str(rank),
            "--main_process_ip", "127.0.0.1", "--main_process_port", str(port), "--mixed_precision", "no",
            "--dynamo_backend", "no", *map(str, targets[rank]),
        ]  # fmt: skip
        log = open((logs or Path(cwd[rank] if cwd else REPO)) / f"machine-{rank}.log", "w")
        started.append(subprocess.Popen(cmd, cwd=cwd[rank] if cwd else REPO, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
    return started


def wait_machines(started: list[subprocess.Popen], timeout: int = 600) -> list[int]:
    """The exit codes of :func:`start_machines`' launches, once all have ended."""
    return [p.wait(timeout=timeout) for p in started]


# ---- interrupted runs ---------------------------------------------------------------------------------------
class Interrupt(Exception):
    pass


def recording_collator(monkeypatch) -> list[list]:
    """Make every ``SimCSECollator`` call append its batch's ``sentence_key`` list to the returned list (the
    batches a run trains on, in order)."""
    from simcse_weince.text import data

    seen: list[list] = []
    original = data.SimCSECollator.__call__

    def call(self, rows):
        batch = original(self, rows)
        seen.append(batch["sentence_key"].tolist())
        return batch

    monkeypatch.setattr(data.SimCSECollator, "__call__", call)
    return seen


class StopAt(TrainerCallback):
    """Raise :class:`Interrupt` at the end of step ``step`` (before that step's checkpoint is saved), as a kill
    would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Interrupt


# ---- fake image data ----------------------------------------------------------------------------------------
def write_zip(path: Path, split: str, per_class: int = 4, classes=("cat", "dog"), size: int = 32) -> Path:
    """Append ``per_class`` JPEGs per class under ``<split>/<class>/`` to the zip at ``path`` (two classes told
    apart by brightness)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "a") as z:
        for ci, c in enumerate(classes):
            for i in range(per_class):
                arr = (rng.random((size, size, 3)) * 60 + ci * 150).astype(np.uint8)  # class = brightness
                buf = io.BytesIO()
                Image.fromarray(arr).save(buf, format="JPEG")
                z.writestr(f"{split}/{c}/{i:04d}.jpg", buf.getvalue())
    return path


def write_cifar10_zips(root: Path, train_per_class: int = 8, test_per_class: int = 4) -> Path:
    """A ``cifar10_zip`` data folder: ``root`` with the train and test archives the loader expects."""
    root.mkdir(parents=True, exist_ok=True)
    write_zip(root / "cifar10_train_jpeg.zip", "train", per_class=train_per_class)
    write_zip(root / "cifar10_test_jpeg.zip", "test", per_class=test_per_class)
    return root


# ---- the Hugging Face Hub without a network -----------------------------------------------------------------
# The HfApi methods that the Trainer and this project call (create_repo, upload_folder, snapshot_download) are
# replaced by a recorder that keeps every repository as a local folder and every call in order, so tests can
# assert what would be uploaded, when, and with which card.
HUB_USER = "recorder-user"


@dataclass
class Commit:
    repo_id: str
    message: str
    path_in_repo: str
    files: list[str]  # paths in the repository, sorted
    card: str | None  # README.md as uploaded, if it was


def _matches(path: str, patterns: list[str] | str | None) -> bool:
    if patterns is None:
        return False
    patterns = [patterns] if isinstance(patterns, str) else patterns
    return any(fnmatch.fnmatch(path, p + "*" if p.endswith("/") else p) for p in patterns)


@dataclass
class HubRecorder:
    root: Path
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, repo_id)
    commits: list[Commit] = field(default_factory=list)

    def full_id(self, repo_id: str) -> str:
        return repo_id if "/" in repo_id else f"{HUB_USER}/{repo_id}"

    def repo(self, repo_id: str) -> Path:
        return self.root / self.full_id(repo_id).replace("/", "__")

    # the HfApi methods (bound to an HfApi instance: first argument is that instance)
    def create_repo(self, api: Any, repo_id: str, **kwargs: Any) -> SimpleNamespace:
        self.calls.append(("create_repo", self.full_id(repo_id)))
        self.repo(repo_id).mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(repo_id=self.full_id(repo_id), url=f"https://hub.invalid/{self.full_id(repo_id)}")

    def upload_folder(
        self,
        api: Any,
        *,
        repo_id: str,
        folder_path: str | Path,
        path_in_repo: str | None = None,
        commit_message: str | None = None,
        allow_patterns: list[str] | str | None = None,
        ignore_patterns: list[str] | str | None = None,
        run_as_future: bool = False,
        **kwargs: Any,
    ):
        self.calls.append(("upload_folder", self.full_id(repo_id)))
        src, prefix = Path(folder_path), (path_in_repo or "").strip("/")
        target = self.repo(repo_id) / prefix
        files = []
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            if (allow_patterns is not None and not _matches(rel, allow_patterns)) or _matches(rel, ignore_patterns):
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target / rel)
            files.append(f"{prefix}/{rel}" if prefix else rel)
        card = (
            (src / "README.md").read_text(encoding="utf-8") if "README.md" in [f.name for f in src.iterdir()] else None
        )
        self.commits.append(Commit(self.full_id(repo_id), commit_message or "", prefix, files, card))
        info = SimpleNamespace(commit_url=f"https://hub.invalid/{self.full_id(repo_id)}/commit/{len(self.commits)}")
        if run_as_future:
            future: Future = Future()
            future.set_result(info)
            return future
        return info

    def snapshot_download(self, api: Any, *, repo_id: str, allow_patterns=None, local_dir=None, **kwargs: Any) -> str:
        self.calls.append(("snapshot_download", self.full_id(repo_id)))
        src, dst = self.repo(repo_id), Path(local_dir)
        if not src.is_dir():
            raise FileNotFoundError(f"no repository {repo_id} in the recorder")
        for f in (p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            if allow_patterns is None or _matches(rel, allow_patterns):
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst / rel)
        return str(dst)


def install_hub_recorder(monkeypatch: Any, root: Path) -> HubRecorder:
    """Replace the HfApi methods with a recorder storing repositories under ``root``; also the module-level
    functions that a library imported by name (``transformers.trainer`` before 5.10.1 calls ``create_repo`` and
    ``upload_folder`` bound to huggingface_hub's default ``HfApi`` at import, which a class patch misses)."""
    import transformers.trainer
    from huggingface_hub import HfApi

    recorder = HubRecorder(root)
    for name in ("create_repo", "upload_folder", "snapshot_download"):
        method = getattr(recorder, name)
        monkeypatch.setattr(HfApi, name, lambda api, *a, _m=method, **k: _m(api, *a, **k))
        if hasattr(transformers.trainer, name):
            monkeypatch.setattr(transformers.trainer, name, lambda *a, _m=method, **k: _m(HfApi(), *a, **k))
    monkeypatch.setenv("HF_TOKEN", "hf_recorder_token")
    return recorder


# ---- gradients ----------------------------------------------------------------------------------------------
def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    """The parameter gradients (cloned), then zeroed."""
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def assert_grads_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], rel: float = 1e-5) -> None:
    """Equal to float32 rounding: within ``rel`` of each tensor's largest entry. A gradient that is zero in
    exact arithmetic (attention key biases: softmax ignores a per-query constant) holds only rounding noise;
    its scale is floored at 1e-6 of the largest gradient of the model."""
    import torch

    assert got.keys() == want.keys() and want
    floor = 1e-6 * max(float(w.abs().max()) for w in want.values())
    for name, w in want.items():
        scale = max(float(w.abs().max()), floor)
        torch.testing.assert_close(got[name], w, rtol=rel, atol=rel * scale, msg=name)


# ---- gradient-cached SimCSE steps on a tiny BERT ------------------------------------------------------------
B = 12  # the batch size of the gradient-caching tests
# Mean pooling: a random-init BERT's [CLS] vectors are nearly identical (1 - s ≈ 1e-5), where -log(1 - s) turns
# float rounding into visible differences; the means are well spread.
POOLER = "avg"
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def without_dropout(model_dir: Path) -> Path:
    """A copy of a tiny BERT folder beside it, with dropout off (made once): a step's weights are then a function of
    its batch only, whatever the processes that computed it."""
    folder = model_dir.parent / f"{model_dir.name}-nodropout"
    if not folder.exists():
        shutil.copytree(model_dir, folder)
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(cfg | NO_DROPOUT))
    return folder


def collate(tok):
    """Pad a list of texts (max 16 tokens) and add their sentence keys: a batch of kind ``views``."""
    from simcse_weince.losses.duplicates import sentence_keys
    from simcse_weince.losses.layout import BatchKind

    def fn(texts: list[str]) -> dict:
        batch = dict(tok(texts, padding=True, truncation=True, max_length=16, return_tensors="pt"))
        batch["sentence_key"] = sentence_keys(batch["input_ids"], batch["attention_mask"])
        return batch | {"kind": BatchKind.VIEWS}

    return fn


def make_loss(gather_across_devices: bool = False) -> WeinceLoss:
    """WEINCE with margin 0 (one of the authors' settings), which makes λ clearly non-zero on a tiny batch."""
    from simcse_weince.losses import WeinceLoss

    return WeinceLoss(0.05, min_tail_points=10, margin=0.0, gather_across_devices=gather_across_devices)


def tiny_model(folder: Path, **overrides) -> SimCSEModel:
    """The tiny BERT at ``folder`` with seeded random weights, mean pooling, in training mode."""
    import torch

    from simcse_weince.text.model import SimCSEModel, load_hf_encoder

    torch.manual_seed(0)
    encoder = load_hf_encoder(str(folder), from_config=True, config_overrides=overrides)
    return SimCSEModel(encoder, pooler=POOLER).train()


def trainer(model: SimCSEModel, out: Path, chunk: int | None, **kwargs) -> SimCSETrainer:
    """A SimCSE trainer with batch :data:`B` and gradient-cache chunks of ``chunk`` (``None``: uncached)."""
    from simcse_weince.text.trainer import SimCSETrainer
    from simcse_weince.training.arguments import ContrastiveTrainingArguments

    args = ContrastiveTrainingArguments(
        output_dir=str(out), per_device_train_batch_size=B, gradient_cache_chunk_size=chunk, report_to="none",
        use_cpu=kwargs.pop("use_cpu", True), **kwargs,
    )  # fmt: skip
    return SimCSETrainer(model=model, args=args, loss=make_loss())


# ---- the tiny text run ------------------------------------------------------------------------------------
def text_run_args(tiny: Path, wiki: Path, out: Path, **flags: object) -> list[str]:
    """A tiny SimCSE run's command line (2-layer BERT from config, 96 Wikipedia sentences, STS-B dev cut to 60
    pairs); ``flags`` override or add settings."""
    base = dict(
        model_name_or_path=tiny, init_from_config=True, pooler="cls", train_files=wiki,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=96, max_seq_length=16,
        eval_max_pairs=60, per_device_train_batch_size=16, learning_rate="1e-3", max_steps=4, eval_steps=2,
        save_steps=2, logging_steps=1, min_tail_points=10, eval_test_at_end=False, output_dir=out,
        disable_tqdm=True, dataloader_num_workers=0, report_to="none", seed=3,
    )  # fmt: skip
    return argv(**(base | flags))
