"""InfoNCE with a learned temperature: the learned link with b ≡ 0, the fair baseline of the learned link."""

from __future__ import annotations

import dataclasses
from typing import Any

from simcse_weince.core import checks
from simcse_weince.losses.learned_link import LearnedLinkLoss
from simcse_weince.losses.link import a_max_field, check_start, temperature_field


@dataclasses.dataclass(frozen=True)
class LearnedTemperatureConfig:
    """The settings of InfoNCE with a learned temperature: the start τ and the cap on its inverse."""

    temperature: float = temperature_field()
    link_a_max: float | None = a_max_field()

    def __post_init__(self) -> None:
        checks.check_fields(self)
        check_start(self.temperature, self.link_a_max)


class LearnedTemperatureLoss(LearnedLinkLoss):
    r"""InfoNCE with a learned temperature: the learned link with b ≡ 0, logits ``a·s_ij``, a = e^α/τ ≤ a_max.

    The fair baseline of :class:`LearnedLinkLoss`: the same extra degree of freedom in a, no endpoint term. Step 0
    is InfoNCE at τ bit for bit.

    Example:
        >>> loss = LearnedTemperatureLoss(temperature=0.05)
        >>> value = loss(torch.randn(8, 16), torch.randn(8, 16))
    """

    name = "learned_temperature"
    display_name = "InfoNCE, learned τ"
    Config = LearnedTemperatureConfig
    diagnostic_keys = ("link_a", "link_a_at_cap")

    def __init__(self, temperature: float = 0.05, link_a_max: float | None = None, **common: Any) -> None:
        super().__init__(temperature, True, link_a_max, 0.0, 0.0, 1e-6, **common)

    def _make_config(self, temperature: float, learn_a: bool, a_max: float | None, *bounds: float) -> Any:
        return LearnedTemperatureConfig(temperature, a_max)

    @property
    def learns_b(self) -> bool:
        return False
