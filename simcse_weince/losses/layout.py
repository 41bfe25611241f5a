"""Score layouts shared by InfoNCE and WEINCE: the SimCSE B×B layout, its supervised B×(1+k)B extension with
hard negatives, and the SimCLR / NT-Xent 2N layout.

Every layout produces, for A anchors and C candidates:

* ``scores`` (A, C): cosine similarities ``s_ij`` in float32 (whatever the input dtype), with gradient;
* ``positive_index`` (A,): the column of each anchor's positive;
* ``self_mask`` (A, C): entries that are no candidate of the anchor, neither positive nor negative: the anchor
  itself (NT-Xent), or an absent hard negative (supervised rows without one, ``absent_negatives``);
* ``user_mask`` (A, C): negatives removed by the caller's ``negative_mask`` (known false negatives);
* ``hard_negative_mask`` (A, C): each anchor's own hard negatives (supervised layout only; all False
  otherwise), the entries that receive SimCSE's ``hard_negative_weight``;
* ``num_negatives``: K, the number of negatives per anchor implied by the layout before any masking
  (C − 1 for SimCSE and its supervised form, C − 2 for NT-Xent; in the supervised form, minus the absent hard
  negatives, which are no one's candidates).

SimCSE layout: anchors are view 1 of the B sentences, candidates view 2; the positive of anchor i is column i.

Supervised layout (``"simcse"`` with ``negatives``; ``docs/algorithm.md`` §1): rows are (anchor z_i, positive z⁺_i, hard
negatives z⁻_{i,1}, …, z⁻_{i,k}). The candidates are the positives of all B rows followed by one block of B
per negative column::

    columns:   [ z⁺_1 … z⁺_B | z⁻_{1,1} … z⁻_{B,1} | … | z⁻_{1,k} … z⁻_{B,k} ]      S is B × (1+k)B

The positive of anchor i is column i; its K = (1+k)B − 1 negatives are every other column (the other rows'
positives and every hard negative, its own included). Anchor i's own hard negatives are the columns
``c·B + i`` for c = 1..k. k = 0 is the SimCSE layout (two different sentences per row).

Pairs and triplets in one batch: ``absent_negatives`` (k, B) marks the rows that lack a hard negative. An absent
negative is no candidate of any anchor (``self_mask``): it leaves the softmax, never enters the tail statistics,
and K counts only the negatives that exist, K = (1+k)B − 1 − #absent. A batch whose negatives are all absent is
therefore the pairs layout exactly.

NT-Xent layout: the 2N views ``[anchors; positives]`` are both anchors and candidates; the positive of view
i is its partner i ± N; the view itself is excluded.

With ``gather_across_devices`` the local anchors are scored against the candidates of *all* processes, every
candidate block gathered and laid out in the single-process order (all positives of ranks 0, 1, …, then
the first negative column of ranks 0, 1, …, and so on), so each local row equals the corresponding row of
the single-process global-batch matrix, with B replaced by the global batch N = world·B.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import torch
import torch.nn.functional as F

from simcse_weince.losses.distributed import all_gather_no_grad, all_gather_with_grad, rank_and_world_size

Layout = Literal["simcse", "ntxent"]
LAYOUTS: tuple[str, ...] = ("simcse", "ntxent")
# Hard negatives of the supervised layout: a (k, B, D) tensor or k tensors of (B, D), k >= 0.
Negatives = torch.Tensor | Sequence[torch.Tensor]


class BatchKind(str, Enum):
    """What a batch holds, decided once where the batch is made (the collator) and carried as its ``kind``
    field to the model, the trainer's hooks and the loss, which never infer it from a tensor's shape.

    ``views``: examples seen twice (SimCSE's dropout views, SimCLR's augmentations); ``pairs``: rows of
    (anchor, positive); ``triplets``: rows of (anchor, positive, k ≥ 1 hard negatives), some of which may be
    absent (pairs among triplets).
    """

    VIEWS = "views"
    PAIRS = "pairs"
    TRIPLETS = "triplets"

    @classmethod
    def of_width(cls, texts_per_row: int) -> BatchKind:
        """The kind of rows of ``texts_per_row`` texts: 1 views, 2 pairs, 3 or more triplets."""
        if texts_per_row < 1:
            raise ValueError(f"a row holds at least one text, got {texts_per_row}")
        return cls.VIEWS if texts_per_row == 1 else cls.PAIRS if texts_per_row == 2 else cls.TRIPLETS

    @property
    def rows(self) -> bool:
        """Whether each row holds different texts (pairs, triplets), not two views of one."""
        return self is not BatchKind.VIEWS

    @property
    def has_negatives(self) -> bool:
        """Whether the rows carry hard negatives (the supervised layout's B × (1+k)B scores)."""
        return self is BatchKind.TRIPLETS


def batch_kind(batch: Mapping[str, Any]) -> BatchKind:
    """The ``kind`` field of a batch.

    Raises:
        ValueError: the batch has none (a batch made by hand: set ``kind``, as the collators do).
    """
    kind = batch.get("kind")
    if kind is None:
        raise ValueError("the batch has no 'kind' field; expected one of views, pairs, triplets (the collators set it)")
    return BatchKind(kind)


@dataclass
class ScoreMatrix:
    """Similarity matrix and bookkeeping of one batch (see the module docstring)."""

    scores: torch.Tensor  # (A, C) float32
    positive_index: torch.Tensor  # (A,) long
    self_mask: torch.Tensor  # (A, C) bool
    user_mask: torch.Tensor  # (A, C) bool, never True at the positive
    num_negatives: int
    hard_negative_mask: torch.Tensor | None = None  # (A, C) bool, own hard negatives (supervised)

    @property
    def excluded(self) -> torch.Tensor:
        """(A, C) bool: entries removed from the softmax denominator."""
        return self.self_mask | self.user_mask

    @property
    def negatives(self) -> torch.Tensor:
        """(A, C) bool: each anchor's negatives, every candidate but its positive and the excluded entries."""
        return ~(self.excluded | self.positive_mask)

    @property
    def positive_mask(self) -> torch.Tensor:
        """(A, C) bool: one True per row, at the positive."""
        mask = torch.zeros_like(self.self_mask)
        return mask.scatter_(1, self.positive_index[:, None], True)


def validate_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def score_matrix(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    layout: Layout = "simcse",
    negative_mask: torch.Tensor | None = None,
    gather_across_devices: bool = False,
    negatives: Negatives | None = None,
    absent_negatives: torch.Tensor | None = None,
) -> ScoreMatrix:
    """Normalise the embeddings and build the score matrix of ``layout``.

    Args:
        anchors: (B, D) embeddings of view 1, any floating dtype.
        positives: (B, D) embeddings of view 2 (row i is the positive of anchor i).
        layout: ``"simcse"`` (B×B, or B×(1+k)B with ``negatives``) or ``"ntxent"`` (2N×2N).
        negative_mask: optional (A, C) bool, True where a candidate must not be used as a negative of the
            anchor (A = B for SimCSE, 2B for NT-Xent; C = the global candidate count with gathering:
            N, (1+k)N or 2N for a global batch of N rows). Entries at the positive (and at the anchor
            itself) are ignored.
        gather_across_devices: score local anchors against the candidates of all processes.
        negatives: the supervised layout's hard negatives (``"simcse"`` only): a (k, B, D) tensor or a
            sequence of k (B, D) tensors, k ≥ 0, row i of column c being a hard negative of anchor i.
        absent_negatives: optional (k, B) bool, True where row i has no hard negative in column c (its
            embedding is ignored); gathered like the negatives.

    Raises:
        ValueError: on mismatched shapes, a batch of fewer than 2 rows, a wrongly shaped mask, NaN or Inf
            embeddings, or ``negatives`` with the ``"ntxent"`` layout.
    """
    validate_layout(layout)
    if anchors.ndim != 2 or positives.shape != anchors.shape:
        raise ValueError(
            f"anchors and positives must both be (B, D); got {tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    if not anchors.is_floating_point() or not positives.is_floating_point():
        raise ValueError(f"embeddings must be floating point, got {anchors.dtype} and {positives.dtype}")
    negs = _as_negative_columns(negatives, anchors, layout)
    rank, world = rank_and_world_size() if gather_across_devices else (0, 1)
    local = anchors.shape[0]
    if local * world < 2:
        raise ValueError(f"a contrastive batch needs at least 2 rows (global), got B = {local * world}")
    check_finite(anchors, "anchors")
    check_finite(positives, "positives")
    for neg in negs:
        check_finite(neg, "negatives")
    absent = None
    if absent_negatives is not None and negs:
        if tuple(absent_negatives.shape) != (len(negs), local):
            raise ValueError(
                f"absent_negatives must be (k, B) = {(len(negs), local)} like the negatives, got "
                f"{tuple(absent_negatives.shape)}"
            )
        absent = absent_negatives.to(device=anchors.device, dtype=torch.bool)
    with torch.autocast(anchors.device.type, enabled=False):
        lay = _score_matrix(anchors, positives, negs, layout, negative_mask, gather_across_devices, rank, world)
    if absent is not None:
        _leave_out(lay, absent, gather_across_devices, world)
    return lay


def _leave_out(lay: ScoreMatrix, absent: torch.Tensor, gather_across_devices: bool, world: int) -> None:
    """Absent hard negatives (k, B) are no one's candidates: ``self_mask`` in every row, out of K."""
    k, local = absent.shape
    columns = torch.cat([torch.zeros(1, local, dtype=torch.bool, device=absent.device), absent])  # (1+k, B)
    if gather_across_devices and world > 1:  # the candidates' block order: (world, 1+k, B) -> (1+k, world, B)
        columns = all_gather_no_grad(columns.to(torch.uint8)).bool().view(world, 1 + k, local).transpose(0, 1)
    columns = columns.reshape(-1)  # (C,)
    lay.self_mask |= columns[None, :]
    lay.user_mask &= ~lay.self_mask
    lay.num_negatives -= int(columns.sum())  # a host sync, only for rows that may lack a negative


def _as_negative_columns(negatives: Negatives | None, anchors: torch.Tensor, layout: str) -> list[torch.Tensor]:
    """The k hard-negative columns as a list of (B, D) tensors (empty without ``negatives``), validated."""
    if negatives is None:
        return []
    if layout != "simcse":
        raise ValueError(
            f"negatives (the supervised layout) need layout='simcse'; the {layout!r} layout has no hard negatives"
        )
    if isinstance(negatives, torch.Tensor):
        if negatives.ndim != 3:
            raise ValueError(
                f"negatives must be a (k, B, D) tensor or a sequence of (B, D) tensors, got a tensor of shape "
                f"{tuple(negatives.shape)} (one column: pass negatives[None] or [negatives])"
            )
        columns = list(negatives.unbind(0))
    else:
        columns = list(negatives)
    for c, neg in enumerate(columns):
        if not isinstance(neg, torch.Tensor) or neg.shape != anchors.shape:
            shape = tuple(neg.shape) if isinstance(neg, torch.Tensor) else type(neg).__name__
            raise ValueError(
                f"negative column {c} must be (B, D) = {tuple(anchors.shape)} like the anchors, got {shape}"
            )
        if not neg.is_floating_point():
            raise ValueError(f"embeddings must be floating point, got {neg.dtype} in negative column {c}")
    return columns


def check_finite(x: torch.Tensor, name: str) -> None:
    """``ValueError`` if ``x`` holds NaN or Inf. On an accelerator the check is an asynchronous device-side
    assert (no host sync per step); on the CPU it is a plain check."""
    finite = torch.isfinite(x).all()
    message = f"{name} contain NaN or Inf: the encoder produced non-finite embeddings (check the learning rate)"
    if x.device.type == "cpu":
        if not bool(finite):
            raise ValueError(message)
    else:
        torch._assert_async(finite, message)


def _score_matrix(
    anchors, positives, negatives, layout, negative_mask, gather_across_devices, rank, world
) -> ScoreMatrix:
    # Similarities in float32 even under fp16/bf16 (autocast is off here): bf16 rounds 0.999 to 1.0 and
    # -log(1 - s) explodes.
    a = F.normalize(anchors.float(), dim=-1)  # (B, D)
    p = F.normalize(positives.float(), dim=-1)  # (B, D)
    if layout == "simcse":
        lay = _simcse_scores(a, p, negatives, gather_across_devices, rank, world)
    else:
        lay = _ntxent_scores(a, p, gather_across_devices, rank)
    if negative_mask is not None:
        _mask_negatives(lay, negative_mask, layout, len(negatives))
    return lay


def _simcse_scores(
    a: torch.Tensor, p: torch.Tensor, negatives: list[torch.Tensor], gather_across_devices: bool, rank: int, world: int
) -> ScoreMatrix:
    """The SimCSE layout, B × (1+k)B: normalised anchors ``a`` (B, D) against the positives ``p`` (B, D) and the k
    hard-negative columns; nothing excluded, the positive of anchor i at its global row index."""
    local = a.shape[0]
    k = len(negatives)
    # Candidate blocks [positives; negative column 1; ...; column k], each (B, D).
    blocks = torch.cat([p, *(F.normalize(n.float(), dim=-1) for n in negatives)]) if k else p  # ((1+k)B, D)
    if gather_across_devices:
        # One all_gather of every block; (world, 1+k, B, D) -> (1+k, world, B, D) puts all ranks' positives
        # first, then all ranks' first negative column, ...: the single-process global-batch order.
        d = blocks.shape[1]
        gathered = all_gather_with_grad(blocks).view(world, 1 + k, local, d)
        cand = gathered.transpose(0, 1).reshape(-1, d)  # (C, D), C = (1+k)·world·B
    else:
        cand = blocks
    scores = a @ cand.T  # (B, C)
    positive_index = torch.arange(local, device=a.device) + rank * local
    self_mask = torch.zeros(scores.shape, dtype=torch.bool, device=a.device)
    hard_negative_mask = torch.zeros_like(self_mask)
    if k:
        # Anchor i's own hard negatives: column c·N + i of block c = 1..k (global row index i, N = world·B).
        own = torch.arange(1, k + 1, device=a.device)[None, :] * (world * local) + positive_index[:, None]  # (B, k)
        hard_negative_mask.scatter_(1, own, True)
    user_mask = torch.zeros_like(self_mask)
    return ScoreMatrix(scores, positive_index, self_mask, user_mask, cand.shape[0] - 1, hard_negative_mask)


def _ntxent_scores(a: torch.Tensor, p: torch.Tensor, gather_across_devices: bool, rank: int) -> ScoreMatrix:
    """The NT-Xent layout, 2B × 2N: the local views ``[a; p]`` (2B, D) against the views of all processes
    ``[a_all; p_all]`` (2N, D); each view's positive is its partner, the view itself is excluded."""
    local = a.shape[0]
    offset = rank * local
    rows = torch.arange(local, device=a.device)
    if gather_across_devices:
        a_all, p_all = all_gather_with_grad(a), all_gather_with_grad(p)
    else:
        a_all, p_all = a, p
    n = a_all.shape[0]
    cand = torch.cat([a_all, p_all], dim=0)  # (2N, D)
    anchors_local = torch.cat([a, p], dim=0)  # (2B, D)
    scores = anchors_local @ cand.T  # (2B, 2N)
    own = torch.cat([rows + offset, rows + offset + n])  # global index of each local view
    positive_index = torch.cat([rows + offset + n, rows + offset])
    self_mask = torch.zeros(scores.shape, dtype=torch.bool, device=a.device)
    self_mask.scatter_(1, own[:, None], True)
    user_mask = torch.zeros_like(self_mask)
    return ScoreMatrix(scores, positive_index, self_mask, user_mask, cand.shape[0] - 2)


def _mask_negatives(lay: ScoreMatrix, negative_mask: torch.Tensor, layout: str, k: int) -> None:
    """The caller's ``negative_mask`` (A, C) as ``lay.user_mask``, never at a positive or an excluded entry."""
    if negative_mask.shape != lay.scores.shape:
        columns = f" with {k} negative column(s)" if k else ""
        raise ValueError(
            f"negative_mask must have shape {tuple(lay.scores.shape)} (anchors × candidates) for layout "
            f"{layout!r}{columns}, got {tuple(negative_mask.shape)}"
        )
    user_mask = negative_mask.to(device=lay.scores.device, dtype=torch.bool).clone()
    user_mask.scatter_(1, lay.positive_index[:, None], False)
    user_mask &= ~lay.self_mask
    lay.user_mask = user_mask


def masked_cross_entropy(logits: torch.Tensor, lay: ScoreMatrix, hard_negative_weight: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of each anchor's positive against its positive and remaining negatives.

    Args:
        logits: (A, C) final logits of the loss (``s/τ`` for InfoNCE, the blended logits for WEINCE).
        lay: the batch's :class:`ScoreMatrix`.
        hard_negative_weight: SimCSE's w, added to the logit of each anchor's own hard negative(s)
            (``lay.hard_negative_mask``, supervised layout) after any blend; 0 (SimCSE's default) adds
            nothing and leaves the logits bit-for-bit unchanged.
    """
    logits = weighted_hard_negatives(logits, lay, hard_negative_weight).masked_fill(lay.excluded, float("-inf"))
    return F.cross_entropy(logits, lay.positive_index)


def row_logsumexp(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(A,) log Σ_j exp(values_ij) over each row's entries where ``mask``; a row with none gives 0, a finite stand-in
    (its caller leaves such a row out), so that no −∞ − (−∞) reaches a gradient."""
    fill = torch.where(mask.any(dim=1, keepdim=True), float("-inf"), 0.0)
    return torch.logsumexp(torch.where(mask, values, fill), dim=1)


def weighted_hard_negatives(logits: torch.Tensor, lay: ScoreMatrix, hard_negative_weight: float) -> torch.Tensor:
    """``logits + w·h``: SimCSE's ``hard_negative_weight`` w on each anchor's own hard negative(s)
    (``lay.hard_negative_mask``); ``logits`` itself (the same tensor) when w = 0 or the layout has none."""
    if hard_negative_weight and lay.hard_negative_mask is not None:
        return logits + hard_negative_weight * lay.hard_negative_mask.to(logits.dtype)
    return logits
