"""SigLIP's pairwise sigmoid loss (Zhai et al., ICCV 2023), with its learned scale t and bias b."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.layout import ScoreMatrix, weighted_hard_negatives


@dataclasses.dataclass(frozen=True)
class SigmoidConfig:
    """The settings of the sigmoid loss: the start of its scale t = 1/τ and of its bias b (the paper's 10, −10)."""

    temperature: float = temperature_field(
        0.1,
        checks.positive_finite,
        "τ > 0 dividing the cosine similarities (the sigmoid loss: its learned scale starts at t = 1/τ).",
    )
    sigmoid_bias: float = field(
        default=-10.0,
        metadata=checks.setting(
            checks.finite, "sigmoid: the start of the learned bias b of the logit t·s + b (SigLIP's −10)."
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)


class SigmoidLoss(ContrastiveLoss):
    r"""SigLIP's sigmoid loss: every (anchor, candidate) pair is its own binary classification, positive or not,
    with no softmax over the batch.

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i \sum_{j} \log\bigl(1 + e^{-y_{ij}\,(t\,s_{ij} + b + w\,h_{ij})}\bigr),
        \qquad y_{ij} = \begin{cases} +1 & j = p(i) \\ -1 & \text{otherwise} \end{cases}

    over each anchor's candidates (its positive and negatives; masked and excluded entries have no term). t = e^θ
    and b are parameters of the loss (θ starts at log(1/τ), b at ``sigmoid_bias``; the paper's t = 10, b = −10, so
    that the many negatives do not dominate the first steps), trained in their own optimizer group
    (``--loss_learning_rate``) and, with several processes, averaged like the encoder's gradients. The sum over j
    and the mean over the anchors is the paper's normalisation (by the batch size). SimCSE's w and ``h`` as in
    :class:`~simcse_weince.losses.infonce.InfoNCELoss`, on the logit.

    Example:
        >>> loss = SigmoidLoss(temperature=0.1, sigmoid_bias=-10.0)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
        >>> loss.learned_values()  # {'sigmoid_t': 10.0, 'sigmoid_b': -10.0} before any step
    """

    name = "sigmoid"
    display_name = "Sigmoid (SigLIP)"
    Config = SigmoidConfig
    diagnostic_keys = ("sigmoid_t", "sigmoid_b")

    def __init__(self, temperature: float = 0.1, sigmoid_bias: float = -10.0, **common: Any) -> None:
        super().__init__(temperature, **common)
        self.config = SigmoidConfig(temperature, sigmoid_bias)
        self.log_t = nn.Parameter(torch.tensor(math.log(1.0 / temperature)))
        self.b = nn.Parameter(torch.tensor(float(sigmoid_bias)))

    def learned_values(self) -> dict[str, float]:
        return {"sigmoid_t": float(self.log_t.detach().exp()), "sigmoid_b": float(self.b.detach())}

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        t = self.log_t.exp()
        logits = weighted_hard_negatives(t * lay.scores + self.b, lay, self.hard_negative_weight)
        signs = torch.where(lay.positive_mask, 1.0, -1.0)
        terms = F.softplus(-signs * logits).masked_fill(lay.excluded, 0.0)
        self.last_diagnostics = {"sigmoid_t": t.detach(), "sigmoid_b": self.b.detach().clone()}
        return terms.sum(dim=1).mean()

    def search_logits(self, scores: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.log_t.exp() * scores + self.b

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self.config)}

    @property
    def citation(self) -> str:
        return """@inproceedings{zhai2023sigmoid,
  title={Sigmoid Loss for Language Image Pre-Training},
  author={Zhai, Xiaohua and Mustafa, Basil and Kolesnikov, Alexander and Beyer, Lucas},
  booktitle={Proceedings of the IEEE/CVF International Conference on Computer Vision},
  pages={11975--11986},
  year={2023}
}"""
