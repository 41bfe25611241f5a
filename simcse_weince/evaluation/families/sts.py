"""The STS family: STS12-16, STS-B and SICK-R, SentEval's "all" protocol (Spearman × 100 of cosine
similarity; see :mod:`simcse_weince.evaluation.sts`), and a user's file of scored pairs (``sts:PATH``: CSV/TSV
with a header naming sentence1, sentence2, score, or JSON Lines with those keys; the same pairs in every mode).
In ``dev`` mode STS12-16 do not run: they have no dev split.

Dev sets of a training run (``validation``): ``stsb`` (STS-B dev; metrics ``stsb_spearman``, ``stsb_pearson``)
and ``sts:PATH`` (``sts_spearman``, ``sts_pearson``), cosine Spearman and Pearson × 100."""

from __future__ import annotations

from pathlib import Path

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.family import DevSet, RunOptions, TaskFamily
from simcse_weince.evaluation.sts import STSResult, evaluate_sts
from simcse_weince.evaluation.sts_data import STS_YEARS, STSTask, load_sts_file, load_sts_task

STS_TASKS: tuple[str, ...] = (*STS_YEARS, "STSBenchmark", "SICKRelatedness")
STS_SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
DEV_TASKS = ("STSBenchmark", "SICKRelatedness")
PREFIX = "sts:"
FILE_HINT = "a CSV/TSV/JSONL file of sentence1, sentence2, score"
# the built-in tasks that serve as a training run's dev set: task -> (its setting and metric prefix, its label)
DEV_SETS = {"STSBenchmark": ("stsb", "STS-B dev")}
DEV_METRICS = ("spearman", "pearson")


class STSFamily(TaskFamily):
    name = "sts"
    average_label = "STS Avg."
    path_prefix = PREFIX
    path_hint = FILE_HINT

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

    def resolve(self, name: str) -> str | None:
        if name.lower().startswith(PREFIX):
            path = name[len(PREFIX) :].strip()
            if not path:
                raise ValueError(f"task {name!r} names no file; expected sts:PATH ({FILE_HINT})")
            return PREFIX + path
        return super().resolve(name)

    def runs_in_mode(self, task: str, mode: str) -> bool:
        return mode != "dev" or task in DEV_TASKS or task.startswith(PREFIX)

    def load(self, task: str, mode: str, data_dir: Path | None) -> STSTask:
        if task.startswith(PREFIX):
            return load_sts_file(task[len(PREFIX) :])
        return load_sts_task(task, data_dir, "dev" if mode == "dev" else "test")

    def run(self, encoder: Encoder, task: str, loaded: STSTask, options: RunOptions) -> STSResult:
        res = evaluate_sts(encoder, loaded)
        skipped = f", {res.skipped} unscored pairs skipped" if res.skipped else ""
        options.log(f"{task}: Spearman {res.main:.2f} on {res.num_pairs} pairs{skipped}")
        return res

    def headline(self, result: STSResult, mode: str) -> float:
        return result.main

    def column(self, task: str, result: STSResult) -> str:
        return result.task if task.startswith(PREFIX) else STS_SHORT.get(task, task)  # a file: its name

    def measure(self, mode: str) -> str:
        return 'STS: Spearman × 100 ("all")'

    def dev_set(self, task: str) -> DevSet | None:
        if task.startswith(PREFIX):
            return DevSet(self.name, task, task, f"STS file {task[len(PREFIX) :]}", "sts", DEV_METRICS, pairs=True)
        if task in DEV_SETS:
            spec, label = DEV_SETS[task]
            return DevSet(self.name, task, spec, label, spec, DEV_METRICS, pairs=True)
        return None

    def dev_task(self, dev: DevSet, loaded: STSTask, max_pairs: int | None) -> STSTask:
        """Cut to the first ``max_pairs`` pairs; refused when they all have one score: Spearman and Pearson
        correlations with a constant are undefined (NaN at every evaluation), so no checkpoint could be chosen by
        them, and the last one would be kept as "best"."""
        task = loaded.first_pairs(max_pairs)
        scores = task.subsets[0].scores
        if len(scores) >= 2 and min(scores) == max(scores):
            raise ValueError(
                f"all {len(scores)} scored pairs have the score {scores[0]:g}, so their correlation with the model's "
                "similarities is undefined (NaN) and no best checkpoint can be chosen; use an STS file whose scores "
                "vary (or, with eval_max_pairs, whose first pairs do), or validation: stsb"
            )
        return task

    def dev_scores(self, result: STSResult) -> dict[str, float]:
        return {"spearman": result.main, "pearson": result.pearson["all"]}

    def num_samples(self, loaded: STSTask) -> int:
        return loaded.num_pairs


FAMILY = STSFamily()
