"""InfoNCE / NT-Xent, the baseline that WEINCE reduces to at λ = 0."""

from __future__ import annotations

import dataclasses

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy


@dataclasses.dataclass(frozen=True)
class InfoNCEConfig:
    """The settings of InfoNCE: the temperature alone (the same field, default and check as WEINCE's)."""

    temperature: float = temperature_field()

    def __post_init__(self) -> None:
        checks.check_fields(self)


class InfoNCELoss(ContrastiveLoss):
    r"""InfoNCE on cosine similarities (SimCSE B×B layout, its supervised B×(1+k)B layout with hard
    negatives, or SimCLR / NT-Xent 2N layout).

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i -\log
        \frac{\exp(s_{i,p(i)}/\tau)}{\sum_{j \in \{p(i)\} \cup N(i)} \exp(s_{ij}/\tau + w\,h_{ij})}

    with ``s_ij`` the float32 cosine similarity, ``p(i)`` the positive and ``N(i)`` the negatives of
    anchor i (minus those removed by ``negative_mask``), and ``h_ij = 1`` exactly at anchor i's own hard
    negatives in the supervised layout (SimCSE's ``hard_negative_weight`` w; 0 elsewhere). With
    ``negatives`` of k columns this is SimCSE's supervised loss (k = 1 is its triplet recipe).

    References:
        Oord et al. 2018 (CPC); Chen et al. 2020 (SimCLR); Gao et al. 2021 (SimCSE).

    Example:
        >>> loss = InfoNCELoss(temperature=0.05)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
        >>> supervised = InfoNCELoss(temperature=0.05, hard_negative_weight=1.0)
        >>> value = supervised(torch.randn(8, 16), torch.randn(8, 16), negatives=torch.randn(1, 8, 16))
    """

    name = "infonce"
    display_name = "InfoNCE"
    Config = InfoNCEConfig

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        return masked_cross_entropy(lay.scores / self.temperature, lay, self.hard_negative_weight)

    @property
    def citation(self) -> str:
        return """@article{oord2018cpc,
  title={Representation Learning with Contrastive Predictive Coding},
  author={van den Oord, Aaron and Li, Yazhe and Vinyals, Oriol},
  journal={arXiv preprint arXiv:1807.03748},
  year={2018}
}"""
