"""Shared helpers of the experiment scripts: running seeded runs, mean ± std tables, plots."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from weince_lab.report import table, write

REPO = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child run: the repository first on ``PYTHONPATH``, the caller's entries
    kept after it (packages installed outside site-packages stay importable), tokenizer threads off, ``extra``."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false", **extra}


# Imported once by the fork server, so that each run starts without importing them again (~8 s a run on 2 cores)
PRELOAD = ("torch", "transformers", "datasets", "sentence_transformers", "simcse_weince.cli.train_text",
           "simcse_weince.cli.evaluate", "simcse_weince.cli.train_vision", "simcse_weince.diagnostics.text_geometry",
           "simcse_weince.text.checkpoint", "sklearn.linear_model")  # fmt: skip
_runs: multiprocessing.context.BaseContext | None = None


def start_runs() -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context whose server has :data:`PRELOAD` imported, started now (a driver calls this
    first, so that the server imports while the driver does)."""
    global _runs
    if _runs is None:
        _runs = multiprocessing.get_context("forkserver")
        _runs.set_forkserver_preload(list(PRELOAD))
        from multiprocessing import forkserver

        forkserver.ensure_running()
    return _runs


def exit_with_driver(driver: int) -> None:
    """A run's first step: it ends when the driver (pid ``driver``) does, even by ``kill -9``.

    A run's parent is the run server, which a killed driver leaves running (the run holds the server's liveness
    pipe), so the run watches the driver itself; when the driver is gone the run gets ``SIGTERM``: a training run
    saves a checkpoint at its next step and releases its folder's lock, so that the driver, run again, resumes
    it (and it is ended 60 s later if still there). Without this an orphaned run went on training into the
    folder and held its lock.
    """
    from weince_lab.simulation.worker_pool import exit_with_process

    exit_with_process(driver, signal.SIGTERM)


