"""Shared constructor arguments and validation of the contrastive losses."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from simcse_weince.core import checks
from simcse_weince.losses.layout import BatchKind, Layout, Negatives, ScoreMatrix, score_matrix, validate_layout
from simcse_weince.losses.topm import TopMConfig, TopMTerms


def temperature_field(
    default: float = 0.05,
    check: checks.Check = checks.positive,
    help: str = "τ > 0 dividing the cosine similarities.",
) -> Any:
    """The ``temperature`` field of a loss's ``Config`` (one field of that name and type in every config): its
    default may be the loss's own, its check stricter (finite) and its help text the loss's reading of τ."""
    return dataclasses.field(default=default, metadata=checks.setting(check, help))


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
    r"""Base of every registered loss (:data:`~simcse_weince.losses.LOSSES`): temperature, layout, hard-negative
    weight and device gathering.

    A loss class carries what the rest of the project reads from the registry:

    * ``name`` (the ``--loss`` value) and ``display_name`` (model cards, tables);
    * ``Config``, a frozen dataclass of its settings whose fields carry their checks and help texts
      (:func:`~simcse_weince.core.checks.setting`): the training arguments are generated from it, and
      :meth:`from_config` builds the loss from one;
    * ``diagnostic_keys``, the entries of ``last_diagnostics`` the trainer logs, and :meth:`run_summary`, what a
      run's ``results.json`` says of them;
    * its ``nn.Parameter`` s, if any: the trainer optimises them in their own parameter group, saves them in every
      checkpoint and averages their gradients over the processes.

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

    The WEINCE authors' extra top-M terms wrap any loss explicitly: ``WithTopMTerms(loss, TopMConfig(...))``, or
    :func:`with_terms`, which wraps only when a weight is > 0.
    """

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    Config: ClassVar[type]
    diagnostic_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        temperature: float = 0.05,
        layout: Layout = "simcse",
        gather_across_devices: bool = False,
        hard_negative_weight: float = 0.0,
    ) -> None:
        super().__init__()
        checks.positive("temperature", temperature)
        validate_layout(layout)
        check_hard_negative_weight(hard_negative_weight, layout)
        self._temperature = float(temperature)
        self.layout = layout
        self.gather_across_devices = bool(gather_across_devices)
        self._hard_negative_weight = float(hard_negative_weight)
        # Detached per-batch diagnostics of the last forward (tensors; reading them is the caller's sync).
        self.last_diagnostics: dict[str, torch.Tensor] = {}

    @classmethod
    def from_config(cls, config: Any, **common: Any) -> ContrastiveLoss:
        """The loss with the settings of ``config`` (a ``cls.Config``) and the ``common`` arguments
        (``layout``, ``gather_across_devices``, ``hard_negative_weight``)."""
        return cls(**{f: getattr(config, f) for f in config.__dataclass_fields__}, **common)

    @classmethod
    def run_summary(cls, log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """What a run's ``results.json`` reports of this loss's logged diagnostics (none by default)."""
        return {}

    def histograms(self) -> dict[str, torch.Tensor]:
        """Per-anchor tensors of the last batch to plot as histograms (TensorBoard name -> tensor); none by
        default."""
        return {}

    def learned_values(self) -> dict[str, float]:
        """What the loss has learned or fitted during the run (the link losses' (a, b)), for the model card and
        the export beside the model; none by default."""
        return {}

    @property
    def citation(self) -> str:
        """The BibTeX entry of the loss's paper, for model cards (none by default)."""
        return ""

    @property
    def logged_keys(self) -> tuple[str, ...]:
        """The entries of ``last_diagnostics`` the trainer logs (the class's ``diagnostic_keys``)."""
        return type(self).diagnostic_keys

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
            return self.loss_from_scores(lay)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        """The loss from a batch's float32 :class:`ScoreMatrix` (subclasses)."""
        raise NotImplementedError

    def search_logits(self, scores: torch.Tensor) -> torch.Tensor:
        """The loss's link applied to cosines ``scores`` (A, m) of a search, as it stands now (no batch statistic,
        no gradient): ``s/τ`` by default; the link losses' a·s + b·u or 2·artanh(s). WEINCE's depends on the
        candidates' statistics and is read through its own ``statistics``."""
        return scores / self.temperature

    def get_config_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "temperature": self.temperature,
            "layout": self.layout,
            "gather_across_devices": self.gather_across_devices,
        }
        # Only when set: w = 0 (SimCSE's default) leaves the unsupervised configurations and cards as they were.
        if self.hard_negative_weight:
            out["hard_negative_weight"] = self.hard_negative_weight
        return out

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config_dict().items())


