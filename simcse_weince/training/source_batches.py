"""Batches drawn from one training source at a time (sentence-transformers' multi-dataset batch samplers).

A corpus of S sources (files, or a Hub dataset) holds them as consecutive row ranges ``[a_s, b_s)`` of one
table. With ``mixed`` (the default) the Trainer's own sampler shuffles all rows together, so a batch can hold
rows of every source. With ``proportional`` or ``round_robin`` every *global* batch — the ``G = B × W`` rows that
the W processes of a step score together (B per process) — comes from one source, so in-batch (and gathered)
negatives, the duplicate mask and WEINCE's tail fit never mix sources.

Each epoch ``e`` draws, from a generator seeded with ``seed + e``:

* a permutation of each source's rows, cut into ``k_s = ⌊n_s / G⌋`` global batches (the ``n_s mod G`` rows
  left over are that epoch's left-out rows: a different few each epoch, as they are shuffled);
* the order of the batches: ``proportional`` shuffles the multiset holding source ``s`` ``k_s`` times, so
  source ``s`` gives a share ``k_s / Σ k`` of the steps, about its share of the rows; ``round_robin`` takes the
  sources in turn, ``0, 1, …, S − 1, 0, 1, …``, for ``min_s k_s`` rounds (each source the same number of steps;
  the larger sources' other batches are left out of the epoch).

:class:`SourceOrder` yields the epoch's rows in that order, global batch after global batch: as the sampler of
a ``DataLoader`` of batch size B it makes W consecutive per-process chunks of each global batch, and accelerate's
``BatchSamplerShard`` (``split_batches`` off, the default) hands chunk ``p`` of every W to process ``p``. Its
length is a multiple of G, so no step is short and accelerate pads nothing. The order is a function of the seed
and the epoch only (``set_epoch``, which the Trainer calls through accelerate), so a run resumed mid-epoch skips
the same batches it trained.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, get_args

import torch
from torch.utils.data import Sampler

SourceBatches = Literal["mixed", "proportional", "round_robin"]
SOURCE_BATCHES: tuple[str, ...] = get_args(SourceBatches)


def source_ranges(rows_by_source: Sequence[int], kept: int) -> list[tuple[int, int]]:
    """The row range ``[a_s, b_s)`` of each source in a table of its rows, in order, cut to the first ``kept`` rows
    (``max_train_samples``); a source cut to nothing keeps an empty range."""
    ranges, start = [], 0
    for n in rows_by_source:
        end = min(start + n, kept)
        ranges.append((min(start, kept), end))
        start += n
    return ranges


def batches_per_source(ranges: Sequence[tuple[int, int]], global_batch: int, mode: SourceBatches) -> list[int]:
    """How many global batches each source gives per epoch: ``⌊n_s / G⌋`` (``proportional``), or the smallest of
    those for every source (``round_robin``)."""
    full = [(b - a) // global_batch for a, b in ranges]
    if mode == "round_robin":
        return [min(full)] * len(full)
    return full


def check_sources(ranges: Sequence[tuple[int, int]], names: Sequence[str], global_batch: int, batch: str) -> None:
    """Refuse a source too small to fill one global batch: it would never be trained on.

    Raises:
        ValueError: naming the source, its rows, the global batch and what to change.
    """
    for (a, b), name in zip(ranges, names, strict=True):
        if b - a < global_batch:
            raise ValueError(
                f"source_batches: {name} has {b - a} row(s), fewer than one global batch ({batch} = {global_batch}), "
                "so no batch could be drawn from it; expected a smaller batch, fewer processes, or source_batches: "
                "mixed"
            )


class SourceOrder(Sampler[int]):
    """The rows of an epoch, global batch after global batch, each global batch from one source (module docs).

    Args:
        ranges: each source's row range ``[a_s, b_s)``.
        global_batch: G, the rows of one step over all processes (per-process batch × processes).
        mode: ``proportional`` or ``round_robin``.
        seed: the epoch ``e`` draws from a generator seeded with ``seed + e``.
    """

    def __init__(self, ranges: Sequence[tuple[int, int]], global_batch: int, mode: SourceBatches, seed: int) -> None:
        if mode not in ("proportional", "round_robin"):
            raise ValueError(f"source_batches: expected proportional or round_robin for a source order, got {mode!r}")
        self.ranges, self.global_batch, self.mode, self.seed = list(ranges), global_batch, mode, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return sum(batches_per_source(self.ranges, self.global_batch, self.mode)) * self.global_batch

    def batches(self) -> list[tuple[int, list[int]]]:
        """This epoch's global batches, in order, as ``(source, rows)``."""
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        k = batches_per_source(self.ranges, self.global_batch, self.mode)
        cut = []
        for (a, b), n in zip(self.ranges, k, strict=True):
            rows = (a + torch.randperm(b - a, generator=g)).tolist()
            cut.append([rows[i * self.global_batch : (i + 1) * self.global_batch] for i in range(n)])
        if self.mode == "round_robin":
            order = [s for _ in range(k[0] if k else 0) for s in range(len(k))]
        else:
            labels = [s for s, n in enumerate(k) for _ in range(n)]
            order = [labels[i] for i in torch.randperm(len(labels), generator=g).tolist()]
        taken = [0] * len(k)
        out = []
        for s in order:
            out.append((s, cut[s][taken[s]]))
            taken[s] += 1
        return out

    def __iter__(self) -> Iterator[int]:
        for _, rows in self.batches():
            yield from rows
