"""Adapter: WEINCE / InfoNCE as a sentence-transformers loss (``loss=`` of ``SentenceTransformerTrainer``).

The sentence-transformers contract: constructed with the model, ``forward(sentence_features, labels)``
returning a scalar, ``get_config_dict()`` and ``citation`` for the model card. The data set has text columns
(anchor, positive, negative…), as for sentence-transformers' ``MultipleNegativesRankingLoss``: two columns
are (anchor, positive) pairs (for unsupervised SimCSE both hold the same sentence and dropout makes the
views); each further column is one hard-negative column of the supervised layout (``docs/algorithm.md`` §1,
B×(1+k)B scores).
The columns are embedded in one merged forward where sentence-transformers can merge them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from simcse_weince.losses import LOSSES, ContrastiveLoss, make_loss
from simcse_weince.losses.duplicates import sentence_keys, supervised_duplicate_mask


def _embed(model: nn.Module, features: list[dict[str, Any]]) -> list[torch.Tensor]:
    try:
        from sentence_transformers.base.losses.merged_forward import embed_columns
    except ImportError:  # older sentence-transformers: one forward per column
        return [model(f)["sentence_embedding"] for f in features]
    return embed_columns(model, features, separate_first=False)


class SentenceTransformerContrastiveLoss(nn.Module):
    """Wrap a :class:`ContrastiveLoss` (SimCSE layout) for ``SentenceTransformerTrainer``.

    Columns (anchor, positive) score B×B; (anchor, positive, negative_1, …, negative_k) score the supervised
    B×(1+k)B layout, with the loss's ``hard_negative_weight`` on each anchor's own hard negatives.

    Args:
        model: the ``SentenceTransformer`` being trained.
        loss: the embedding-level loss module, or the name of a registered loss
            (:data:`~simcse_weince.losses.LOSSES`: ``"weince"``, the default, ``"infonce"``,
            ``"hardness_infonce"``, ...) built with ``loss_kwargs``.
        mask_duplicates: a candidate (in any column) that is the anchor's sentence or its positive's
            sentence is not a negative of that anchor
            (:func:`~simcse_weince.losses.duplicates.supervised_duplicate_mask`).
        **loss_kwargs: arguments of the named loss's class (``loss`` a name), and ``topm=TopMConfig(...)`` for the
            top-M terms (:func:`~simcse_weince.losses.make_loss`).

    Raises:
        ValueError: if the data set has fewer than two text columns.

    Example:
        >>> loss = SentenceTransformerContrastiveLoss(model, temperature=0.05, beta_mode="ols")
        >>> trainer = SentenceTransformerTrainer(model=model, train_dataset=ds, loss=loss)
    """

    def __init__(
        self,
        model: nn.Module,
        loss: ContrastiveLoss | str | None = None,
        mask_duplicates: bool = True,
        **loss_kwargs: Any,
    ) -> None:
        super().__init__()
        if isinstance(loss, nn.Module) and loss_kwargs:
            raise ValueError(f"pass either a loss module or its keyword arguments, not both: {loss_kwargs}")
        self.model = model
        self.loss = loss if isinstance(loss, nn.Module) else make_loss(loss or "weince", **loss_kwargs)
        if self.loss.layout != "simcse":
            raise ValueError(f"the sentence-transformers adapter needs layout='simcse', got {self.loss.layout!r}")
        self.mask_duplicates = mask_duplicates

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None):
        features = list(sentence_features)
        if len(features) < 2:
            raise ValueError(
                f"expected at least 2 text columns (anchor, positive, negative…), got {len(features)}; for "
                "unsupervised SimCSE put the same sentence in both columns"
            )
        anchors, positives, *negatives = _embed(self.model, features)
        mask = None
        if self.mask_duplicates and all("input_ids" in f for f in features):
            keys = [sentence_keys(f["input_ids"], f.get("attention_mask")) for f in features]
            mask = supervised_duplicate_mask(keys[0], keys[1], keys[2:], self.loss.gather_across_devices)
        return self.loss(anchors, positives, negative_mask=mask, negatives=negatives or None)

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "loss": LOSSES.get(self.loss.name, type(self.loss)).__name__,  # the class, also under a wrapper
            "mask_duplicates": self.mask_duplicates,
            **self.loss.get_config_dict(),
        }

    @property
    def citation(self) -> str:
        return self.loss.citation
