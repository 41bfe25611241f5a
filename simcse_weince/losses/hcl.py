"""Hard-negative contrastive learning (Robinson et al., ICLR 2021), debiased as Chuang et al. (NeurIPS 2020)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

import torch
import torch.nn.functional as F

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.layout import ScoreMatrix, row_logsumexp, weighted_hard_negatives


@dataclasses.dataclass(frozen=True)
class HCLConfig:
    """The settings of HCL: τ, the concentration β of the importance weights, the positive prior τ⁺."""

    temperature: float = temperature_field()
    hcl_beta: float = field(
        default=1.0,
        metadata=checks.setting(
            checks.non_negative(),
            "hcl: β ≥ 0, the concentration of the importance weights exp(β·s/τ) on hard negatives (0: uniform).",
        ),
    )
    hcl_tau_plus: float = field(
        default=0.1,
        metadata=checks.setting(
            checks.within(0.0, 1.0, open_high=True),
            "hcl: τ⁺ in [0, 1), the prior probability that a negative is of the anchor's class (debiasing; 0: none).",
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)


class HCLLoss(ContrastiveLoss):
    r"""HCL: InfoNCE whose negative sum is an importance-weighted, debiased estimate of the true negatives' sum.

    For anchor i with logits ``ℓ_ij = s_ij/τ + w·h_ij`` over its N negatives ``N(i)`` and positive ``P = e^{ℓ_ip(i)}``:

    .. math::
        R_i = N\,\frac{\sum_{j \in N(i)} e^{(1+\beta)\ell_{ij}}}{\sum_{j \in N(i)} e^{\beta \ell_{ij}}},\qquad
        N_g = \max\Bigl(\frac{R_i - \tau^+ N P}{1 - \tau^+},\; N e^{-1/\tau}\Bigr),\qquad
        \mathcal{L} = \frac{1}{A}\sum_i -\log \frac{P}{P + N_g}

    (``R_i`` is ``(imp·neg).sum() / imp.mean()`` of the authors' ``criterion``, joshr17/HCL ``image/main.py``, with
    ``imp = neg^β``; the floor is theirs). β = 0 and τ⁺ = 0 is InfoNCE. Computed in log space (``logsumexp``),
    so that 1/τ = 20 does not overflow. N counts each anchor's negatives after masking; an anchor left without a
    negative adds 0, as in InfoNCE. SimCSE's w and ``h`` as in :class:`~simcse_weince.losses.infonce.InfoNCELoss`.

    Example:
        >>> loss = HCLLoss(temperature=0.05, hcl_beta=1.0, hcl_tau_plus=0.1)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "hcl"
    display_name = "HCL"
    Config = HCLConfig

    def __init__(self, temperature: float = 0.05, hcl_beta: float = 1.0, hcl_tau_plus: float = 0.1, **common: Any):
        super().__init__(temperature, **common)
        self.config = HCLConfig(temperature, hcl_beta, hcl_tau_plus)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        beta, tau_plus = self.config.hcl_beta, self.config.hcl_tau_plus
        logits = weighted_hard_negatives(lay.scores / self.temperature, lay, self.hard_negative_weight)
        negatives = lay.negatives
        count = negatives.sum(dim=1)
        log_n = count.clamp(min=1).to(logits.dtype).log()
        log_r = log_n + row_logsumexp((1 + beta) * logits, negatives) - row_logsumexp(beta * logits, negatives)
        log_p = logits.gather(1, lay.positive_index[:, None]).squeeze(1)
        floor = log_n - 1.0 / self.temperature
        if tau_plus:
            # log(R − τ⁺·N·P) = log R + log(1 − e^d), d = log(τ⁺·N·P / R); below the floor when d ≥ 0
            d = math.log(tau_plus) + log_n + log_p - log_r
            debiased = log_r + torch.log1p(-torch.exp(d.clamp(max=-1e-7))) - math.log1p(-tau_plus)
            log_ng = torch.where(d < 0, torch.maximum(debiased, floor), floor)
        else:
            log_ng = torch.maximum(log_r, floor)
        per_anchor = F.softplus(log_ng - log_p)  # −log(P / (P + N_g))
        return torch.where(count > 0, per_anchor, 0.0).mean()  # an anchor without a negative adds 0

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self.config)}

    @property
    def citation(self) -> str:
        return """@inproceedings{robinson2021hard,
  title={Contrastive Learning with Hard Negative Samples},
  author={Robinson, Joshua and Chuang, Ching-Yao and Sra, Suvrit and Jegelka, Stefanie},
  booktitle={International Conference on Learning Representations},
  year={2021}
}"""
