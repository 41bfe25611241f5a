"""The STS family: STS12-16, STS-B and SICK-R, SentEval's "all" protocol (Spearman × 100 of cosine
similarity; see :mod:`simcse_weince.evaluation.sts`). In ``dev`` mode only STS-B and SICK-R run (on their dev
splits): STS12-16 have no dev split."""

from __future__ import annotations

from pathlib import Path

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.family import RunOptions, TaskFamily
from simcse_weince.evaluation.sts import STSResult, evaluate_sts
from simcse_weince.evaluation.sts_data import STS_YEARS, STSTask, load_sts_task

STS_TASKS: tuple[str, ...] = (*STS_YEARS, "STSBenchmark", "SICKRelatedness")
STS_SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
DEV_TASKS = ("STSBenchmark", "SICKRelatedness")


class STSFamily(TaskFamily):
    name = "sts"
    average_label = "STS Avg."

    @property
    def builtin_tasks(self) -> tuple[str, ...]:
        return STS_TASKS

    @property
    def aliases(self) -> dict[str, str]:
        return {
            "STSB": "STSBenchmark",
            "STS-B": "STSBenchmark",
            "SICKR": "SICKRelatedness",
            "SICK-R": "SICKRelatedness",
        }

    def runs_in_mode(self, task: str, mode: str) -> bool:
        return mode != "dev" or task in DEV_TASKS

    def load(self, task: str, mode: str, data_dir: Path | None) -> STSTask:
        return load_sts_task(task, data_dir, "dev" if mode == "dev" else "test")

    def run(self, encoder: Encoder, task: str, loaded: STSTask, options: RunOptions) -> STSResult:
        res = evaluate_sts(encoder, loaded)
        skipped = f", {res.skipped} unscored pairs skipped" if res.skipped else ""
        options.log(f"{task}: Spearman {res.main:.2f} on {res.num_pairs} pairs{skipped}")
        return res

    def headline(self, result: STSResult, mode: str) -> float:
        return result.main

    def column(self, task: str, result: STSResult) -> str:
        return STS_SHORT.get(task, task)

    def measure(self, mode: str) -> str:
        return 'STS: Spearman × 100 ("all")'


FAMILY = STSFamily()
