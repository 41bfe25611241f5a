"""One key per sentence and the duplicate mask built from it, shared by every trainer and adapter.

Identical sentences in a batch must not be each other's negatives (their similarity is ~1 and they would
dominate the tail statistics). A sentence is identified by its token ids, without padding: the same key
comes out of the text collator (lists of ids) and of the sentence-transformers adapter (padded tensors),
whatever the padding and whatever the length, and it is the same on every process.

A row of the supervised layout may lack a hard negative (pairs and triplets trained together): its key is
:data:`ABSENT_KEY`, which no sentence has, so it masks nothing and is masked by nothing here; the loss leaves such
a negative out of every anchor's candidates (``absent_negatives``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from simcse_weince.losses.distributed import all_gather_no_grad, rank_and_world_size

ABSENT_KEY = -1  # the key of a missing hard negative; sentence keys are >= 0 (63 bits)


def sentence_key(ids: Sequence[int]) -> int:
    """A stable 63-bit key of a token sequence: BLAKE2b of the int64 ids, equal for exact duplicates."""
    digest = hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sentence_keys(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, L) padded token ids -> (B,) int64 keys, :func:`sentence_key` of each row's unpadded ids.

    Right- or left-padding both work: the positions where ``attention_mask`` is 0 are dropped.
    """
    ids = input_ids.detach().cpu()
    mask = torch.ones_like(ids, dtype=torch.bool) if attention_mask is None else attention_mask.detach().cpu().bool()
    keys = [sentence_key(row[m].tolist()) for row, m in zip(ids, mask, strict=True)]
    return torch.tensor(keys, dtype=torch.int64, device=input_ids.device)


def duplicate_mask(keys: torch.Tensor, gather_across_devices: bool = False) -> torch.Tensor:
    """(B,) local keys -> (B, C) bool, True where anchor and candidate are the same sentence.

    Candidates are the local keys, or the keys of all processes in rank order when
    ``gather_across_devices`` (C = world·B), matching the loss's candidate columns.
    """
    candidates = all_gather_no_grad(keys) if gather_across_devices else keys
    return keys[:, None] == candidates[None, :]


def supervised_duplicate_mask(
    anchor_keys: torch.Tensor,
    positive_keys: torch.Tensor,
    negative_keys: torch.Tensor | Sequence[torch.Tensor] = (),
    gather_across_devices: bool = False,
) -> torch.Tensor:
    """The duplicate mask of the supervised layout: (B,) keys per column -> (B, C) bool.

    The candidate columns are those of the loss's supervised layout (``docs/algorithm.md`` §1): the positives
    of all rows, then one block per negative column, each block gathered in rank order when ``gather_across_devices``
    (C = (1+k)·N for a global batch of N = world·B rows and k negative columns). With ``cand[j]`` the key of
    candidate j and ``g`` the global row of local anchor i, the mask is::

        mask[i, j] = (j != g) and (cand[j] == anchor_keys[i] or cand[j] == positive_keys[i])

    i.e. a candidate is masked when it is the anchor's own sentence or its positive's sentence appearing
    elsewhere in the batch (another row's positive, any row's hard negative, the anchor's own hard negative
    included); the anchor's own positive (column g) is never masked, being the positive, and neither is
    any other candidate, however similar. With ``positive_keys == anchor_keys`` (unsupervised SimCSE) and
    no negatives this is :func:`duplicate_mask` with the diagonal cleared (the loss ignores the diagonal).

    Args:
        anchor_keys: (B,) keys of the anchors (first column).
        positive_keys: (B,) keys of the positives (second column).
        negative_keys: k key tensors of (B,), or a (k, B) tensor, one per negative column (k ≥ 0).
        gather_across_devices: the candidates are all processes' rows (the loss's gathered columns).

    Returns:
        (B, (1+k)·N) bool, the ``negative_mask`` of ``loss(anchors, positives, negative_mask, negatives)``.
    """
    if anchor_keys.shape != positive_keys.shape or anchor_keys.ndim != 1:
        raise ValueError(
            f"anchor and positive keys must both be (B,), got {tuple(anchor_keys.shape)} and "
            f"{tuple(positive_keys.shape)}"
        )
    columns = [positive_keys, *negative_keys]
    for c, keys in enumerate(columns[1:]):
        if keys.shape != anchor_keys.shape:
            raise ValueError(
                f"negative column {c} keys must be (B,) = {tuple(anchor_keys.shape)}, got {tuple(keys.shape)}"
            )
    if gather_across_devices:
        columns = [all_gather_no_grad(keys) for keys in columns]
        rank, _ = rank_and_world_size()
    else:
        rank = 0
    candidates = torch.cat(columns)  # (C,), the loss's column order
    mask = (candidates[None, :] == anchor_keys[:, None]) | (candidates[None, :] == positive_keys[:, None])
    own_positive = rank * anchor_keys.shape[0] + torch.arange(anchor_keys.shape[0], device=mask.device)
    return mask.scatter_(1, own_positive[:, None], False)
