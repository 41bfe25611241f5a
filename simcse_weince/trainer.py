"""``SimCSETrainer``: the Hugging Face ``Trainer`` with the contrastive loss and STS-B dev evaluation.

Only hooks are overridden — ``compute_loss`` (two views from one forward, duplicate masking, the loss) and
``evaluate`` (STS-B dev Spearman for model selection); the diagnostics logging comes from
:class:`~simcse_weince.trainer_base.ContrastiveTrainer`'s ``log`` hook. The training loop, checkpointing,
resuming, mixed precision and multi-process training are the Trainer's own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from simcse_weince.encoding import SimCSEEncoder
from simcse_weince.evaluation.sts import evaluate_sts
from simcse_weince.evaluation.sts_data import STSSubset, STSTask
from simcse_weince.losses.distributed import all_gather_no_grad
from simcse_weince.trainer_base import ContrastiveTrainer

logger = logging.getLogger(__name__)


def duplicate_mask(keys: torch.Tensor, candidate_keys: torch.Tensor) -> torch.Tensor:
    """(B,), (C,) sentence keys -> (B, C) bool, True where anchor and candidate are the same sentence."""
    return keys[:, None] == candidate_keys[None, :]


def as_sts_task(data) -> STSTask:
    """An :class:`STSTask` from itself or from a dataset with ``sentence1``, ``sentence2``, ``score``."""
    if isinstance(data, STSTask):
        return data
    if data is None:
        raise ValueError("SimCSETrainer.evaluate needs eval_dataset: the STS-B dev pairs")
    missing = {"sentence1", "sentence2", "score"} - set(data.column_names)
    if missing:
        raise ValueError(f"eval_dataset needs columns sentence1, sentence2, score; missing {sorted(missing)}")
    return STSTask(
        "STSBenchmark",
        [STSSubset("dev", list(data["sentence1"]), list(data["sentence2"]), [float(x) for x in data["score"]])],
    )


class SimCSETrainer(ContrastiveTrainer):
    """Unsupervised SimCSE with a contrastive loss module (:class:`InfoNCELoss` or :class:`WeinceLoss`).

    Args:
        loss: the loss module (SimCSE layout); its ``gather_across_devices`` decides whether negatives and
            duplicate keys come from all processes.
        eval_dataset: STS-B dev pairs scored by :meth:`evaluate` (metric ``eval_stsb_spearman``): an
            :class:`STSTask`, or a ``datasets.Dataset`` with ``sentence1``, ``sentence2``, ``score`` columns.
        mask_duplicates: exclude identical sentences of a batch from each other's negatives.
        eval_batch_size: sentences per encoding batch in evaluation.
        *args, **kwargs: as for ``transformers.Trainer``.
    """

    def __init__(self, *args: Any, mask_duplicates: bool = True, eval_batch_size: int = 128, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mask_duplicates = mask_duplicates
        self.sts_eval_batch_size = eval_batch_size

    # ---- training ---------------------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        keys = inputs.pop("sentence_key", None)
        views = model(**inputs)  # one forward of 2B rows -> anchors, positives (B, H)
        negative_mask = None
        extra = {}
        if self.mask_duplicates and keys is not None:
            cand = all_gather_no_grad(keys) if self.contrastive_loss.gather_across_devices else keys
            negative_mask = duplicate_mask(keys, cand)
            # pairs masked beyond each anchor's own positive
            extra["duplicates_masked_per_step"] = (negative_mask.sum() - keys.numel()).float()
        loss = self.contrastive_loss(views["anchors"], views["positives"], negative_mask=negative_mask)
        if model.training:
            self.accumulate_diagnostics(extra)
        return (loss, views) if return_outputs else loss

    # ---- evaluation -------------------------------------------------------------------------------------
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        """STS-B dev Spearman (× 100) of the current model with its inference pooler."""
        task = as_sts_task(self.eval_dataset if eval_dataset is None else eval_dataset)
        model = self.accelerator.unwrap_model(self.model)
        tok = self.processing_class
        encoder = SimCSEEncoder(
            model,
            tok,
            batch_size=self.sts_eval_batch_size,
            device=self.args.device,
            show_progress_bar=not self.args.disable_tqdm and self.is_world_process_zero(),
        )
        t0 = time.perf_counter()
        with self.compute_loss_context_manager():
            result = evaluate_sts(encoder, task)
        metrics = {
            f"{metric_key_prefix}_stsb_spearman": result.main,
            f"{metric_key_prefix}_stsb_pearson": result.pearson["all"],
            f"{metric_key_prefix}_runtime": time.perf_counter() - t0,
        }
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
