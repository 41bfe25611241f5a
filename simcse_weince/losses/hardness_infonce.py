"""Hardness-weighted InfoNCE: sentence-transformers' ``MultipleNegativesRankingLoss(hardness_mode=...)`` (since 5.3)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any, Literal

import torch

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss, temperature_field
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy

HardnessMode = Literal["in_batch_negatives", "hard_negatives", "all_negatives"]
HARDNESS_MODES: tuple[str, ...] = ("in_batch_negatives", "hard_negatives", "all_negatives")


@dataclasses.dataclass(frozen=True)
class HardnessInfoNCEConfig:
    """The settings of hardness-weighted InfoNCE: τ, which negatives are weighted, and the strength α."""

    temperature: float = temperature_field()
    hardness_mode: HardnessMode = field(
        default="in_batch_negatives",
        metadata=checks.setting(
            checks.one_of(HARDNESS_MODES),
            "hardness_infonce: which negatives get α·stop_grad(s) on their logit: in_batch_negatives (every "
            "candidate but the anchor's own positive and own hard negatives; LLaVE, α = 9), hard_negatives (the "
            "anchor's own hard negatives only; EmbeddingGemma, α = 5), all_negatives (every negative).",
        ),
    )
    hardness_strength: float = field(
        default=9.0,
        metadata=checks.setting(
            checks.non_negative(),
            "hardness_infonce: α ≥ 0, the weight of stop_grad(s) added to the chosen negatives' logits (0 is InfoNCE).",
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)


class HardnessInfoNCELoss(ContrastiveLoss):
    r"""InfoNCE with harder negatives weighted up by their own (stop-gradient) similarity, as
    sentence-transformers' ``MultipleNegativesRankingLoss(hardness_mode=..., hardness_strength=α)``.

    .. math::
        \mathcal{L} = \frac{1}{A}\sum_i -\log
        \frac{e^{s_{i p(i)}/\tau}}{\sum_{j} e^{s_{ij}/\tau + \alpha\,\mathrm{sg}(s_{ij})\,m_{ij} + w\,h_{ij}}}

    with ``m_ij = 1`` at the negatives of ``hardness_mode`` (``in_batch_negatives``: every candidate that is not
    anchor i's own positive or own hard negative, Lan et al. 2025 (LLaVE), eq. 5; ``hard_negatives``: anchor i's
    own hard negatives, Schechter Vera et al. 2025 (EmbeddingGemma); ``all_negatives``: every negative), 0
    elsewhere; the term is not divided by τ. Its weight on negative j of the softmax is
    ``e^{α s_ij}``: an importance weight that grows with the negative's hardness. α = 0 is InfoNCE. SimCSE's w and
    ``h`` as in :class:`~simcse_weince.losses.infonce.InfoNCELoss`.

    NT-Xent layout (SimCLR): there are no hard negatives, so ``in_batch_negatives`` and ``all_negatives`` weight
    every negative and ``hard_negatives`` is refused (it would weight none). In the SimCSE layout without hard
    negatives (pairs), ``hard_negatives`` weights none, as in sentence-transformers.

    Example:
        >>> loss = HardnessInfoNCELoss(temperature=0.05, hardness_mode="hard_negatives", hardness_strength=5.0)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16), negatives=torch.randn(1, 8, 16))
    """

    name = "hardness_infonce"
    display_name = "Hardness-weighted InfoNCE"
    Config = HardnessInfoNCEConfig

    def __init__(
        self,
        temperature: float = 0.05,
        hardness_mode: HardnessMode = "in_batch_negatives",
        hardness_strength: float = 9.0,
        **common: Any,
    ) -> None:
        super().__init__(temperature, **common)
        self.config = HardnessInfoNCEConfig(temperature, hardness_mode, hardness_strength)
        if hardness_mode == "hard_negatives" and self.layout == "ntxent":
            raise ValueError(
                "hardness_mode 'hard_negatives' needs hard negatives; the 'ntxent' layout has none (use "
                "in_batch_negatives or all_negatives)"
            )

    def weighted(self, lay: ScoreMatrix) -> torch.Tensor:
        """(A, C) bool: the candidates whose logit gets α·sg(s) (``m`` above)."""
        own = lay.positive_mask
        if lay.hard_negative_mask is None:
            return ~own if self.config.hardness_mode != "hard_negatives" else torch.zeros_like(own)
        if self.config.hardness_mode == "hard_negatives":
            return lay.hard_negative_mask
        if self.config.hardness_mode == "in_batch_negatives":
            own = own | lay.hard_negative_mask
        return ~own

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        logits = lay.scores / self.temperature
        if self.config.hardness_strength:
            penalty = self.config.hardness_strength * lay.scores.detach()
            logits = logits + penalty.masked_fill(~self.weighted(lay), 0.0)
        return masked_cross_entropy(logits, lay, self.hard_negative_weight)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **dataclasses.asdict(self.config)}

    @property
    def citation(self) -> str:
        return """@article{lan2025llave,
  title={LLaVE: Large Language and Vision Embedding Models with Hardness-Weighted Contrastive Learning},
  author={Lan, Zhibin and Niu, Liqiang and Meng, Fandong and Zhou, Jie and Su, Jinsong},
  journal={arXiv preprint arXiv:2503.04812},
  year={2025}
}"""
