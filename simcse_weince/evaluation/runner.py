"""Run a set of STS and transfer tasks on one encoder and format the SimCSE-paper-style tables."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.senteval_classifier import FAST_CONFIG, TEST_CONFIG, Engine
from simcse_weince.evaluation.sts import STSResult, evaluate_sts
from simcse_weince.evaluation.sts_data import STS_YEARS, STSTask, load_sts_task
from simcse_weince.evaluation.transfer import Classifier, TransferResult, evaluate_transfer
from simcse_weince.evaluation.transfer_data import TRANSFER_TASKS, TransferTask, load_transfer_task

logger = logging.getLogger(__name__)

STS_TASKS: tuple[str, ...] = (*STS_YEARS, "STSBenchmark", "SICKRelatedness")
STS_SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
ALIASES = {
    "STSB": "STSBenchmark",
    "STS-B": "STSBenchmark",
    "SICKR": "SICKRelatedness",
    "SICK-R": "SICKRelatedness",
    "SST": "SST2",
    "SST-2": "SST2",
}
MODES = ("dev", "test", "fast")


def resolve_tasks(spec: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """``sts`` | ``transfer`` | ``all`` | comma-separated names -> (STS tasks, transfer tasks)."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    sts, transfer = [], []
    for raw in names:
        name = raw.strip()
        if name.lower() in ("sts", "all"):
            sts += [t for t in STS_TASKS if t not in sts]
        if name.lower() in ("transfer", "all"):
            transfer += [t for t in TRANSFER_TASKS if t not in transfer]
        if name.lower() in ("sts", "transfer", "all"):
            continue
        name = ALIASES.get(name.upper(), ALIASES.get(name, name))
        if name in STS_TASKS:
            sts.append(name) if name not in sts else None
        elif name in TRANSFER_TASKS:
            transfer.append(name) if name not in transfer else None
        else:
            raise ValueError(
                f"unknown task {raw!r}; expected sts, transfer, all or names from {[*STS_TASKS, *TRANSFER_TASKS]}"
            )
    return sts, transfer


class CachingEncoder:
    """Remembers every sentence's embedding so that tasks sharing sentences encode them once."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.cache: dict[str, np.ndarray] = {}
        self.encode_seconds = 0.0

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(s for s in sentences if s not in self.cache))
        if missing:
            t0 = time.perf_counter()
            emb = self.encoder.encode(missing)
            self.encode_seconds += time.perf_counter() - t0
            self.cache.update(zip(missing, emb, strict=True))
        return np.stack([self.cache[s] for s in sentences]) if sentences else np.zeros((0, 0), np.float32)


@dataclass
class EvaluationReport:
    """The results so far of one evaluation. ``planned`` lists every task it was started with, in order: until all
    of them have a result the report is partial (``complete`` false, ``missing_tasks`` in the JSON and the table),
    so a report saved before the first task and after each one says what a stopped or killed run left out.
    ``model_id`` records which model it is for (a resolved local folder or a Hub id)."""

    model: str
    mode: str
    classifier: str = "senteval"
    sts: dict[str, STSResult] = field(default_factory=dict)
    transfer: dict[str, TransferResult] = field(default_factory=dict)
    seconds: float = 0.0
    encode_seconds: float = 0.0
    planned: list[str] = field(default_factory=list)
    model_id: str | None = None

    def missing_tasks(self) -> list[str]:
        """The planned tasks without a result yet, in the order they run."""
        return [t for t in self.planned if t not in self.sts and t not in self.transfer]

    @property
    def complete(self) -> bool:
        return not self.missing_tasks()

    def sts_scores(self) -> dict[str, float]:
        return {STS_SHORT.get(k, k): v.main for k, v in self.sts.items()}

    def transfer_scores(self) -> dict[str, float]:
        key = "dev_acc" if self.mode == "dev" else "test_acc"
        return {k: getattr(v, key) for k, v in self.transfer.items()}

    def to_dict(self) -> dict:
        sts, tr = self.sts_scores(), self.transfer_scores()
        return {
            "model": self.model,
            "model_id": self.model_id,
            "mode": self.mode,
            "classifier": self.classifier,
            "complete": self.complete,
            "missing_tasks": self.missing_tasks(),
            "sts": {k: v.to_dict() for k, v in self.sts.items()},
            "transfer": {k: v.to_dict() for k, v in self.transfer.items()},
            "sts_avg": float(np.mean(list(sts.values()))) if sts else None,
            "transfer_avg": float(np.mean(list(tr.values()))) if tr else None,
            "seconds": self.seconds,
            "encode_seconds": self.encode_seconds,
        }

    def markdown(self) -> str:
        """One table, as SimCSE's: the STS tasks and their "Avg.", then the transfer tasks and theirs."""
        where = f" ({self.model_id})" if self.model_id and self.model_id != self.model else ""
        head = (
            f"Model: `{self.model}`{where} · mode: {self.mode} · transfer classifier: {self.classifier} · "
            f"wall time {self.seconds:.1f} s (encoding {self.encode_seconds:.1f} s)"
        )
        missing = self.missing_tasks()
        if missing:
            done = len(self.planned) - len(missing)
            head += (
                f"\n\n**Partial report**: {done} of {len(self.planned)} tasks done, missing {', '.join(missing)} "
                "(averages are over the tasks done)."
            )
        cols: list[str] = []
        vals: list[float] = []
        for label, scores in (("STS Avg.", self.sts_scores()), ("Transfer Avg.", self.transfer_scores())):
            if scores:
                cols += [*scores, label]
                vals += [*scores.values(), float(np.mean(list(scores.values())))]
        if not cols:
            return head + "\n"
        measure = 'STS: Spearman × 100 ("all"); transfer: ' + ("dev" if self.mode == "dev" else "test") + " accuracy"
        return "\n".join(
            [
                head,
                "",
                "| " + " | ".join(cols) + " |",
                "|" + "---|" * len(cols),
                "| " + " | ".join(f"{v:.2f}" for v in vals) + " |",
                "",
                measure,
                "",
            ]
        )


