"""Tokenising and collating the training text (sentences, pairs, pairs with hard negatives).

:func:`tokenize_batch` (one column) and :func:`tokenize_columns` (pairs, triplets) are the batched tokenisation
behind the on-disk token cache (:mod:`simcse_weince.text.token_cache`), which stores each sentence's duplicate key
beside its ids and skips the sentences (rows) with no known token (only ``[UNK]``, e.g. emoji for a WordPiece
vocabulary, or nothing at all). Reading the text is :mod:`simcse_weince.text.sources`' concern.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from simcse_weince.losses.duplicates import ABSENT_KEY, sentence_key
from simcse_weince.losses.layout import BatchKind
from simcse_weince.text.reading import STRIP


def check_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("a fast (Rust) tokenizer is required; load it with AutoTokenizer(use_fast=True)")


def encode(texts: list[str], tokenizer, max_length: int) -> tuple[list[list[int]], list, set[int]]:
    """One tokenizer call: ids truncated to ``max_length``, the encodings (their ``overflowing`` says what was
    cut) and the special ids (``[UNK]`` is one: a sequence of special ids only has no known token)."""
    enc = tokenizer(  # no masks: padding makes them per batch; building them costs a fifth of the call
        texts,
        truncation=True,
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    return enc["input_ids"], enc.encodings, set(tokenizer.all_special_ids)


def tokenize_batch(texts: Sequence[str | None], tokenizer, max_length: int) -> dict[str, list]:
    """The training columns of a batch of lines: blank (or missing) ones and those of invisible characters only
    dropped, the rest stripped (as :func:`keep_sentences`), then the sentences with no known token dropped.

    A sentence has no known token when its ids are all special tokens, ``[UNK]`` included (besides ``[CLS]``
    and ``[SEP]``: only ``[UNK]``, as emoji for a WordPiece vocabulary, or nothing left by the tokenizer's
    normalisation, as a control character): such rows would be one and the same sentence to the encoder.

    Returns ``input_ids`` (ids truncated to ``max_length``), ``sentence_key`` (:func:`sentence_key` of those
    ids, the duplicate key the loss masks with) and ``truncated`` (whether the sentence had more tokens:
    the fast tokenizer keeps the cut-off tokens in each encoding's ``overflowing``). Fewer rows than
    ``texts`` come back when some are dropped. The function of the cache's batched ``Dataset.map``.
    """
    kept = [s for t in texts if t and (s := t.strip(STRIP))]
    if not kept:
        return {"input_ids": [], "sentence_key": [], "truncated": []}
    ids, encodings, special = encode(kept, tokenizer, max_length)
    known = [not special.issuperset(x) for x in ids]
    if not all(known):
        ids = [x for x, k in zip(ids, known, strict=True) if k]
        encodings = [e for e, k in zip(encodings, known, strict=True) if k]
    return {
        "input_ids": ids,
        "sentence_key": [sentence_key(x) for x in ids],
        "truncated": [bool(e.overflowing) for e in encodings],
    }


def token_column_names(j: int) -> tuple[str, str, str]:
    """The token cache's columns of text column ``j`` (0: the anchor, 1: the positive, 2...: hard negatives):
    ``input_ids``, ``sentence_key``, ``truncated`` for ``j = 0``, with the suffix ``_j`` after (``input_ids_1``)."""
    suffix = f"_{j}" if j else ""
    return f"input_ids{suffix}", f"sentence_key{suffix}", f"truncated{suffix}"


def tokenize_columns(columns: Sequence[Sequence[str]], tokenizer, max_length: int) -> dict[str, list]:
    """The training columns of a batch of rows of ``len(columns)`` texts each (one sequence per column, cells
    already normalised and non-empty, see :mod:`simcse_weince.text.columns`), tokenised in one call.

    A row is dropped when one of its cells has no known token (as :func:`tokenize_batch` drops a sentence): its
    pair or triplet would not be one. An empty cell, which only a hard-negative column holds and only with
    ``allow_missing_negatives``, is an absent negative: ids ``[]``, key
    :data:`~simcse_weince.losses.duplicates.ABSENT_KEY`, not truncated, and it drops nothing. Returns, per column
    ``j``, the three columns of :func:`token_column_names` (ids truncated to ``max_length``, duplicate key,
    whether the cell was truncated).
    """
    n, rows = len(columns), len(columns[0]) if columns else 0
    names = [token_column_names(j) for j in range(n)]
    if not rows:
        return {name: [] for triple in names for name in triple}
    cells = [cell for col in columns for cell in col]
    ids, encodings, special = encode(cells, tokenizer, max_length)
    absent = [not cell for cell in cells]
    unknown = [special.issuperset(x) and not gone for x, gone in zip(ids, absent, strict=True)]
    kept = [i for i in range(rows) if not any(unknown[j * rows + i] for j in range(n))]
    out: dict[str, list] = {}
    for j, (ids_name, key_name, truncated_name) in enumerate(names):
        at = [j * rows + i for i in kept]
        out[ids_name] = [[] if absent[c] else ids[c] for c in at]
        out[key_name] = [ABSENT_KEY if absent[c] else sentence_key(ids[c]) for c in at]
        out[truncated_name] = [bool(encodings[c].overflowing) and not absent[c] for c in at]
    return out


def single_row_tail(num_rows: int, batch_size: int, processes: int, gather_across_devices: bool) -> int:
    """How many trailing rows to drop so that no process scores a 1-row batch at the end of an epoch.

    The last batch of an epoch holds ``r = num_rows mod (batch_size × processes)`` rows, spread over the
    processes (padded to equal sizes, ``ceil(r / processes)`` each). A contrastive batch needs 2 rows; with
    negatives gathered across several processes the global batch counts, otherwise each process's own.
    Returns ``r`` when the tail would leave a lone row, else 0.
    """
    r = num_rows % (batch_size * processes)
    per_process = -(-r // processes)
    scored_together = per_process * processes if gather_across_devices and processes > 1 else per_process
    return r if 0 < r and scored_together < 2 else 0


class SimCSECollator:
    """Pads a list of token-cache rows into a batch and says what kind of batch it is.

    Rows of one text (``input_ids``) make a batch of kind ``views`` (each sentence encoded twice): ``input_ids``
    and ``attention_mask`` (B, L), ``sentence_key`` (B,) int64. Rows of n ≥ 2 texts (``input_ids``,
    ``input_ids_1``, ...) make ``pairs`` (n = 2) or ``triplets`` (n ≥ 3): see :meth:`collate_columns`. The
    kind is decided here, from the rows' columns, once, and carried as the batch's ``kind`` field
    (:class:`~simcse_weince.losses.layout.BatchKind`); nothing downstream reads it from a shape.

    Rows from the token cache carry their ``sentence_key`` (computed once, when the cache was built); for
    rows without one it is computed here from the ids, the same key.
    """

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, rows: list[dict]) -> dict:
        n = 1
        while token_column_names(n)[0] in rows[0]:
            n += 1
        kind = BatchKind.of_width(n)
        if kind.rows:
            return self.collate_columns(rows, n) | {"kind": kind}
        ids = [r["input_ids"] for r in rows]
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        keys = [r["sentence_key"] if "sentence_key" in r else sentence_key(r["input_ids"]) for r in rows]
        batch["sentence_key"] = torch.tensor(keys, dtype=torch.int64)
        return dict(batch) | {"kind": kind}

    def collate_columns(self, rows: list[dict], n: int) -> dict[str, torch.Tensor]:
        """Rows of n texts (anchor, positive, hard negatives: the token cache's ``input_ids``, ``input_ids_1``,
        ...): ``input_ids`` and ``attention_mask`` (B, n, L), all texts padded to one length, and
        ``sentence_key`` (B, n). An absent hard negative (ids ``[]``) is all padding, attention mask 0, with the
        key :data:`~simcse_weince.losses.duplicates.ABSENT_KEY`."""
        names = [token_column_names(j) for j in range(n)]
        ids = [r[ids_name] for r in rows for ids_name, _, _ in names]  # row-major: row r's n texts together
        batch = self.tokenizer.pad({"input_ids": ids}, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        b = len(rows)
        out = {k: v.view(b, n, -1) for k, v in batch.items()}
        keys = [
            [
                r[key_name] if key_name in r else sentence_key(r[ids_name]) if r[ids_name] else ABSENT_KEY
                for ids_name, key_name, _ in names
            ]
            for r in rows
        ]
        out["sentence_key"] = torch.tensor(keys, dtype=torch.int64)
        return out