def run_child(cmd: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, **kwargs)`` for a command a driver starts: the command gets ``SIGTERM`` when the driver
    dies, even by ``kill -9`` (a training run then saves and stops), so that no orphan goes on working."""
    from weince_lab.simulation.worker_pool import signal_on_parent_death

    return subprocess.run(list(cmd), preexec_fn=signal_on_parent_death, **kwargs)


def _call(target: Callable[..., None], args: tuple, driver: int) -> None:
    exit_with_driver(driver)
    target(*args)


def run_function(target: Callable[..., None], *args: Any) -> None:
    """``target(*args)`` in a process forked from the run server (see :func:`run_module`): the libraries it
    uses are imported there once, not in the driver. It ends with the driver (:func:`exit_with_driver`).

    Raises:
        SystemExit: it failed (names it).
    """
    proc = start_runs().Process(target=_call, args=(target, args, os.getpid()))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"{target.__name__}{args} failed (exit code {proc.exitcode})")


def _main_of(module: str, args: list[str], log: str, env: dict[str, str], driver: int) -> None:
    """A run's process: the environment of :func:`child_env`, stdout and stderr appended to ``log`` after a line
    naming the command (at the file descriptors, so that native output goes there too; a resumed run's log keeps
    the killed run's), then the command's ``main(args)``; its return value is the process's exit code. It ends
    with the driver (:func:`exit_with_driver`)."""
    exit_with_driver(driver)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, f"$ python -m {module} {' '.join(args)}\n".encode())
    for stream in (1, 2):
        os.dup2(fd, stream)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)
    sys.argv = [module, *args]
    raise SystemExit(importlib.import_module(module).main(args))


def run_module(module: str, args: Sequence[str], log: Path) -> None:
    """Run the command ``python -m module args`` in a process of its own (its own RNG streams and memory), logged
    to ``log``.

    The process is forked from a server that imported the libraries once (``multiprocessing``'s ``forkserver``;
    the server never touches a GPU, so each run may), not started afresh: what it computes is the same, without
    re-importing torch and transformers for every run.

    Raises:
        SystemExit: the command failed (names it and its log).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = start_runs().Process(target=_main_of, args=(module, list(args), str(log), child_env(), os.getpid()))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed (exit code {proc.exitcode}); see {log}")


def continue_argv(folder: Path) -> tuple[list[str], str]:
    """How to train into ``folder`` a run that has not finished (no ``results.json``), and what that is.

    * ``trained``: no folder, or an empty one: no extra argument;
    * ``resumed``: a run killed after a complete checkpoint: ``--resume_from_checkpoint last`` (the newest
      complete one; the run's own settings check refuses a resume under other settings);
    * ``restarted``: a run killed before its first complete checkpoint: ``--overwrite_output_dir true``
      (nothing in it can be resumed).
    """
    from simcse_weince.training.run_folder import latest_complete_checkpoint

    if not folder.is_dir() or not any(folder.iterdir()):
        return [], "trained"
    if latest_complete_checkpoint(folder, clean=False) is not None:
        return ["--resume_from_checkpoint", "last"], "resumed"
    return ["--overwrite_output_dir", "true"], "restarted"


def split_variant(variant: str) -> tuple[str, list[str]]:
    """A run variant ``NAME:key=value,key=value`` as its name and its settings' training flags
    (``hcl:hcl_beta=2,temperature=0.1`` -> ``("hcl", ["--hcl_beta", "2", "--temperature", "0.1"])``)."""
    base, _, settings = variant.partition(":")
    pairs = [item.split("=", 1) for item in settings.split(",") if item]
    if any(len(pair) != 2 or not pair[0] for pair in pairs):
        raise ValueError(f"variant {variant!r}: settings must be key=value pairs after the colon")
    return base, [x for key, value in pairs for x in (f"--{key}", value)]


def variant_folder(variant: str) -> str:
    """A variant's run folder name: its text with every run of characters other than letters, digits, ``.``, ``_``
    and ``-`` made one ``_`` (a plain loss name is itself)."""
    return re.sub(r"[^\w.-]+", "_", variant)


def run_log(folder: Path, kind: str = "") -> Path:
    """The log beside a run's folder, ``<folder><kind>.log``: the folder's whole name, never ``with_suffix``, which
    reads a setting's ``.`` (``sigmoid_temperature_0.1-seed0``) as a suffix and gives every seed one log."""
    return folder.parent / f"{folder.name}{kind}.log"


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def summary_table(
    per_run: dict[str, dict[int, dict[str, float]]], metrics: Sequence[str], base: str
) -> tuple[str, dict]:
    """Markdown table of mean ± std per variant and of the paired per-seed difference ``other − base`` for
    every other variant (seeds common to all variants)."""
    seeds = sorted(set.intersection(*(set(runs) for runs in per_run.values())))
    summary: dict = {"seeds": seeds, "base": base, "losses": {}, "difference": {}}
    rows = []
    for loss, runs in per_run.items():
        cells = []
        for m in metrics:
            mu, sd = mean_std([runs[s][m] for s in seeds])
            summary["losses"].setdefault(loss, {})[m] = {"mean": mu, "std": sd, "runs": [runs[s][m] for s in seeds]}
            cells.append(f"{mu:.2f} ± {sd:.2f}")
        rows.append([loss, *cells])
    for other in per_run:
        if other == base:
            continue
        cells = []
        for m in metrics:
            diffs = [per_run[other][s][m] - per_run[base][s][m] for s in seeds]
            mu, sd = mean_std(diffs)
            summary["difference"].setdefault(other, {})[m] = {"mean": mu, "std": sd, "per_seed": diffs}
            cells.append(f"{mu:+.2f} ± {sd:.2f}")
        rows.append([f"{other} − {base} (paired by seed)", *cells])
    return "\n".join(table(["loss", *metrics], rows)), summary


def plot_metrics(
    per_run: dict[str, dict[int, dict[str, float]]],
    metrics: Sequence[str],
    path: Path,
    curves: dict[str, list[tuple[int, float]]] | None = None,
    title: str = "",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(metrics) + (1 if curves else 0)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.4))
    axes = np.atleast_1d(axes)
    for ax, m in zip(axes, metrics, strict=False):
        for i, runs in enumerate(per_run.values()):
            vals = [runs[s][m] for s in sorted(runs)]
            ax.scatter([i] * len(vals), vals, alpha=0.7)
            ax.errorbar(
                [i + 0.15], [np.mean(vals)], yerr=[np.std(vals, ddof=1) if len(vals) > 1 else 0], fmt="k_", capsize=4
            )
        ax.set_xticks(range(len(per_run)), list(per_run), rotation=20)
        ax.set_title(m)
    if curves:
        ax = axes[-1]
        for label, pts in curves.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, alpha=0.8)
        ax.set_xlabel("step")
        ax.set_title("mean λ (WEINCE)")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(out_prefix: Path, table: str, summary: dict, header: str) -> None:
    write(out_prefix, f"{header}\n\n{table}\n", summary)
