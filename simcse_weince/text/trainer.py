"""``SimCSETrainer`` and its STS-B dev evaluator.

The trainer fills in two hooks of :class:`~simcse_weince.training.trainer.ContrastiveTrainer`: ``negative_mask``
(identical sentences of the batch are not each other's negatives) and, for supervised rows, ``absent_negatives`` (a
row's hard negative that the data lack, known by its key: no one's candidate). The views come from the model's own
forward (the 2B rows in ``length_groups`` forwards of similar length). With ``gradient_cache_chunk_size = c`` that
forward is cut into chunks of c sentences (2c rows: both dropout views of each), replayed with the same dropout
masks; the duplicate mask stays over the whole batch (and over all processes when negatives are gathered).

Model selection uses a :class:`~simcse_weince.text.validation.ValidationEvaluator` (STS-B dev Spearman of the
current model with its inference pooler by default; a user's STS file or retrieval folder), plugged into the
Trainer's evaluation loop.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from simcse_weince.losses.duplicates import ABSENT_KEY, duplicate_mask, supervised_duplicate_mask
from simcse_weince.losses.layout import BatchKind, batch_kind
from simcse_weince.training.trainer import ContrastiveTrainer

logger = logging.getLogger(__name__)


class SimCSETrainer(ContrastiveTrainer):
    """SimCSE, unsupervised (batches of views) and supervised (rows of pairs or triplets), with a contrastive
    loss module (:class:`InfoNCELoss` or :class:`WeinceLoss`).

    Args:
        loss: the loss module (SimCSE layout); its ``gather_across_devices`` decides whether negatives and
            duplicate keys come from all processes.
        evaluator: usually a :class:`~simcse_weince.text.validation.ValidationEvaluator` (on STS-B dev: metric
            ``eval_stsb_spearman``).
        mask_duplicates: exclude identical sentences of a batch from each other's negatives (the collator's
            ``sentence_key`` column).
        *args, **kwargs: as for ``transformers.Trainer``.
    """

    def __init__(self, *args: Any, mask_duplicates: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mask_duplicates = mask_duplicates

    def absent_negatives(self, inputs: dict[str, Any]) -> torch.Tensor | None:
        keys = inputs.get("sentence_key")
        if keys is None or batch_kind(inputs) is not BatchKind.TRIPLETS:
            return None
        return (keys[:, 2:] == ABSENT_KEY).T  # (k, B): the collator's key of a row's absent hard negative

    def negative_mask(self, inputs: dict[str, Any]) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        keys = inputs.pop("sentence_key", None)
        if keys is None or not self.mask_duplicates:
            return None, {}
        gathered = self.contrastive_loss.gather_across_devices
        if batch_kind(inputs).rows:  # keys (B, n): anchor, positive, hard negatives (an absent one matches none)
            mask = supervised_duplicate_mask(keys[:, 0], keys[:, 1], list(keys[:, 2:].T), gathered)
            return mask, {"duplicates_masked_per_step": mask.sum().float()}
        mask = duplicate_mask(keys, gathered)
        # pairs masked beyond each anchor's own positive
        return mask, {"duplicates_masked_per_step": (mask.sum() - keys.numel()).float()}
