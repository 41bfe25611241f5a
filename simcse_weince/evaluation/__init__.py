"""STS (SentEval "all" protocol), SentEval transfer and retrieval evaluation (task families:
:mod:`simcse_weince.evaluation.families`).

The names below are imported on first use (PEP 562), so that a module that needs only the STS data or the
encoder protocol (training's STS-B dev evaluator) does not import the transfer classifiers' scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "EvaluationReport": "runner",
    "resolve_tasks": "runner",
    "run_evaluation": "runner",
    "write_report": "runner",
    "STSResult": "sts",
    "evaluate_sts": "sts",
    "STSTask": "sts_data",
    "load_sts_task": "sts_data",
    "TransferResult": "transfer",
    "evaluate_transfer": "transfer",
    "TransferTask": "transfer_data",
    "RetrievalResult": "retrieval",
    "evaluate_retrieval": "retrieval",
    "RetrievalTask": "retrieval_data",
    "load_beir_folder": "retrieval_data",
    "TaskFamily": "family",
    "DevSet": "family",
    "FAMILIES": "families",
    "load_transfer_task": "transfer_data",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
