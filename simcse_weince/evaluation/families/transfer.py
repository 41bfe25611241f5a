"""The transfer family: SentEval's seven classification tasks on frozen embeddings (MR, CR, SUBJ, MPQA, SST2,
TREC, MRPC; see :mod:`simcse_weince.evaluation.transfer`). ``fast`` mode: 5 folds and SentEval's fast
classifier settings; ``test`` and ``dev``: 10 folds. The headline is the test accuracy (dev accuracy in ``dev``
mode). The classifiers' scikit-learn and PyTorch code is imported when a task first runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.family import RunOptions, TaskFamily
from simcse_weince.evaluation.transfer_data import TRANSFER_TASKS, TransferTask, load_transfer_task


class TransferFamily(TaskFamily):
    name = "transfer"
    average_label = "Transfer Avg."

    @property
    def builtin_tasks(self) -> tuple[str, ...]:
        return TRANSFER_TASKS

    @property
    def aliases(self) -> dict[str, str]:
        return {"SST": "SST2", "SST-2": "SST2"}

    def load(self, task: str, mode: str, data_dir: Path | None) -> TransferTask:
        return load_transfer_task(task, data_dir)

    def run(self, encoder: Encoder, task: str, loaded: TransferTask, options: RunOptions) -> Any:
        from simcse_weince.evaluation.senteval_classifier import FAST_CONFIG, TEST_CONFIG
        from simcse_weince.evaluation.transfer import evaluate_transfer

        fast = options.mode == "fast"
        if loaded.empty_sentences:
            options.log(f"{task}: {loaded.empty_sentences} blank lines kept as empty sentences (SentEval's behaviour)")
        return evaluate_transfer(
            encoder,
            loaded,
            k=5 if fast else 10,
            seed=options.seed,
            max_iter=200 if fast else 1000,
            log=options.log,
            classifier=options.classifier,
            config=FAST_CONFIG if fast else TEST_CONFIG,
            device=options.device,
            show_progress_bar=options.show_progress_bar,
            engine=options.engine,
        )

    def headline(self, result: Any, mode: str) -> float:
        return result.dev_acc if mode == "dev" else result.test_acc

    def measure(self, mode: str) -> str:
        return "transfer: " + ("dev" if mode == "dev" else "test") + " accuracy"


FAMILY = TransferFamily()
