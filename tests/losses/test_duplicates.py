"""One sentence key and one duplicate mask for every trainer and adapter."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from simcse_weince.losses.duplicates import (
    ABSENT_KEY,
    duplicate_mask,
    sentence_key,
    sentence_keys,
    supervised_duplicate_mask,
)


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


def test_supervised_duplicate_mask_by_hand() -> None:
    # rows (anchor, positive, hard negative) as sentence keys; candidates [p0 p1 p2 | n0 n1 n2] = [11 10 30 | 12 11 10]
    a = torch.tensor([10, 20, 10])  # anchor 2 repeats anchor 0's sentence
    p = torch.tensor([11, 10, 30])  # positive 1 is anchor 0's sentence
    n = torch.tensor([12, 11, 10])  # n1 is positive 0's sentence; n2 is anchor 2's own sentence
    expected = torch.tensor(
        [
            [0, 1, 0, 0, 1, 1],  # own positive and own hard negative (12) kept; 10 = anchor, 11 = its positive
            [0, 0, 0, 0, 0, 1],  # 10 = its positive's sentence, elsewhere; its own hard negative 11 kept
            [0, 1, 0, 0, 0, 1],  # 10 = its own sentence, also as its own hard negative
        ],
        dtype=torch.bool,
    )
    assert torch.equal(supervised_duplicate_mask(a, p, [n]), expected)
    assert torch.equal(supervised_duplicate_mask(a, p, n[None]), expected)
    assert torch.equal(supervised_duplicate_mask(a, p), expected[:, :3])
    # two negative columns: one block of B per column, in column order
    two = supervised_duplicate_mask(a, p, [n, torch.tensor([99, 99, 30])])
    assert torch.equal(two[:, :6], expected)
    assert torch.equal(two[:, 6:], torch.tensor([[0, 0, 0], [0, 0, 0], [0, 0, 1]], dtype=torch.bool))


def test_supervised_duplicate_mask_of_identical_columns_is_the_unsupervised_one() -> None:
    keys = torch.tensor([5, 9, 5, 3, 9])
    off_diagonal = duplicate_mask(keys) & ~torch.eye(5, dtype=torch.bool)
    assert torch.equal(supervised_duplicate_mask(keys, keys), off_diagonal)
    with pytest.raises(ValueError, match="negative column 0 keys"):
        supervised_duplicate_mask(keys, keys, [keys[:3]])
    with pytest.raises(ValueError, match=r"\(B,\)"):
        supervised_duplicate_mask(keys, keys[:4])


def test_absent_negatives_mask_nothing_and_are_masked_by_nothing() -> None:
    a, p = torch.tensor([10, 20, 30]), torch.tensor([11, 21, 10])
    n = torch.tensor([ABSENT_KEY, 22, ABSENT_KEY])  # rows 0 and 2 are pairs; the loss leaves their columns out
    mask = supervised_duplicate_mask(a, p, [n])
    assert not mask[:, [3, 5]].any()
    assert torch.equal(mask, supervised_duplicate_mask(a, p, [torch.tensor([40, 22, 41])]))  # as unique sentences
