"""``SimCLRTrainer`` and its k-NN evaluator: two augmented views in one backbone pass, NT-Xent layout."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from simcse_weince.training.trainer import ContrastiveTrainer
from simcse_weince.vision.evaluation import extract_features, knn_accuracy


class KNNEvaluator:
    """``evaluator(model) -> {"knn200"}``: cosine k-NN (k = 200, weighted) top-1 accuracy × 100 of the
    backbone features, the probe train set as memory bank.

    Args:
        probe_train: the memory bank (``pixel_values``/``labels`` rows, plain transform).
        probe_test: the queries.
        num_classes: number of classes.
        batch_size: images per feature batch.
        device: where the model lives.
        show_progress_bar: feature-extraction progress bars.
    """

    def __init__(
        self,
        probe_train,
        probe_test,
        num_classes: int,
        batch_size: int = 512,
        device: str | torch.device = "cpu",
        show_progress_bar: bool = False,
        k: int = 200,
    ) -> None:
        self.probe_train = probe_train
        self.probe_test = probe_test
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.device = device
        self.show_progress_bar = show_progress_bar
        self.k = k

    @property
    def num_samples(self) -> int:
        """Query images per evaluation."""
        return len(self.probe_test)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        bs, dev, show = self.batch_size, self.device, self.show_progress_bar
        tr_f, tr_y = extract_features(model, self.probe_train, bs, dev, show)
        te_f, te_y = extract_features(model, self.probe_test, bs, dev, show)
        return {f"knn{self.k}": knn_accuracy(tr_f, tr_y, te_f, te_y, self.k, self.num_classes)}


class SimCLRTrainer(ContrastiveTrainer):
    """Fills in ``embed_views`` of :class:`ContrastiveTrainer`: the (B, 2, C, H, W) views go through the
    backbone and head in one pass of 2B images (the labels are not used in training). Model selection by a
    :class:`KNNEvaluator` (metric ``eval_knn200``).

    With ``gradient_cache_chunk_size = c`` the pass is cut into chunks of c images (2c views). The random
    augmentations are drawn by the dataset, so they are fixed in the batch; only in-model randomness (dropout,
    drop-path) is replayed. The ResNets' batch norm (and the projection head's) then normalises with chunk
    statistics, which a warning says; a ViT backbone is exact apart from the head's batch norm."""

    def embed_views(self, model: nn.Module, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
        return model(inputs["pixel_values"])