@dataclass
class TaskSet:
    """The loaded data of every requested task (all files read and checked before anything is encoded)."""

    mode: str
    sts: dict[str, STSTask] = field(default_factory=dict)
    transfer: dict[str, TransferTask] = field(default_factory=dict)


def load_tasks(tasks: str | Sequence[str], mode: str, data_dir: Path | None) -> TaskSet:
    """Read every task's files for ``mode``; a missing or malformed file fails here, before any encoding.

    Raises:
        ValueError: unknown mode or task name, or a malformed file (names file:line).
        FileNotFoundError: a missing task folder or file.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    sts_names, transfer_names = resolve_tasks(tasks)
    if mode == "dev":
        sts_names = [t for t in sts_names if t in ("STSBenchmark", "SICKRelatedness")]
    loaded = TaskSet(mode)
    for name in sts_names:
        loaded.sts[name] = load_sts_task(name, data_dir, "dev" if mode == "dev" else "test")
    for name in transfer_names:
        loaded.transfer[name] = load_transfer_task(name, data_dir)
    return loaded


def run_evaluation(
    encoder: Encoder,
    model_name: str,
    tasks: str | Sequence[str] | TaskSet = "all",
    mode: str = "test",
    data_dir: Path | None = None,
    seed: int = 1111,
    on_task: Callable[[EvaluationReport], None] | None = None,
    classifier: Classifier = "senteval",
    device: str | None = None,
    show_progress_bar: bool = False,
    engine: Engine = "auto",
    model_id: str | None = None,
) -> EvaluationReport:
    """Evaluate ``encoder`` on the tasks; ``mode`` = dev (STS-B/SICK-R dev, transfer dev accuracy),
    test (everything, 10-fold), fast (everything, 5-fold, fewer solver iterations).

    ``tasks`` is a task spec (its files are all read first, see :func:`load_tasks`) or a loaded
    :class:`TaskSet`; ``on_task(report)`` is called once before the first task (every task still missing) and
    after every task, e.g. to save partial results; ``model_id`` is recorded in the report (which model it is for).
    ``classifier``: ``senteval`` (SentEval's PyTorch protocol, test mode: Adam, 10-fold; fast mode: RMSprop,
    5-fold) or ``sklearn`` (scikit-learn's exact logistic regression); ``device`` is where the senteval
    classifiers train (default: CUDA when available) and ``engine`` how they step (the same models either way,
    see :func:`~simcse_weince.evaluation.senteval_classifier.fit_logregs`); ``show_progress_bar`` shows a bar
    per transfer task and phase over its classifiers.
    """
    loaded = tasks if isinstance(tasks, TaskSet) else load_tasks(tasks, mode, data_dir)
    mode = loaded.mode
    cached = CachingEncoder(encoder)
    report = EvaluationReport(model_name, mode, classifier, planned=[*loaded.sts, *loaded.transfer], model_id=model_id)
    t0 = time.perf_counter()

    def done() -> None:
        report.seconds = time.perf_counter() - t0
        report.encode_seconds = cached.encode_seconds
        if on_task is not None:
            on_task(report)

    done()  # a report listing every task as missing, before any runs: a run killed hard leaves it marked partial
    for name, task in loaded.sts.items():
        report.sts[name] = res = evaluate_sts(cached, task)
        skipped = f", {res.skipped} unscored pairs skipped" if res.skipped else ""
        logger.info("%s: Spearman %.2f on %d pairs%s", name, res.main, res.num_pairs, skipped)
        done()
    k, max_iter, config = (5, 200, FAST_CONFIG) if mode == "fast" else (10, 1000, TEST_CONFIG)
    for name, task in loaded.transfer.items():
        if task.empty_sentences:
            logger.info("%s: %d blank lines kept as empty sentences (SentEval's behaviour)", name, task.empty_sentences)
        report.transfer[name] = evaluate_transfer(
            cached,
            task,
            k=k,
            seed=seed,
            max_iter=max_iter,
            log=logger.info,
            classifier=classifier,
            config=config,
            device=device,
            show_progress_bar=show_progress_bar,
            engine=engine,
        )
        done()
    done()
    return report


def report_paths(output_dir: str | Path, mode: str) -> tuple[Path, Path]:
    """Where :func:`write_report` puts the report of a ``mode`` run: ``eval_<mode>.json`` and ``.md``."""
    out = Path(output_dir)
    return out / f"eval_{mode}.json", out / f"eval_{mode}.md"


def write_report(report: EvaluationReport, output_dir: str | Path) -> tuple[Path, Path]:
    """Save the report as ``eval_<mode>.json`` and ``.md`` in ``output_dir``; each file is replaced in one step, so
    a run stopped or killed while writing leaves the previous version whole."""
    js, md = report_paths(output_dir, report.mode)
    js.parent.mkdir(parents=True, exist_ok=True)
    _replace(js, json.dumps(report.to_dict(), indent=2))
    _replace(md, report.markdown() + "\n")
    return js, md


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
