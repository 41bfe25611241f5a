"""Focal-InfoNCE (Hou & Li, Findings of EMNLP 2023): the positive's logit s²/τ, a negative's (s + m)·s/τ."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy


@dataclasses.dataclass(frozen=True)
class FocalInfoNCEConfig:
    """The settings of Focal-InfoNCE: τ and the hardness margin m."""

    temperature: float = temperature_field()
    focal_margin: float = field(
        default=0.3,
        metadata=checks.setting(
            checks.within(-1.0, 10.0),
            "focal_infonce: the margin m of a negative's logit (s + m)·s/τ, in [-1, 10] (the authors' m = 0.3).",
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)


class FocalInfoNCELoss(ContrastiveLoss):
    r"""Focal-InfoNCE: InfoNCE whose logits are scaled by the similarity itself, so that a hard negative
    (large s) weighs more and an easy one less, and an easy positive less than a hard one.

    .. math::
        \ell_{ij} = \begin{cases} s_{ij}^2/\tau & j = p(i) \\ (s_{ij} + m)\,s_{ij}/\tau + w\,h_{ij} & \text{otherwise}
        \end{cases},\qquad
        \mathcal{L} = \frac{1}{A}\sum_i -\log \frac{e^{\ell_{i p(i)}}}{\sum_j e^{\ell_{ij}}}

    (the authors' ``sp_logits``, puerrrr/Focal-InfoNCE ``focalNCE/models.py``, on cosines; SimCSE's w and ``h``
    as in :class:`~simcse_weince.losses.infonce.InfoNCELoss`, after the scaling). The authors apply it to
    unsupervised SimCSE's B×B scores; here every negative of every layout (hard negatives and NT-Xent views
    included) takes the negatives' form.

    Example:
        >>> loss = FocalInfoNCELoss(temperature=0.05, focal_margin=0.3)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "focal_infonce"
    display_name = "Focal-InfoNCE"
    Config = FocalInfoNCEConfig

    def __init__(self, temperature: float = 0.05, focal_margin: float = 0.3, **common: Any) -> None:
        super().__init__(temperature, **common)
        self.config = FocalInfoNCEConfig(temperature, focal_margin)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        s = lay.scores
        factor = torch.where(lay.positive_mask, s, s + self.config.focal_margin)
        return masked_cross_entropy(factor * s / self.temperature, lay, self.hard_negative_weight)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self.config)}

    @property
    def citation(self) -> str:
        return """@inproceedings{hou2023focal,
  title={Improving Contrastive Learning of Sentence Embeddings with Focal-InfoNCE},
  author={Hou, Pengyue and Li, Xingyu},
  booktitle={Findings of the Association for Computational Linguistics: EMNLP 2023},
  year={2023}
}"""
