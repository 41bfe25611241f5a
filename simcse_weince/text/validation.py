"""What a training run validates on, to keep its best checkpoint: STS-B dev (the default), a user's STS file, or a
retrieval folder in the BEIR layout.

``validation`` (a data setting) is ``stsb``, ``sts:PATH`` (scored sentence pairs: CSV/TSV with a header naming
sentence1, sentence2, score, or JSON Lines with those keys) or ``retrieval:PATH`` (a BEIR folder, scored on its
``qrels/dev.tsv``, or the qrels file PATH names). Each gives the Trainer's evaluation these metrics (× 100, the
Trainer adds ``eval_``); ``metric_for_best_model`` names the one that decides:

* ``stsb``: ``stsb_spearman``, ``stsb_pearson`` (cosine);
* ``sts:PATH``: ``sts_spearman``, ``sts_pearson``;
* ``retrieval:PATH``: ``retrieval_ndcg@10``, ``retrieval_mrr@10``, ``retrieval_map@100``, ``retrieval_recall@k``,
  ``retrieval_accuracy@k`` (the metrics of :mod:`simcse_weince.evaluation.retrieval`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from simcse_weince.evaluation.retrieval import METRIC_NAMES, evaluate_retrieval
from simcse_weince.evaluation.retrieval_data import RetrievalTask, load_beir_folder
from simcse_weince.evaluation.sts import evaluate_sts
from simcse_weince.evaluation.sts_data import STSTask, load_sts_file
from simcse_weince.text.encoder import SimCSEEncoder

KINDS = ("stsb", "sts", "retrieval")


@dataclass(frozen=True)
class Validation:
    """A parsed ``validation`` setting: ``kind`` (``stsb`` | ``sts`` | ``retrieval``) and its ``path``."""

    kind: str
    path: str | None = None

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metric names its evaluation reports (without the Trainer's ``eval_``)."""
        if self.kind == "retrieval":
            return tuple(f"retrieval_{m}" for m in METRIC_NAMES)
        return (f"{self.kind}_spearman", f"{self.kind}_pearson")

    @property
    def label(self) -> str:
        """What it is, for the summary, the model card and ``results.json``."""
        if self.kind == "stsb":
            return "STS-B dev"
        what = "STS file" if self.kind == "sts" else "retrieval folder"
        return f"{what} {self.path}"

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

    @property
    def spec(self) -> str:
        return self.kind if self.path is None else f"{self.kind}:{self.path}"


def parse_validation(spec: str) -> Validation:
    """``stsb`` | ``sts:PATH`` | ``retrieval:PATH`` -> :class:`Validation` (the path is checked when it is read).

    Raises:
        ValueError: another form (names the three).
    """
    kind, sep, path = str(spec).partition(":")
    kind = kind.strip().lower()
    if kind == "stsb" and not sep:
        return Validation("stsb")
    if kind in ("sts", "retrieval") and path.strip():
        return Validation(kind, path.strip())
    raise ValueError(
        f"validation {spec!r}: expected stsb (STS-B dev), sts:PATH (a CSV/TSV/JSONL file of sentence1, sentence2, "
        "score) or retrieval:PATH (a BEIR folder or its qrels file)"
    )


def load_validation_task(validation: Validation) -> STSTask | RetrievalTask:
    """Read a user's validation file or folder (``stsb`` is read by the caller, from the SentEval folder)."""
    if validation.kind == "sts":
        return load_sts_file(validation.path or "")
    if validation.kind == "retrieval":
        return load_beir_folder(validation.path or "", "dev")
    raise ValueError(f"validation {validation.spec!r} is read from the SentEval folder")


def check_scores_vary(task: STSTask | RetrievalTask, validation: Validation) -> None:
    """An STS validation whose scored pairs (after ``eval_max_pairs``) all have one score is refused: Spearman and
    Pearson correlations with a constant are undefined (NaN at every evaluation), so no checkpoint could be chosen
    by them, and the last one would be kept as "best".

    Raises:
        ValueError: names the file, the score and how many pairs carry it.
    """
    if not isinstance(task, STSTask):
        return
    scores = task.subsets[0].scores
    if len(scores) >= 2 and min(scores) == max(scores):
        raise ValueError(
            f"validation {validation.spec}: all {len(scores)} scored pairs have the score {scores[0]:g}, so their "
            "correlation with the model's similarities is undefined (NaN) and no best checkpoint can be chosen; "
            "use an STS file whose scores vary (or, with eval_max_pairs, whose first pairs do), or validation: stsb"
        )


class ValidationEvaluator:
    """``evaluator(model) -> {metric: value × 100}`` of the current model (its inference pooler) on an STS task
    (``{name}_spearman``, ``{name}_pearson``) or a retrieval task (``retrieval_<metric>``).

    Args:
        task: an :class:`STSTask` (its first subset is scored) or a :class:`RetrievalTask`.
        tokenizer: the model's tokenizer.
        batch_size: sentences per encoding batch.
        device: where the model lives.
        show_progress_bar: encoding progress bars.
        name: metric name prefix of an STS task (``stsb``, ``sts``).
        max_length: token limit of the encoder (default: the model's, at most 512), as the exported folder.
    """

    def __init__(
        self,
        task: STSTask | RetrievalTask,
        tokenizer,
        batch_size: int = 128,
        device: str | torch.device | None = None,
        show_progress_bar: bool = False,
        name: str = "stsb",
        max_length: int | None = None,
    ) -> None:
        self.task = task
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = device
        self.show_progress_bar = show_progress_bar
        self.name = "retrieval" if isinstance(task, RetrievalTask) else name
        self.max_length = max_length

    @property
    def num_samples(self) -> int:
        """Sentence pairs (STS) or queries (retrieval) scored per evaluation."""
        if isinstance(self.task, RetrievalTask):
            return len(self.task.queries)
        return sum(len(sub.scores) for sub in self.task.subsets)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        encoder = SimCSEEncoder(
            model,
            self.tokenizer,
            batch_size=self.batch_size,
            max_length=self.max_length,
            device=self.device,
            show_progress_bar=self.show_progress_bar,
        )
        if isinstance(self.task, RetrievalTask):
            metrics = evaluate_retrieval(encoder, self.task, device=self.device).metrics
            return {f"retrieval_{k}": 100.0 * v for k, v in metrics.items()}
        result = evaluate_sts(encoder, self.task)
        return {f"{self.name}_spearman": result.main, f"{self.name}_pearson": result.pearson["all"]}
