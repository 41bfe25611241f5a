"""Run a set of evaluation tasks on one encoder and format the SimCSE-paper-style tables.

Everything family-specific (which tasks exist, how they load and run, their columns) lives in the family's
registry entry (:mod:`simcse_weince.evaluation.families`); this module only resolves a task spec, loads every
task first, runs them in order and keeps the report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simcse_weince.core import strict_json
from simcse_weince.core.atomic import write_text_atomic
from simcse_weince.core.file_errors import writing
from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.families import FAMILIES
from simcse_weince.evaluation.family import MODES, RunOptions, TaskResult

logger = logging.getLogger(__name__)

__all__ = ["MODES", "CachingEncoder", "EvaluationReport", "TaskSet", "load_tasks", "resolve_tasks", "run_evaluation"]


def path_prefixes() -> tuple[str, ...]:
    """The prefixes of the specs that end in a path, which may hold commas (``sts:``, ``retrieval:``)."""
    return tuple(fam.path_prefix for fam in FAMILIES.values() if fam.path_prefix)


def split_spec(spec: str) -> list[str]:
    """The parts of a comma-separated task spec; a comma inside a path (``retrieval:/data/beir,v2``) is kept.

    After a part that names a path (:func:`path_prefixes`), a comma splits only where the next part starts a
    task (``all``, a family's word, a task name or alias, a prefix) and the path joined with it does not exist;
    otherwise the part is the path's continuation.
    """
    parts: list[str] = []
    prefixes = path_prefixes()
    for part in spec.split(","):
        last = parts[-1].strip() if parts else ""
        prefix = next((p for p in prefixes if last.lower().startswith(p)), None)
        if prefix is not None:
            joined = f"{last[len(prefix) :].strip()},{part}"
            if not _starts_task(part) or (Path(joined).exists() and not Path(last[len(prefix) :].strip()).exists()):
                parts[-1] += "," + part
                continue
        parts.append(part)
    return parts


def _starts_task(part: str) -> bool:
    """Whether ``part`` (of a comma-separated spec) names a task, a family or ``all``, or starts a prefix."""
    name = part.strip()
    if name.lower() in ("all", *FAMILIES) or name.lower().startswith(path_prefixes()):
        return True
    return any(fam.resolve(name) is not None for fam in FAMILIES.values())


def resolve_tasks(spec: str | Sequence[str]) -> dict[str, list[str]]:
    """A task spec -> {family: its task names, in the order given}.

    The spec is a comma-separated string (:func:`split_spec`: commas inside a path kept) or a list of: ``all``
    (every family's built-in tasks), a family's word (``sts``, ``transfer``, ``retrieval``: its built-in tasks),
    a task name or alias (case-insensitive), or a family's own spec (``sts:PATH``, ``retrieval:PATH``). Every
    family appears in the result, in registry order.
    """
    names = split_spec(spec) if isinstance(spec, str) else list(spec)
    chosen: dict[str, list[str]] = {f: [] for f in FAMILIES}

    def add(family: str, task: str) -> None:
        if task not in chosen[family]:
            chosen[family].append(task)

    for raw in names:
        name = raw.strip()
        if name.lower() == "all" or name.lower() in FAMILIES:
            for fam in FAMILIES.values():
                if name.lower() in ("all", fam.name):
                    for task in fam.builtin_tasks:
                        add(fam.name, task)
            continue
        for fam in FAMILIES.values():
            task = fam.resolve(name)
            if task is not None:
                add(fam.name, task)
                break
        else:
            known = [t for fam in FAMILIES.values() for t in fam.builtin_tasks]
            paths = ", ".join(f"{p}PATH" for p in path_prefixes())
            raise ValueError(
                f"unknown task {raw!r}; expected all, {', '.join(FAMILIES)}, {paths} or names from {known}"
            )
    return chosen


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
    ``model_id`` records which model it is for (a resolved local folder or a Hub id). ``results`` holds each
    family's results by task (every registered family has an entry)."""

    model: str
    mode: str
    classifier: str = "senteval"
    results: dict[str, dict[str, TaskResult]] = field(default_factory=lambda: {f: {} for f in FAMILIES})
    seconds: float = 0.0
    encode_seconds: float = 0.0
    planned: list[str] = field(default_factory=list)
    model_id: str | None = None

    def __getattr__(self, name: str) -> dict[str, Any]:
        """``report.sts``, ``report.transfer``, ...: one family's results by task."""
        if name != "results" and name in FAMILIES:
            return self.results[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def missing_tasks(self) -> list[str]:
        """The planned tasks without a result yet, in the order they run."""
        return [t for t in self.planned if not any(t in r for r in self.results.values())]

    @property
    def complete(self) -> bool:
        return not self.missing_tasks()

    def scores(self, family: str) -> dict[str, float]:
        """The family's headline number of each task done, by column name."""
        fam = FAMILIES[family]
        out: dict[str, float] = {}
        for task, result in self.results[family].items():
            column = fam.column(task, result)
            out[task if column in out else column] = fam.headline(result, self.mode)  # two tasks, one name
        return out

    def sts_scores(self) -> dict[str, float]:
        return self.scores("sts")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "model": self.model,
            "model_id": self.model_id,
            "mode": self.mode,
            "classifier": self.classifier,
            "complete": self.complete,
            "missing_tasks": self.missing_tasks(),
        }
        for family, results in self.results.items():
            out[family] = {k: v.to_dict() for k, v in results.items()}
        for family in self.results:
            scores = self.scores(family)
            out[f"{family}_avg"] = float(np.mean(list(scores.values()))) if scores else None
        return out | {"seconds": self.seconds, "encode_seconds": self.encode_seconds}

    def markdown(self) -> str:
        """One table, as SimCSE's: each family's tasks and its "Avg." (STS, then transfer, then retrieval), the
        measure of each, then any family's notes and detail table."""
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
        measures, extra = [], []
        for family, results in self.results.items():
            scores = self.scores(family)
            if not scores:
                continue
            fam = FAMILIES[family]
            cols += [*scores, fam.average_label]
            vals += [*scores.values(), float(np.mean(list(scores.values())))]
            measures.append(fam.measure(self.mode))
            extra += [*fam.notes(results)]
            detail = fam.detail(results, self.mode)
            extra += ["", detail] if detail else []
        if not cols:
            return head + "\n"
        table = [
            "| " + " | ".join(cols) + " |",
            "|" + "---|" * len(cols),
            "| " + " | ".join(f"{v:.2f}" for v in vals) + " |",
        ]
        return "\n".join([head, "", *table, "", "; ".join(measures), *(["", *extra] if extra else []), ""])


@dataclass
class TaskSet:
    """The loaded data of every requested task (all files read and checked before anything is encoded):
    ``tasks[family][task]``, every registered family present."""

    mode: str
    tasks: dict[str, dict[str, Any]] = field(default_factory=lambda: {f: {} for f in FAMILIES})

    @classmethod
    def of(cls, mode: str, **by_family: dict[str, Any]) -> TaskSet:
        """A task set from already-loaded tasks, e.g. ``TaskSet.of("fast", transfer={"T": task})``."""
        loaded = cls(mode)
        for family, tasks in by_family.items():
            loaded.tasks[family].update(tasks)
        return loaded

    def __getattr__(self, name: str) -> dict[str, Any]:
        """``tasks.sts``, ``tasks.transfer``, ...: one family's loaded tasks by name."""
        if name != "tasks" and name in FAMILIES:
            return self.tasks[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def planned(self) -> list[str]:
        return [t for tasks in self.tasks.values() for t in tasks]


def load_tasks(tasks: str | Sequence[str], mode: str, data_dir: Path | None) -> TaskSet:
    """Read every task's files for ``mode``; a missing or malformed file fails here, before any encoding.

    Raises:
        ValueError: unknown mode or task name, or a malformed file (names file:line).
        FileNotFoundError: a missing task folder or file.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    loaded = TaskSet(mode)
    for family, names in resolve_tasks(tasks).items():
        fam = FAMILIES[family]
        for name in names:
            if fam.runs_in_mode(name, mode):
                loaded.tasks[family][name] = fam.load(name, mode, data_dir)
    return loaded


def run_evaluation(
    encoder: Encoder,
    model_name: str,
    tasks: str | Sequence[str] | TaskSet = "all",
    mode: str = "test",
    data_dir: Path | None = None,
    seed: int = 1111,
    on_task: Callable[[EvaluationReport], None] | None = None,
    classifier: str = "senteval",
    device: str | None = None,
    show_progress_bar: bool = False,
    engine: str = "auto",
    model_id: str | None = None,
    search: str = "exact",
) -> EvaluationReport:
    """Evaluate ``encoder`` on the tasks; ``mode`` = dev (STS-B/SICK-R dev, transfer dev accuracy, retrieval dev
    qrels), test (everything, 10-fold), fast (everything, 5-fold, fewer solver iterations).

    ``tasks`` is a task spec (its files are all read first, see :func:`load_tasks`) or a loaded
    :class:`TaskSet`; ``on_task(report)`` is called once before the first task (every task still missing) and
    after every task, e.g. to save partial results; ``model_id`` is recorded in the report (which model it is for).
    ``classifier``: ``senteval`` (SentEval's PyTorch protocol, test mode: Adam, 10-fold; fast mode: RMSprop,
    5-fold) or ``sklearn`` (scikit-learn's exact logistic regression); ``device`` is where the senteval
    classifiers train (default: CUDA when available) and ``engine`` how they step (the same models either way,
    see :func:`~simcse_weince.evaluation.senteval_classifier.fit_logregs`); ``show_progress_bar`` shows a bar
    per transfer task and phase over its classifiers, and over the retrieval search; ``search`` is the retrieval
    search (``exact`` or ``faiss``).
    """
    loaded = tasks if isinstance(tasks, TaskSet) else load_tasks(tasks, mode, data_dir)
    options = RunOptions(loaded.mode, seed, classifier, device, engine, show_progress_bar, search, logger.info)
    cached = CachingEncoder(encoder)
    report = EvaluationReport(model_name, loaded.mode, classifier, planned=loaded.planned(), model_id=model_id)
    t0 = time.perf_counter()

    def done() -> None:
        report.seconds = time.perf_counter() - t0
        report.encode_seconds = cached.encode_seconds
        if on_task is not None:
            on_task(report)

    done()  # a report listing every task as missing, before any runs: a run killed hard leaves it marked partial
    for family, family_tasks in loaded.tasks.items():
        for name, task in family_tasks.items():
            report.results[family][name] = FAMILIES[family].run(cached, name, task, options)
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
    kept = "the previous version of the report, if any, is whole"
    with writing(js, "the evaluation report", kept=kept):
        write_text_atomic(js, strict_json.dumps(report.to_dict(), indent=2))
    with writing(md, "the evaluation report", kept=kept):
        write_text_atomic(md, report.markdown() + "\n")
    return js, md
