"""One sentence key and one duplicate mask for every trainer and adapter."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from simcse_weince.losses.duplicates import duplicate_mask, sentence_key, sentence_keys


def test_key_is_blake2b_of_the_int64_ids() -> None:
    ids = [101, 7, 8, 102]
    digest = hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=8).digest()
    assert sentence_key(ids) == int.from_bytes(digest, "little") >> 1
    assert 0 <= sentence_key(ids) < 2**63
    assert sentence_key(ids) != sentence_key([101, 7, 9, 102])


def test_row_keys_ignore_padding_and_match_the_list_keys() -> None:
    ids = torch.tensor([[101, 7, 8, 102, 0, 0], [101, 7, 8, 102, 0, 0], [101, 7, 9, 102, 0, 0]])
    mask = (ids != 0).long()
    k = sentence_keys(ids, mask)
    assert k[0] == k[1] != k[2]
    torch.testing.assert_close(k, sentence_keys(ids[:, :4], mask[:, :4]))
    # left padding gives the same keys; and they are the collator's keys of the unpadded lists
    left = torch.tensor([[0, 0, 101, 7, 8, 102]])
    assert sentence_keys(left, (left != 0).long())[0] == k[0] == sentence_key([101, 7, 8, 102])


def test_no_length_limit() -> None:
    ids = torch.randint(1000, 2000, (2, 10_000))
    ids[1] = ids[0]
    ids[1, -1] += 1  # differs only in the last token, far past any fixed table
    k = sentence_keys(ids)
    assert k[0] != k[1]


def test_duplicate_mask_local() -> None:
    keys = torch.tensor([5, 9, 5, 3])
    m = duplicate_mask(keys)
    expected = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1]], dtype=torch.bool)
    assert torch.equal(m, expected)
