"""One key per sentence and the duplicate mask built from it, shared by every trainer and adapter.

Identical sentences in a batch must not be each other's negatives (their similarity is ~1 and they would
dominate the tail statistics). A sentence is identified by its token ids, without padding: the same key
comes out of the text collator (lists of ids) and of the sentence-transformers adapter (padded tensors),
whatever the padding and whatever the length, and it is the same on every process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from simcse_weince.losses.distributed import all_gather_no_grad


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
