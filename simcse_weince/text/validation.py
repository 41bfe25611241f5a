"""What a training run validates on, to keep its best checkpoint: one evaluation task that its family declares as
a dev set (:class:`~simcse_weince.evaluation.family.DevSet`), written as ``evaluate_sts.py --tasks`` writes it.

The families (:mod:`simcse_weince.evaluation.families`) say which of their tasks are dev sets and what they report
(:func:`dev_forms` lists them: the error message and ``--help`` are built from it); ``metric_for_best_model`` names
one of a dev set's metrics (× 100; the Trainer adds ``eval_``). Today: ``stsb`` (STS-B dev, the default),
``sts:PATH`` (a file of scored pairs) and ``retrieval:PATH`` (a BEIR folder scored on its ``qrels/dev.tsv``, or the
qrels file PATH names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from simcse_weince.evaluation.families import FAMILIES
from simcse_weince.evaluation.family import DevSet, RunOptions, TaskFamily
from simcse_weince.evaluation.runner import resolve_tasks
from simcse_weince.text.encoder import SimCSEEncoder


@dataclass(frozen=True)
class Validation:
    """A ``validation`` setting, resolved (on construction) to the dev set it names; ``spec`` is its canonical
    spelling (``Validation("STS-B").spec == "stsb"``).

    Raises:
        ValueError: it names no single task that a family declares as a dev set (names the forms there are).
    """

    spec: str
    dev: DevSet = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        dev = _dev_set(self.spec)
        object.__setattr__(self, "dev", dev)
        object.__setattr__(self, "spec", dev.spec)

    @property
    def family(self) -> TaskFamily:
        return FAMILIES[self.dev.family]

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metric names its evaluation reports (without the Trainer's ``eval_``)."""
        return self.dev.metrics

    @property
    def label(self) -> str:
        """What it is, for the summary, the model card and ``results.json``."""
        return self.dev.label

    def check_metric(self, metric: str | None) -> str:
        """``metric`` (``metric_for_best_model``, with or without ``eval_``) if this validation reports it.

        Raises:
            ValueError: it does not (names the metrics it has).
        """
        name = (metric or "").removeprefix("eval_")
        if name not in self.metrics:
            raise ValueError(
                f"metric_for_best_model {metric!r} is not a metric of validation {self.spec!r}; expected one of "
                f"{', '.join(self.metrics)}"
            )
        return name

    def load(self, data_dir: Path | None, max_pairs: int | None = None) -> Any:
        """Read its dev split (built-in tasks from the SentEval folder ``data_dir``), as scored at every evaluation:
        cut to ``max_pairs`` pairs when it has pairs, checked that it can rank checkpoints.

        Raises:
            FileNotFoundError, ValueError: a missing or malformed file; scores that cannot choose a checkpoint.
        """
        loaded = self.family.load(self.dev.task, "dev", data_dir)
        try:
            return self.family.dev_task(self.dev, loaded, max_pairs)
        except ValueError as err:
            raise ValueError(f"validation {self.spec}: {err}") from None


def _dev_set(spec: str) -> DevSet:
    """The dev set that ``spec`` (one task, as ``--tasks`` writes it) names."""
    try:
        tasks = [(family, task) for family, names in resolve_tasks([str(spec)]).items() for task in names]
    except ValueError:
        tasks = []
    dev = FAMILIES[tasks[0][0]].dev_set(tasks[0][1]) if len(tasks) == 1 else None
    if dev is None:
        raise ValueError(f"validation {spec!r}: expected {dev_forms()}")
    return dev


def dev_forms() -> str:
    """Every dev set a ``validation`` setting may name, as the families declare them (for the error message and
    ``--help``): ``stsb (STS-B dev: stsb_spearman, stsb_pearson), sts:PATH (...) or retrieval:PATH (...)``."""
    forms = [form for family in FAMILIES.values() for form in family.dev_forms()]
    return f"{', '.join(forms[:-1])} or {forms[-1]}" if len(forms) > 1 else "".join(forms)


def parse_validation(spec: str) -> Validation:
    """A ``validation`` setting -> :class:`Validation` (a file or folder is read by :meth:`Validation.load`).

    Raises:
        ValueError: it names no dev set (names the forms there are).
    """
    return Validation(spec)


class ValidationEvaluator:
    """``evaluator(model) -> {metric: value × 100}`` of the current model (its inference pooler) on a loaded dev set,
    under its validation's metric names.

    Args:
        validation: what ``task`` is (its family runs and scores it).
        task: the loaded task (:meth:`Validation.load`).
        tokenizer: the model's tokenizer.
        batch_size: sentences per encoding batch.
        device: where the model lives.
        show_progress_bar: encoding progress bars.
        max_length: token limit of the encoder (default: the model's, at most 512), as the exported folder.
    """

    def __init__(
        self,
        validation: Validation,
        task: Any,
        tokenizer,
        batch_size: int = 128,
        device: str | torch.device | None = None,
        show_progress_bar: bool = False,
        max_length: int | None = None,
    ) -> None:
        self.validation = validation
        self.task = task
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = device
        self.show_progress_bar = show_progress_bar
        self.max_length = max_length

    @property
    def num_samples(self) -> int:
        """Samples (sentence pairs, queries) scored per evaluation."""
        return self.validation.family.num_samples(self.task)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        encoder = SimCSEEncoder(
            model,
            self.tokenizer,
            batch_size=self.batch_size,
            max_length=self.max_length,
            device=self.device,
            show_progress_bar=self.show_progress_bar,
        )
        dev, family = self.validation.dev, self.validation.family
        options = RunOptions(mode="dev", device=self.device, log=_quiet)  # the Trainer logs the metrics
        result = family.run(encoder, dev.task, self.task, options)
        return {f"{dev.prefix}_{name}": value for name, value in family.dev_scores(result).items()}


def _quiet(message: str) -> None:
    """A family's progress line, not printed at every evaluation of a training run."""
