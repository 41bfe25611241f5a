r"""Temperature-free InfoNCE (Kim & Kim, arXiv 2501.17683): the logit 2·artanh(s) in place of s/τ."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy
from simcse_weince.losses.link import eps_field


@dataclasses.dataclass(frozen=True)
class ArctanhConfig:
    """The settings of temperature-free InfoNCE: the clamp of the scores away from ±1, nothing else."""

    eps: float = eps_field()

    def __post_init__(self) -> None:
        checks.check_fields(self)


def arctanh_logits(scores: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    r"""``2·artanh(s) = log(1 + s) − log(1 − s)`` with s clamped to [−1 + ε, 1 − ε] (finite at duplicates).

    The logit of the probability p = (1 + s)/2 the paper reads a cosine as. Near s = 1 it is
    ``log 2 + u − (1 − s)/2 + …`` with u = −log(1 − s): the endpoint logit with b = 1, plus a slope a = ½ in s to
    first order, a fixed member of the identified (a, b) family (``docs/algorithm.md`` §6).
    """
    s = scores.clamp(min=-1.0 + eps, max=1.0 - eps)
    return torch.log1p(s) - torch.log1p(-s)


class ArctanhLoss(ContrastiveLoss):
    r"""Temperature-free InfoNCE: cross-entropy of the positive under the logits ``2·artanh(s_ij)``, no τ.

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i -\log
        \frac{e^{2\,\mathrm{artanh}(s_{i p(i)})}}{\sum_j e^{2\,\mathrm{artanh}(s_{ij}) + w h_{ij}}}
        = \frac{1}{A}\sum_i -\log \frac{\frac{1+s_{ip(i)}}{1-s_{ip(i)}}}{\sum_j \frac{1+s_{ij}}{1-s_{ij}}\,e^{w h_{ij}}}

    (candidates, SimCSE's w and ``h`` as in :class:`InfoNCELoss`). Its ``temperature`` is 1 and enters nothing
    (a top-M term added to it reads that 1); ``--temperature`` is not read.

    References:
        B. J. Kim and S. W. Kim, "Temperature-Free Loss Function for Contrastive Learning", arXiv 2501.17683 (2025).

    Example:
        >>> loss = ArctanhLoss()
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "arctanh"
    display_name = "Temperature-free (artanh)"
    Config = ArctanhConfig

    def __init__(self, eps: float = 1e-6, **common: Any) -> None:
        super().__init__(1.0, **common)
        self._config = ArctanhConfig(eps)

    @property
    def config(self) -> ArctanhConfig:
        return self._config

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        return masked_cross_entropy(arctanh_logits(lay.scores, self._config.eps), lay, self.hard_negative_weight)

    def search_logits(self, scores: torch.Tensor) -> torch.Tensor:
        return arctanh_logits(scores, self._config.eps)

    def get_config_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in super().get_config_dict().items() if k != "temperature"}
        return {**out, "eps": self._config.eps}

    @property
    def citation(self) -> str:
        return """@article{kim2025temperaturefree,
  title={Temperature-Free Loss Function for Contrastive Learning},
  author={Kim, Bum Jun and Kim, Sang Woo},
  journal={arXiv preprint arXiv:2501.17683},
  year={2025}
}"""
