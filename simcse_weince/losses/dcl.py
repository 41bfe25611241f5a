"""Decoupled contrastive loss (Yeh et al., ECCV 2022): the positive leaves the denominator; DCLW weights it."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.distributed import all_gather_with_grad
from simcse_weince.losses.layout import ScoreMatrix, row_logsumexp, weighted_hard_negatives


@dataclasses.dataclass(frozen=True)
class DCLConfig:
    """The settings of DCL: τ, and σ of DCLW's von Mises–Fisher weighting (``None``: plain DCL)."""

    temperature: float = temperature_field()
    dcl_sigma: float | None = field(
        default=None,
        metadata=checks.setting(
            checks.optional(checks.positive_finite, "None (plain DCL)"),
            "dcl: σ > 0 of DCLW's weight on the positive term, w_i = 2 − n·softmax_i(s_ii/σ) over the (global) "
            "batch's n anchors (the paper's σ = 0.5); None (default) is plain DCL.",
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)


class DCLLoss(ContrastiveLoss):
    r"""DCL: InfoNCE without the positive in the denominator, so that the gradient no longer shrinks as the
    positive already wins (the "negative-positive coupling" of Yeh et al.).

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i \Bigl(-\omega_i\,\frac{s_{i p(i)}}{\tau}
        + \log \sum_{j \in N(i)} e^{s_{ij}/\tau + w\,h_{ij}}\Bigr),\qquad
        \omega_i = 2 - n\,\frac{e^{s_{i p(i)}/\sigma}}{\sum_{k} e^{s_{k p(k)}/\sigma}}

    with ω ≡ 1 for DCL and the von Mises–Fisher weight for DCLW (``dcl_sigma`` = σ; the sum over the n anchors of
    the global batch, gathered with their gradients when candidates are; mean ω = 1). The paper's form: the
    authors' code (raminnakhli/Decoupled-Contrastive-Learning ``loss/dcl.py``) leaves out the factor n, which
    makes ω ≈ 2 for any batch. Their code sums the two directions of NT-Xent; here the mean over the 2N views, as
    NT-Xent's. An anchor left without a negative adds 0. SimCSE's w and ``h`` as in
    :class:`~simcse_weince.losses.infonce.InfoNCELoss`.

    Example:
        >>> loss = DCLLoss(temperature=0.05, dcl_sigma=0.5)  # DCLW
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "dcl"
    display_name = "DCL"
    Config = DCLConfig

    def __init__(self, temperature: float = 0.05, dcl_sigma: float | None = None, **common: Any) -> None:
        super().__init__(temperature, **common)
        self.config = DCLConfig(temperature, dcl_sigma)

    def positive_weights(self, positive_scores: torch.Tensor) -> torch.Tensor | float:
        """ω of the local anchors from their positives' cosines (A,): 1 for DCL; DCLW's over the global batch."""
        sigma = self.config.dcl_sigma
        if sigma is None:
            return 1.0
        every = all_gather_with_grad(positive_scores) if self.gather_across_devices else positive_scores
        log_share = positive_scores / sigma - torch.logsumexp(every / sigma, dim=0)
        return 2.0 - every.shape[0] * log_share.exp()

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        logits = weighted_hard_negatives(lay.scores / self.temperature, lay, self.hard_negative_weight)
        negatives = lay.negatives
        negative_term = row_logsumexp(logits, negatives)
        positive = lay.scores.gather(1, lay.positive_index[:, None]).squeeze(1)
        per_anchor = negative_term - self.positive_weights(positive) * positive / self.temperature
        return torch.where(negatives.any(dim=1), per_anchor, 0.0).mean()  # an anchor without a negative adds 0

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self.config)}

    @property
    def citation(self) -> str:
        return """@inproceedings{yeh2022decoupled,
  title={Decoupled Contrastive Learning},
  author={Yeh, Chun-Hsiao and Hong, Cheng-Yao and Hsu, Yen-Chi and Liu, Tyng-Luh and Chen, Yubei and LeCun, Yann},
  booktitle={European Conference on Computer Vision},
  year={2022}
}"""
