"""Score layouts shared by InfoNCE and WEINCE: the SimCSE B×B layout and the SimCLR / NT-Xent 2N layout.

Both layouts produce, for A anchors and C candidates:

* ``scores`` (A, C): cosine similarities ``s_ij`` in float32 (whatever the input dtype), with gradient;
* ``positive_index`` (A,): the column of each anchor's positive;
* ``self_mask`` (A, C): entries that are the anchor itself (NT-Xent only), neither positive nor negative;
* ``user_mask`` (A, C): negatives removed by the caller's ``negative_mask`` (known false negatives);
* ``num_negatives``: K, the number of negatives per anchor implied by the layout before any masking
  (C − 1 for SimCSE, C − 2 for NT-Xent).

SimCSE layout: anchors are view 1 of the B sentences, candidates view 2; the positive of anchor i is column i.
NT-Xent layout: the 2N views ``[anchors; positives]`` are both anchors and candidates; the positive of view
i is its partner i ± N; the view itself is excluded.

With ``gather_across_devices`` the local anchors are scored against the candidates of *all* processes, in
rank order, so each local row equals the corresponding row of the single-process global-batch matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from simcse_weince.losses.distributed import all_gather_with_grad, rank_and_world_size

Layout = Literal["simcse", "ntxent"]
LAYOUTS: tuple[str, ...] = ("simcse", "ntxent")


@dataclass
class ScoreMatrix:
    """Similarity matrix and bookkeeping of one batch (see the module docstring)."""

    scores: torch.Tensor  # (A, C) float32
    positive_index: torch.Tensor  # (A,) long
    self_mask: torch.Tensor  # (A, C) bool
    user_mask: torch.Tensor  # (A, C) bool, never True at the positive
    num_negatives: int

    @property
    def excluded(self) -> torch.Tensor:
        """(A, C) bool: entries removed from the softmax denominator."""
        return self.self_mask | self.user_mask

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
) -> ScoreMatrix:
    """Normalise the embeddings and build the score matrix of ``layout``.

    Args:
        anchors: (B, D) embeddings of view 1, any floating dtype.
        positives: (B, D) embeddings of view 2 (row i is the positive of anchor i).
        layout: ``"simcse"`` (B×B) or ``"ntxent"`` (2N×2N).
        negative_mask: optional (A, C) bool, True where a candidate must not be used as a negative of the
            anchor (A = B for SimCSE, 2B for NT-Xent; C = the global candidate count with gathering).
            Entries at the positive (and at the anchor itself) are ignored.
        gather_across_devices: score local anchors against the candidates of all processes.

    Raises:
        ValueError: on mismatched shapes, a batch of fewer than 2 rows, or a wrongly shaped mask.
    """
    validate_layout(layout)
    if anchors.ndim != 2 or positives.shape != anchors.shape:
        raise ValueError(
            f"anchors and positives must both be (B, D); got {tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    if not anchors.is_floating_point() or not positives.is_floating_point():
        raise ValueError(f"embeddings must be floating point, got {anchors.dtype} and {positives.dtype}")
    rank, world = rank_and_world_size() if gather_across_devices else (0, 1)
    local = anchors.shape[0]
    if local * world < 2:
        raise ValueError(f"a contrastive batch needs at least 2 rows (global), got B = {local * world}")
    check_finite(anchors, "anchors")
    check_finite(positives, "positives")
    with torch.autocast(anchors.device.type, enabled=False):
        return _score_matrix(anchors, positives, layout, negative_mask, gather_across_devices, rank, world)


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


def _score_matrix(anchors, positives, layout, negative_mask, gather_across_devices, rank, world) -> ScoreMatrix:
    # Similarities in float32 even under fp16/bf16 (autocast is off here): bf16 rounds 0.999 to 1.0 and
    # -log(1 - s) explodes.
    local = anchors.shape[0]
    a = F.normalize(anchors.float(), dim=-1)  # (B, D)
    p = F.normalize(positives.float(), dim=-1)  # (B, D)
    offset = rank * local
    rows = torch.arange(local, device=a.device)
    if layout == "simcse":
        cand = all_gather_with_grad(p) if gather_across_devices else p  # (C, D), C = world·B
        scores = a @ cand.T  # (B, C)
        positive_index = rows + offset
        self_mask = torch.zeros(scores.shape, dtype=torch.bool, device=a.device)
        num_negatives = cand.shape[0] - 1
    else:
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
        num_negatives = cand.shape[0] - 2

    if negative_mask is None:
        user_mask = torch.zeros_like(self_mask)
    else:
        if negative_mask.shape != scores.shape:
            raise ValueError(
                f"negative_mask must have shape {tuple(scores.shape)} (anchors × candidates) for layout "
                f"{layout!r}, got {tuple(negative_mask.shape)}"
            )
        user_mask = negative_mask.to(device=a.device, dtype=torch.bool).clone()
        user_mask.scatter_(1, positive_index[:, None], False)
        user_mask &= ~self_mask
    return ScoreMatrix(scores, positive_index, self_mask, user_mask, num_negatives)


def masked_cross_entropy(logits: torch.Tensor, lay: ScoreMatrix) -> torch.Tensor:
    """Mean cross-entropy of each anchor's positive against its positive and remaining negatives."""
    logits = logits.masked_fill(lay.excluded, float("-inf"))
    return F.cross_entropy(logits, lay.positive_index)
