"""Batches from one source at a time: the epoch's order against its definition (a loop over the global batches),
the shards accelerate hands the processes, set_epoch through accelerate, and skipping on resume."""

from __future__ import annotations

from collections import Counter

import pytest
from accelerate.data_loader import BatchSamplerShard, prepare_data_loader, skip_first_batches
from torch.utils.data import BatchSampler, DataLoader

from simcse_weince.training.source_batches import (
    SourceOrder,
    batches_per_source,
    check_sources,
    source_ranges,
)

RANGES = [(0, 50), (50, 70), (70, 107)]  # 50, 20 and 37 rows


def _source_of(row: int, ranges=RANGES) -> int:
    return next(s for s, (a, b) in enumerate(ranges) if a <= row < b)


def test_source_ranges_follow_the_sources_and_are_cut_at_the_kept_rows() -> None:
    assert source_ranges([50, 20, 37], 107) == RANGES
    assert source_ranges([50, 20, 37], 60) == [(0, 50), (50, 60), (60, 60)]


@pytest.mark.parametrize("mode", ["proportional", "round_robin"])
def test_every_global_batch_is_one_source_and_no_row_repeats_in_an_epoch(mode: str) -> None:
    g = 8
    order = SourceOrder(RANGES, g, mode, seed=5)
    rows = list(order)
    assert len(rows) == len(order) and len(rows) % g == 0
    assert len(set(rows)) == len(rows)  # a permutation of the rows it keeps
    batches = [rows[i : i + g] for i in range(0, len(rows), g)]
    sources = [{_source_of(r) for r in batch} for batch in batches]
    assert all(len(s) == 1 for s in sources)
    counts = Counter(s.pop() for s in sources)
    if mode == "proportional":  # every full global batch of each source: ⌊50/8⌋, ⌊20/8⌋, ⌊37/8⌋
        assert [counts[s] for s in range(3)] == [6, 2, 4] == batches_per_source(RANGES, g, mode)
    else:  # the sources in turn, as many rounds as the smallest source fills
        assert [_source_of(b[0]) for b in batches] == [0, 1, 2, 0, 1, 2]
        assert batches_per_source(RANGES, g, mode) == [2, 2, 2]


def test_the_order_is_a_function_of_seed_and_epoch() -> None:
    a, b = SourceOrder(RANGES, 8, "proportional", 5), SourceOrder(RANGES, 8, "proportional", 5)
    assert list(a) == list(b)
    b.set_epoch(1)
    epoch1 = list(b)
    assert list(a) != epoch1
    a.set_epoch(1)
    assert list(a) == epoch1
    assert list(SourceOrder(RANGES, 8, "proportional", 6)) != list(SourceOrder(RANGES, 8, "proportional", 5))


def test_proportional_draws_sources_in_every_order_over_epochs() -> None:
    """Over epochs the first batch's source is spread as k_s / Σk (6/12, 2/12, 4/12): a shuffled order of the
    batches, not source after source."""
    order = SourceOrder(RANGES, 8, "proportional", 0)
    first = Counter()
    for e in range(600):
        order.set_epoch(e)
        first[_source_of(next(iter(order)))] += 1
    for s, share in enumerate((6 / 12, 2 / 12, 4 / 12)):
        assert abs(first[s] / 600 - share) < 4 * (share * (1 - share) / 600) ** 0.5


@pytest.mark.parametrize("processes", [2, 3])
def test_accelerates_shards_split_each_global_batch_between_the_processes(processes: int) -> None:
    """accelerate's BatchSamplerShard (split_batches off) gives process p chunk p of each global batch: the
    processes' batches of step i together are global batch i, one source, B rows each."""
    b = 4
    order = SourceOrder(RANGES, b * processes, "proportional", 1)
    rows = list(order)
    g = b * processes
    shards = [list(BatchSamplerShard(BatchSampler(order, b, False), processes, p)) for p in range(processes)]
    assert len({len(s) for s in shards}) == 1 and len(shards[0]) == len(rows) // g
    for i in range(len(shards[0])):
        step = [r for p in range(processes) for r in shards[p][i]]
        assert all(len(shards[p][i]) == b for p in range(processes))
        assert step == rows[i * g : (i + 1) * g]
        assert len({_source_of(r) for r in step}) == 1


def test_set_epoch_reaches_the_order_through_accelerate_and_a_resume_skips_to_the_same_batches() -> None:
    """The Trainer calls set_epoch on accelerate's loader and, resuming mid-epoch, skip_first_batches on it: the
    skipped loader continues the same epoch's batches (process p: chunk p of each global batch)."""
    for processes in (1, 2):
        for p in range(processes):
            order = SourceOrder(RANGES, 4 * processes, "proportional", 2)
            loader = prepare_data_loader(
                DataLoader(list(range(107)), sampler=order, batch_size=4), num_processes=processes, process_index=p
            )
            loader.set_epoch(3)
            assert order.epoch == 3
            epoch3 = [t.tolist() for t in loader]
            skipped = skip_first_batches(loader, 2)
            skipped.set_epoch(3)  # the Trainer's order on resume (transformers 5.6 to 5.25): skip, then set_epoch
            assert [t.tolist() for t in skipped] == epoch3[2:]
            reference = SourceOrder(RANGES, 4 * processes, "proportional", 2)
            reference.set_epoch(3)
            expected = [rows[p * 4 : (p + 1) * 4] for _, rows in reference.batches()]
            assert epoch3 == expected


def test_a_source_smaller_than_a_global_batch_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"b\.txt has 20 row\(s\), fewer than one global batch \(16 × 2"):
        check_sources(RANGES, ["a.txt", "b.txt", "c.txt"], 32, "16 × 2 process(es)")
    check_sources(RANGES, ["a.txt", "b.txt", "c.txt"], 20, "10 × 2 process(es)")


def test_only_the_two_source_modes_make_an_order() -> None:
    with pytest.raises(ValueError, match="expected proportional or round_robin"):
        SourceOrder(RANGES, 8, "mixed", 0)
    assert sorted(SourceOrder([(3, 11)], 8, "round_robin", 0)) == list(range(3, 11))  # one source: all its rows
