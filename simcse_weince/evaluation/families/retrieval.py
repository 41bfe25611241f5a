"""The retrieval family: a BEIR-layout folder of the user's (``retrieval:PATH``) or the offline tasks constructed
here from SentEval's files (``retrieval`` alone, or their names: STSB-paraphrase, MRPC-paraphrase,
SICK-entailment). Metrics as sentence-transformers' ``InformationRetrievalEvaluator`` (see
:mod:`simcse_weince.evaluation.retrieval`); the table's headline is nDCG@10 × 100, the detail table has all of
them. Splits: a folder's ``qrels/dev.tsv`` in ``dev`` mode, ``qrels/test.tsv`` otherwise (or the qrels file that
PATH names).

Dev set of a training run (``validation``): ``retrieval:PATH``, scored on its dev qrels, with every metric × 100
under ``retrieval_<metric>`` (``retrieval_ndcg@10``, ``retrieval_mrr@10``, ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.family import DevSet, RunOptions, TaskFamily
from simcse_weince.evaluation.retrieval import METRIC_NAMES, RetrievalResult, evaluate_retrieval
from simcse_weince.evaluation.retrieval_data import BUILTIN_TASKS, RetrievalTask, load_beir_folder, load_builtin_task

PREFIX = "retrieval:"


def folder_split(mode: str) -> str:
    """The qrels split a folder is scored on in ``mode``."""
    return "dev" if mode == "dev" else "test"


class RetrievalFamily(TaskFamily):
    name = "retrieval"
    average_label = "Retrieval Avg."
    path_prefix = PREFIX
    path_hint = "a BEIR folder or its qrels file"

    @property
    def builtin_tasks(self) -> tuple[str, ...]:
        return tuple(BUILTIN_TASKS)

    def resolve(self, name: str) -> str | None:
        if name.lower().startswith(PREFIX):
            target = name[len(PREFIX) :].strip()
            if not target:
                raise ValueError(f"task {name!r} names no folder; expected retrieval:PATH (a BEIR folder)")
            builtin = super().resolve(target)
            return builtin or PREFIX + target
        return super().resolve(name)

    def load(self, task: str, mode: str, data_dir: Path | None) -> RetrievalTask:
        if task.startswith(PREFIX):
            return load_beir_folder(task[len(PREFIX) :], folder_split(mode))
        return load_builtin_task(task, data_dir, mode)

    def run(self, encoder: Encoder, task: str, loaded: RetrievalTask, options: RunOptions) -> RetrievalResult:
        res = evaluate_retrieval(encoder, loaded, options.search, options.device, options.show_progress_bar)
        options.log(
            f"{loaded.name}: nDCG@10 {res.main:.2f}, MRR@10 {100 * res.metrics['mrr@10']:.2f}, "
            f"Recall@10 {100 * res.metrics['recall@10']:.2f} ({res.num_queries} queries, {res.num_corpus} documents)"
        )
        return res

    def headline(self, result: RetrievalResult, mode: str) -> float:
        return result.main

    def column(self, task: str, result: RetrievalResult) -> str:
        return result.task  # a folder's name (the folder of a qrels file), or the built-in task's

    def measure(self, mode: str) -> str:
        return "retrieval: nDCG@10 × 100"

    def notes(self, results: Mapping[str, RetrievalResult]) -> Sequence[str]:
        built = [r.task for r in results.values() if r.construction]
        if not built:
            return ()
        return (
            f"{', '.join(built)}: retrieval tasks constructed by this project from SentEval's files, not published "
            "benchmarks (construction in the JSON and docs/evaluation.md).",
        )

    def detail(self, results: Mapping[str, RetrievalResult], mode: str) -> str | None:
        if not results:
            return None
        head = ["task", "queries", "documents", *METRIC_NAMES]
        rows = [
            [r.task, str(r.num_queries), str(r.num_corpus), *(f"{100 * r.metrics[m]:.2f}" for m in METRIC_NAMES)]
            for r in results.values()
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(["Retrieval (× 100):", "", *lines])

    def dev_set(self, task: str) -> DevSet | None:
        if not task.startswith(PREFIX):
            return None
        return DevSet(self.name, task, task, f"retrieval folder {task[len(PREFIX) :]}", "retrieval", METRIC_NAMES)

    def dev_scores(self, result: RetrievalResult) -> dict[str, float]:
        return {name: 100.0 * value for name, value in result.metrics.items()}

    def num_samples(self, loaded: RetrievalTask) -> int:
        return len(loaded.queries)


FAMILY = RetrievalFamily()
