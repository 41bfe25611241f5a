"""Shared constructor arguments and validation of the contrastive losses."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from simcse_weince.losses.layout import Layout, ScoreMatrix, score_matrix, validate_layout


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


class ContrastiveLoss(nn.Module):
    """Base of :class:`InfoNCELoss` and :class:`WeinceLoss`: temperature, layout and device gathering.

    Args:
        temperature: τ > 0 dividing the cosine similarities.
        layout: ``"simcse"`` (B×B, text) or ``"ntxent"`` (2N views, SimCLR).
        gather_across_devices: score local anchors against the candidates of all processes.
    """

    def __init__(
        self, temperature: float = 0.05, layout: Layout = "simcse", gather_across_devices: bool = False
    ) -> None:
        super().__init__()
        check_positive("temperature", temperature)
        validate_layout(layout)
        self._temperature = float(temperature)
        self.layout = layout
        self.gather_across_devices = bool(gather_across_devices)
        # Detached per-batch diagnostics of the last forward (tensors; reading them is the caller's sync).
        self.last_diagnostics: dict[str, torch.Tensor] = {}

    @property
    def temperature(self) -> float:
        """τ, fixed at construction (build a new loss to change it)."""
        return self._temperature

    def forward(
        self,
        anchors: torch.Tensor,
        positives: torch.Tensor,
        negative_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Scalar loss of a batch.

        Args:
            anchors: (B, D) embeddings of view 1 (any float dtype; scored in float32, also under autocast).
            positives: (B, D) embeddings of view 2; row i is the positive of anchor i.
            negative_mask: optional (A, C) bool, True where a candidate is a known false negative.

        Returns:
            0-d float32 tensor.

        Raises:
            ValueError: mismatched shapes, fewer than 2 rows in the (global) batch, NaN or Inf embeddings.
        """
        lay = score_matrix(anchors, positives, self.layout, negative_mask, self.gather_across_devices)
        with torch.autocast(lay.scores.device.type, enabled=False):
            return self.loss_from_scores(lay)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        """The loss from a batch's float32 :class:`ScoreMatrix` (subclasses)."""
        raise NotImplementedError

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "layout": self.layout,
            "gather_across_devices": self.gather_across_devices,
        }

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config_dict().items())
