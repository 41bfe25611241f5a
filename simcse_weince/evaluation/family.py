"""What an evaluation task family is: the one interface the runner, the report and the command line use.

A family (STS, transfer, retrieval) is one :class:`TaskFamily` object in the registry
(:mod:`simcse_weince.evaluation.families`). It names its built-in tasks, says which task names it owns, reads a
task's files (every file of every requested task is read before anything is encoded, so that bad input fails in
one line first), runs a loaded task on an :class:`~simcse_weince.evaluation.encoder.Encoder`, and gives the
report its columns (one headline number per task, averaged into the family's "Avg." column), its measure line
and any notes or detail table. A new family is one module defining such an object plus one line in the registry.

A family whose tasks can pick a training run's best checkpoint (its ``validation`` setting) says so for each such
task with a :class:`DevSet` (:meth:`TaskFamily.dev_set`): the setting is then the ``--tasks`` spelling of that one
task, scored on its dev split, under the metric names the DevSet declares (``metric_for_best_model`` names one).
A new kind of validation is one family declaring its dev sets and their scores, nothing else.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from simcse_weince.evaluation.encoder import Encoder

MODES = ("dev", "test", "fast")


class TaskResult(Protocol):
    """What every family's per-task result offers the report."""

    task: str

    def to_dict(self) -> dict: ...


@dataclass(frozen=True)
class RunOptions:
    """How the tasks of one evaluation run (each family reads what concerns it).

    Attributes:
        mode: ``dev`` | ``test`` | ``fast`` (see :func:`~simcse_weince.evaluation.runner.run_evaluation`).
        seed: the seed of the transfer tasks' folds and classifiers.
        classifier: the transfer classifier (``senteval`` or ``sklearn``).
        device: where the transfer classifiers train and the retrieval search runs (default: CUDA when there).
        engine: how the senteval classifiers step.
        show_progress_bar: progress bars (transfer classifiers, retrieval search).
        search: retrieval search, ``exact`` (chunked top-k, the default) or ``faiss`` (an exact flat index).
        log: where a family's one-line progress messages go.
    """

    mode: str = "test"
    seed: int = 1111
    classifier: str = "senteval"
    device: str | None = None
    engine: str = "auto"
    show_progress_bar: bool = False
    search: str = "exact"
    log: Callable[[str], None] = logging.getLogger("simcse_weince.evaluation").info


@dataclass(frozen=True)
class DevSet:
    """One task of a family as a training run's dev set: what a ``validation`` setting naming it scores.

    Attributes:
        family: the family's name.
        task: the task name the family resolved (what its ``load`` and ``run`` take), loaded in ``dev`` mode.
        spec: the setting's canonical spelling, recorded with the run (``stsb``, ``sts:PATH``, ``retrieval:PATH``).
        label: what it is, for the training summary, the model card and ``results.json`` (``STS-B dev``).
        prefix: the prefix of its metric names (``stsb`` -> ``stsb_spearman``).
        metric_names: the names :meth:`TaskFamily.dev_scores` reports, without the prefix, the first the main one.
        pairs: whether it is scored sentence pairs, which ``eval_max_pairs`` cuts.
    """

    family: str
    task: str
    spec: str
    label: str
    prefix: str
    metric_names: tuple[str, ...]
    pairs: bool = False

    @property
    def metrics(self) -> tuple[str, ...]:
        """Its metric names as the Trainer logs them without ``eval_`` (``metric_for_best_model``'s choices)."""
        return tuple(f"{self.prefix}_{name}" for name in self.metric_names)


