"""Shared constructor arguments and validation of the contrastive losses."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from simcse_weince.losses.layout import BatchKind, Layout, Negatives, ScoreMatrix, score_matrix, validate_layout
from simcse_weince.losses.topm import TopMConfig, TopMTerms


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def check_hard_negative_weight(value: float, layout: str | None = None) -> None:
    """``ValueError`` unless ``value`` is a finite number, and 0 for a layout without hard negatives.

    The one check of SimCSE's ``hard_negative_weight``: the losses call it at construction with their layout, the
    training arguments at parse time with ``layout=None`` (not known yet: the finiteness alone).
    """
    try:
        finite = math.isfinite(float(value))
    except (TypeError, ValueError):
        finite = False
    has_negatives = layout in (None, "simcse")
    if not finite or (value != 0 and not has_negatives):
        expected = "a finite number" if has_negatives else f"0 for layout {layout!r} (it has no hard negatives)"
        raise ValueError(f"hard_negative_weight must be {expected}, got {value!r}")


class ContrastiveLoss(nn.Module):
    r"""Base of :class:`InfoNCELoss` and :class:`WeinceLoss`: temperature, layout, hard-negative weight and
    device gathering.

    Supervised layout: ``forward(anchors, positives, negatives=...)`` scores each anchor z_i against the
    B×(1+k)B candidates ``[z⁺_1 … z⁺_B | z⁻_{·,1} | … | z⁻_{·,k}]`` (``docs/algorithm.md`` §1; see
    :mod:`~simcse_weince.losses.layout`). SimCSE's ``hard_negative_weight`` w is added to the *final* logit
    of anchor i's own hard negatives (after WEINCE's blend), as in SimCSE's supervised objective

    .. math::
        -\log \frac{e^{s(h_i, h^+_i)/\tau}}
        {\sum_j e^{s(h_i, h^+_j)/\tau} + \sum_{c}\sum_j e^{s(h_i, h^-_{j,c})/\tau + w\,[j = i]}}

    WEINCE's statistics use the unweighted scores.

    Args:
        temperature: τ > 0 dividing the cosine similarities.
        layout: ``"simcse"`` (B×B, or B×(1+k)B with negatives; text) or ``"ntxent"`` (2N views, SimCLR).
        gather_across_devices: score local anchors against the candidates of all processes.
        hard_negative_weight: SimCSE's w, a finite number (0, SimCSE's default, adds nothing); it acts only
            when ``negatives`` are given, and must be 0 for ``"ntxent"``.
        terms: the WEINCE authors' extra top-M terms (:mod:`~simcse_weince.losses.topm`; a :class:`TopMConfig` or
            its fields as a mapping), added to the loss when one of their weights is > 0; ``None`` or zero weights
            (the default) add nothing. They read the
            unweighted scores (w never enters them) and, with gathering, the global batch's M hardest negatives
            and global tail.
    """

    def __init__(
        self,
        temperature: float = 0.05,
        layout: Layout = "simcse",
        gather_across_devices: bool = False,
        hard_negative_weight: float = 0.0,
        terms: TopMConfig | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        check_positive("temperature", temperature)
        validate_layout(layout)
        check_hard_negative_weight(hard_negative_weight, layout)
        self._temperature = float(temperature)
        self.layout = layout
        self.gather_across_devices = bool(gather_across_devices)
        self._hard_negative_weight = float(hard_negative_weight)
        if isinstance(terms, Mapping):  # as get_config_dict writes it
            terms = TopMConfig(**terms)
        self.terms = TopMTerms(terms) if terms is not None and terms.active else None
        # Detached per-batch diagnostics of the last forward (tensors; reading them is the caller's sync).
        self.last_diagnostics: dict[str, torch.Tensor] = {}

    @property
    def temperature(self) -> float:
        """τ, fixed at construction (build a new loss to change it)."""
        return self._temperature

    @property
    def hard_negative_weight(self) -> float:
        """SimCSE's w on each anchor's own hard negatives, fixed at construction."""
        return self._hard_negative_weight

    def forward(
        self,
        anchors: torch.Tensor,
        positives: torch.Tensor,
        negative_mask: torch.Tensor | None = None,
        negatives: Negatives | None = None,
        absent_negatives: torch.Tensor | None = None,
        kind: BatchKind | None = None,
    ) -> torch.Tensor:
        """Scalar loss of a batch.

        Args:
            anchors: (B, D) embeddings of view 1 (any float dtype; scored in float32, also under autocast).
            positives: (B, D) embeddings of view 2; row i is the positive of anchor i.
            negative_mask: optional (A, C) bool, True where a candidate is a known false negative
                (C = (1+k)·world·B with k negative columns; see
                :func:`~simcse_weince.losses.duplicates.supervised_duplicate_mask`).
            negatives: optional hard negatives (supervised layout, ``"simcse"`` only): a (k, B, D) tensor or
                a sequence of k (B, D) tensors; row i of each is a hard negative of anchor i.
            absent_negatives: optional (k, B) bool, True where row i has no hard negative in column c (pairs
                and triplets in one batch): that candidate is no one's, in the softmax and the statistics.
            kind: the batch's :class:`~simcse_weince.losses.layout.BatchKind`, when the caller knows it: hard
                negatives are then given exactly for ``triplets``.

        Returns:
            0-d float32 tensor.

        Raises:
            ValueError: mismatched shapes, fewer than 2 rows in the (global) batch, NaN or Inf embeddings,
                ``negatives`` with the ``"ntxent"`` layout, ``negatives`` that ``kind`` does not hold.
        """
        if kind is not None and BatchKind(kind).has_negatives != (negatives is not None):
            given = "given" if negatives is not None else "missing"
            raise ValueError(f"a batch of kind {BatchKind(kind).value} with hard negatives {given}")
        lay = score_matrix(
            anchors, positives, self.layout, negative_mask, self.gather_across_devices, negatives=negatives,
            absent_negatives=absent_negatives,
        )  # fmt: skip
        self.last_diagnostics = {}  # this batch's only
        with torch.autocast(lay.scores.device.type, enabled=False):
            loss = self.loss_from_scores(lay)
            if self.terms is not None:
                extra, diagnostics = self.terms(lay, self.temperature)
                loss = loss + extra
                self.last_diagnostics = {**self.last_diagnostics, **diagnostics}
            return loss

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        """The loss from a batch's float32 :class:`ScoreMatrix` (subclasses)."""
        raise NotImplementedError

    def get_config_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "temperature": self.temperature,
            "layout": self.layout,
            "gather_across_devices": self.gather_across_devices,
        }
        # Only when set: w = 0 (SimCSE's default) leaves the unsupervised configurations and cards as they were.
        if self.hard_negative_weight:
            out["hard_negative_weight"] = self.hard_negative_weight
        if self.terms is not None:  # likewise only when a term is on; the constructor takes it back
            out["terms"] = dataclasses.asdict(self.terms.config)
        return out

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config_dict().items())
