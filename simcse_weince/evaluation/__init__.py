"""STS (SentEval "all" protocol) and SentEval transfer evaluation."""

from simcse_weince.evaluation.runner import EvaluationReport, resolve_tasks, run_evaluation, write_report
from simcse_weince.evaluation.sts import STSResult, evaluate_sts
from simcse_weince.evaluation.sts_data import STSTask, load_sts_task
from simcse_weince.evaluation.transfer import TransferResult, evaluate_transfer
from simcse_weince.evaluation.transfer_data import TransferTask, load_transfer_task

__all__ = [
    "EvaluationReport",
    "STSResult",
    "STSTask",
    "TransferResult",
    "TransferTask",
    "evaluate_sts",
    "evaluate_transfer",
    "load_sts_task",
    "load_transfer_task",
    "resolve_tasks",
    "run_evaluation",
    "write_report",
]