class TaskFamily(ABC):
    """One family of evaluation tasks.

    Class attributes:
        name: the family's word in ``--tasks`` and its key in the report's JSON (``sts``, ``transfer``).
        average_label: the report column averaging its tasks' headline numbers (``STS Avg.``).
        path_prefix: the prefix of a task spec that ends in a user's path (``retrieval:``), if the family has one.
        path_hint: what that path is, for messages (``a BEIR folder or its qrels file``).
    """

    name: str
    average_label: str
    path_prefix: str | None = None
    path_hint: str = ""

    @property
    @abstractmethod
    def builtin_tasks(self) -> tuple[str, ...]:
        """The tasks the family's word (and ``all``) stands for, in report order."""

    @property
    def aliases(self) -> Mapping[str, str]:
        """Other spellings of task names (matched case-insensitively) -> the task name."""
        return {}

    def resolve(self, name: str) -> str | None:
        """The task name if this family owns ``name`` (a task, an alias, or a spec such as ``retrieval:PATH``),
        else ``None``."""
        if name in self.builtin_tasks:
            return name
        folded = {k.upper(): v for k, v in self.aliases.items()} | {t.upper(): t for t in self.builtin_tasks}
        return folded.get(name.upper())

    def runs_in_mode(self, task: str, mode: str) -> bool:
        """Whether ``task`` runs in ``mode`` (e.g. STS12-16 have no dev split)."""
        return True

    @abstractmethod
    def load(self, task: str, mode: str, data_dir: Path | None) -> Any:
        """Read ``task``'s files for ``mode``.

        Raises:
            FileNotFoundError, ValueError: one line naming the file (and line) and what was expected.
        """

    @abstractmethod
    def run(self, encoder: Encoder, task: str, loaded: Any, options: RunOptions) -> TaskResult:
        """Evaluate ``encoder`` on one loaded task."""

    @abstractmethod
    def headline(self, result: TaskResult, mode: str) -> float:
        """The task's number in the report's table (and in the family's average)."""

    def column(self, task: str, result: TaskResult) -> str:
        """The task's column name in the report's table (the report falls back to ``task`` itself when two tasks
        would share one)."""
        return task

    @abstractmethod
    def measure(self, mode: str) -> str:
        """What the family's columns measure, for the line under the table."""

    def notes(self, results: Mapping[str, TaskResult]) -> Sequence[str]:
        """Lines printed under the table (e.g. how a task was constructed)."""
        return ()

    def detail(self, results: Mapping[str, TaskResult], mode: str) -> str | None:
        """An optional table of every metric of every task, printed after the main table."""
        return None

    def dev_forms(self) -> tuple[str, ...]:
        """How a ``validation`` setting names the family's dev sets, for messages and ``--help``, derived from
        :meth:`dev_set` over its built-in tasks and its path form: ``stsb (STS-B dev: stsb_spearman, stsb_pearson)``,
        ``retrieval:PATH (a BEIR folder or its qrels file: retrieval_ndcg@10, retrieval_mrr@10, ...)``; empty when
        none of its tasks is one."""
        path = [self.path_prefix + "PATH"] if self.path_prefix else []
        forms = []
        for task in [*self.builtin_tasks, *path]:
            if (dev := self.dev_set(task)) is not None:
                what = self.path_hint if task in path and self.path_hint else dev.label
                metrics = ", ".join(dev.metrics[:2]) + (", ..." if len(dev.metrics) > 2 else "")
                forms.append(f"{dev.spec} ({what}: {metrics})")
        return tuple(forms)

    def dev_set(self, task: str) -> DevSet | None:
        """How ``task`` (a resolved name) serves as a training run's dev set, or ``None``: it cannot (the default)."""
        return None

    def dev_task(self, dev: DevSet, loaded: Any, max_pairs: int | None) -> Any:
        """The loaded dev set as it is scored at every evaluation: its first ``max_pairs`` pairs (when ``dev.pairs``
        and ``max_pairs`` is set), checked that it can rank checkpoints.

        Raises:
            ValueError: its scores could not choose a checkpoint (the reason, not the setting).
        """
        return loaded

    def dev_scores(self, result: TaskResult) -> dict[str, float]:
        """A dev set's result -> ``{metric name without the prefix: value × 100}``, its DevSet's ``metric_names``."""
        raise NotImplementedError(f"the {self.name} family has no dev sets")

    def num_samples(self, loaded: Any) -> int:
        """How many samples (pairs, queries) one run of the loaded task scores (the Trainer's samples/s)."""
        return 0