def with_terms(loss: ContrastiveLoss, terms: TopMConfig | Mapping[str, Any] | None) -> ContrastiveLoss:
    """``loss`` with the top-M terms ``terms`` (a :class:`TopMConfig` or its fields as a mapping, as
    :meth:`WithTopMTerms.get_config_dict` writes them under ``topm``) when one of their weights is > 0; ``loss``
    itself otherwise."""
    if isinstance(terms, Mapping):
        terms = TopMConfig(**terms)
    return WithTopMTerms(loss, terms) if terms is not None and terms.active else loss


class WithTopMTerms(ContrastiveLoss):
    r"""Any loss plus the WEINCE authors' two extra top-M terms (:mod:`~simcse_weince.losses.topm`, which states
    their math): ``L = L_main + w_sm·L_sm^(M) + w_wb·L_wb^(M)``.

    The terms read the batch's unweighted scores (SimCSE's w never enters them) and, with gathering, the global
    batch's M hardest negatives and global tail. The wrapper has the wrapped loss's name, settings, layout and
    temperature; its ``state_dict`` adds the Weibit term's running β_t (``topm.beta_t``).

    Example:
        >>> loss = WithTopMTerms(WeinceLoss(temperature=0.5, layout="ntxent"), TopMConfig(topm_weibit_weight=0.5))
    """

    diagnostic_keys: ClassVar[tuple[str, ...]] = (
        "topm_softmax_loss", "topm_weibit_loss", "topm_beta", "topm_beta_hat", "topm_r2",
    )  # fmt: skip

    def __init__(self, loss: ContrastiveLoss, config: TopMConfig | Mapping[str, Any]) -> None:
        nn.Module.__init__(self)  # the settings are the wrapped loss's
        if isinstance(config, Mapping):
            config = TopMConfig(**config)
        self.loss = loss
        self.topm = TopMTerms(config)
        self.last_diagnostics: dict[str, torch.Tensor] = {}

    # the wrapped loss's identity and settings
    name = property(lambda self: self.loss.name)  # type: ignore[assignment]
    display_name = property(lambda self: self.loss.display_name)  # type: ignore[assignment]
    Config = property(lambda self: self.loss.Config)  # type: ignore[assignment]
    temperature = property(lambda self: self.loss.temperature)  # type: ignore[assignment]
    layout = property(lambda self: self.loss.layout)  # type: ignore[assignment]
    gather_across_devices = property(lambda self: self.loss.gather_across_devices)  # type: ignore[assignment]
    hard_negative_weight = property(lambda self: self.loss.hard_negative_weight)  # type: ignore[assignment]
    citation = property(lambda self: self.loss.citation)  # type: ignore[assignment]

    @property
    def logged_keys(self) -> tuple[str, ...]:
        """The wrapped loss's diagnostics and the terms'."""
        return (*self.loss.diagnostic_keys, *type(self).diagnostic_keys)

    def run_summary(self, log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:  # type: ignore[override]
        return self.loss.run_summary(log_history)

    def histograms(self) -> dict[str, torch.Tensor]:
        return self.loss.histograms()

    def learned_values(self) -> dict[str, float]:
        return self.loss.learned_values()

    def __getattr__(self, name: str) -> Any:
        """Anything else the wrapped loss has (``statistics``, ``config``, ``last_statistics``, ...)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__.get("_modules", {}).get("loss")
            if inner is None:
                raise
            return getattr(inner, name)

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        self.loss.last_diagnostics = {}
        main = self.loss.loss_from_scores(lay)
        extra, diagnostics = self.topm(lay, self.temperature)
        self.last_diagnostics = {**self.loss.last_diagnostics, **diagnostics}
        return main + extra

    def get_config_dict(self) -> dict[str, Any]:
        return {**self.loss.get_config_dict(), "topm": dataclasses.asdict(self.topm.config)}

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        # checkpoints written before the wrapper name the terms' buffer ``terms.beta_t``
        for key in [k for k in state_dict if k.startswith(f"{prefix}terms.")]:
            state_dict[f"{prefix}topm.{key[len(prefix) + 6 :]}"] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args)
