"""What an evaluation task family is: the one interface the runner, the report and the command line use.

A family (STS, transfer, retrieval) is one :class:`TaskFamily` object in the registry
(:mod:`simcse_weince.evaluation.families`). It names its built-in tasks, says which task names it owns, reads a
task's files (every file of every requested task is read before anything is encoded, so that bad input fails in
one line first), runs a loaded task on an :class:`~simcse_weince.evaluation.encoder.Encoder`, and gives the
report its columns (one headline number per task, averaged into the family's "Avg." column), its measure line
and any notes or detail table. A new family is one module defining such an object plus one line in the registry.
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


class TaskFamily(ABC):
    """One family of evaluation tasks.

    Class attributes:
        name: the family's word in ``--tasks`` and its key in the report's JSON (``sts``, ``transfer``).
        average_label: the report column averaging its tasks' headline numbers (``STS Avg.``).
    """

    name: str
    average_label: str

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
