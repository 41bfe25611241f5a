"""Adapter: WEINCE / InfoNCE as a sentence-transformers loss (``loss=`` of ``SentenceTransformerTrainer``).

The sentence-transformers contract: constructed with the model, ``forward(sentence_features, labels)``
returning a scalar, ``get_config_dict()`` and ``citation`` for the model card. The data set has two text
columns (anchor, positive); for unsupervised SimCSE both hold the same sentence and dropout makes the views.
The two columns are embedded in one merged forward where sentence-transformers can merge them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.duplicates import duplicate_mask, sentence_keys
from simcse_weince.losses.weince import WeinceLoss


def _embed(model: nn.Module, features: list[dict[str, Any]]) -> list[torch.Tensor]:
    try:
        from sentence_transformers.base.losses.merged_forward import embed_columns
    except ImportError:  # older sentence-transformers: one forward per column
        return [model(f)["sentence_embedding"] for f in features]
    return embed_columns(model, features, separate_first=False)


class SentenceTransformerContrastiveLoss(nn.Module):
    """Wrap a :class:`ContrastiveLoss` (SimCSE layout) for ``SentenceTransformerTrainer``.

    Args:
        model: the ``SentenceTransformer`` being trained.
        loss: the embedding-level loss (default: ``WeinceLoss(**loss_kwargs)``).
        mask_duplicates: identical anchor sentences in a batch are not each other's negatives.
        **loss_kwargs: arguments of :class:`WeinceLoss` when ``loss`` is not given.

    Raises:
        ValueError: if the data set does not have exactly two text columns.

    Example:
        >>> loss = SentenceTransformerContrastiveLoss(model, temperature=0.05, beta_mode="ols")
        >>> trainer = SentenceTransformerTrainer(model=model, train_dataset=ds, loss=loss)
    """

    def __init__(
        self, model: nn.Module, loss: ContrastiveLoss | None = None, mask_duplicates: bool = True, **loss_kwargs: Any
    ) -> None:
        super().__init__()
        if loss is not None and loss_kwargs:
            raise ValueError(f"pass either a loss module or WeinceLoss keyword arguments, not both: {loss_kwargs}")
        self.model = model
        self.loss = loss if loss is not None else WeinceLoss(**loss_kwargs)
        if self.loss.layout != "simcse":
            raise ValueError(f"the sentence-transformers adapter needs layout='simcse', got {self.loss.layout!r}")
        self.mask_duplicates = mask_duplicates

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None):
        features = list(sentence_features)
        if len(features) != 2:
            raise ValueError(
                f"expected 2 text columns (anchor, positive), got {len(features)}; for unsupervised SimCSE put "
                "the same sentence in both columns"
            )
        anchors, positives = _embed(self.model, features)
        mask = None
        if self.mask_duplicates and "input_ids" in features[0]:
            f = features[0]
            keys = sentence_keys(f["input_ids"], f.get("attention_mask"))
            mask = duplicate_mask(keys, self.loss.gather_across_devices)
        return self.loss(anchors, positives, negative_mask=mask)

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "loss": type(self.loss).__name__,
            "mask_duplicates": self.mask_duplicates,
            **self.loss.get_config_dict(),
        }

    @property
    def citation(self) -> str:
        return self.loss.citation
