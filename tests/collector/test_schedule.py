"""The collection schedule: tensor ranges worked out by hand, decisions, shares across ranks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    Callback,
    Collect,
    CollectionSchedule,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.ranks import RankInfo
from rankscribe.writer import tensor_summary
from tests.collector.conftest import steps_by_tag
from tests.collector.coordinators import RankZeroAlone


def tensor_collect_range(total: int, collect_freq: int, tensor_freq: int | None) -> list[int]:
    """The units at which a run of ``total`` units collects tensors (MindSpore's rule), as
    a schedule started at unit 0 lists them."""
    schedule = CollectionSchedule(collect_freq, tensor_freq)
    schedule.first(0, total)
    return schedule.job_tensor_units


@pytest.mark.parametrize(
    ("total", "freq", "tensor_freq", "expected"),
    [
        (60, 3, None, list(range(0, 58, 3))),  # 21 > 20 entries, 60 // 19 = 3
        (60, 3, 4, list(range(0, 61, 4))),
        (20, 10, None, [0, 10, 20]),  # "when the total steps is 20, ... 3 steps"
        (600, 10, None, list(range(0, 600, 31))[:20]),  # 61 > 20, 600 // 19 = 31
        (30, 1, None, list(range(0, 21))),  # 30 // 19 = 1: range(0, 31)[:21]
        (19, 1, None, list(range(0, 20))),  # 20 entries: not over the limit
        (2, 3, None, [0]),
        (0, 3, None, [0]),
    ],
)
def test_tensor_collect_range(
    total: int, freq: int, tensor_freq: int | None, expected: list[int]
) -> None:
    assert list(tensor_collect_range(total, freq, tensor_freq)) == expected


def test_tensor_range_has_at_most_twenty_units_by_default() -> None:
    # the docstring's example: collect_freq 10 and 600 steps collect tensors 20 times
    assert len(tensor_collect_range(600, 10, None)) == 20


@pytest.mark.parametrize(("sink_mode", "tensor_units"), [(False, [1, 60]), (True, [1, 2])])
def test_a_run_counts_steps_or_in_sink_mode_epochs(
    model: Any, tmp_path: Path, sink_mode: bool, tensor_units: list[int]
) -> None:
    # 2 epochs of 30 batches: 60 units, or 2 in sink mode (one callback step per epoch).
    data = model(30)
    last = tensor_units[-1]
    collector = SummaryCollector(
        tmp_path,
        collect_freq=1,
        collect_tensor_freq=last,
        collect_specified_data={"collect_landscape": None},
    )
    loop = TrainLoop(lambda batch: np.float32(0.5), network=data.network)
    loop.train(2, data.dataset, callbacks=[collector], dataset_sink_mode=sink_mode)
    assert collector.schedule is not None
    assert collector.schedule.job_tensor_units == tensor_units


def decisions(schedule: CollectionSchedule, units: range, total: int) -> dict[int, Collect]:
    found = {units[0]: schedule.first(units[0], total)}
    for unit in units[1:]:
        found[unit] = schedule.next(unit)
    return {unit: decision for unit, decision in found.items() if decision is not Collect.NOTHING}


def test_decisions_of_one_process() -> None:
    schedule = CollectionSchedule(3, 4)
    found = decisions(schedule, range(1, 13), 12)
    assert found == {
        1: Collect.EVERYTHING,
        3: Collect.ALL_BUT_TENSOR,
        4: Collect.TENSOR_ONLY,
        6: Collect.ALL_BUT_TENSOR,
        8: Collect.TENSOR_ONLY,
        9: Collect.ALL_BUT_TENSOR,
        12: Collect.EVERYTHING,
    }
    assert schedule.job_tensor_units == [1, 4, 8, 12]


def test_plugin_filters() -> None:
    assert Collect.EVERYTHING.plugin_filter is None
    tensor_only = Collect.TENSOR_ONLY.plugin_filter
    all_but = Collect.ALL_BUT_TENSOR.plugin_filter
    assert tensor_only is not None and all_but is not None
    assert [tensor_only(p) for p in ("tensor", "scalar", "histogram")] == [True, False, False]
    assert [all_but(p) for p in ("tensor", "scalar", "image")] == [False, True, True]
    assert Collect.ALL_BUT_TENSOR.extracts and not Collect.TENSOR_ONLY.extracts


def test_a_unit_is_collected_once() -> None:
    schedule = CollectionSchedule(3)
    schedule.first(1, 6)
    assert schedule.next(3) is Collect.EVERYTHING
    assert schedule.next(3) is Collect.NOTHING  # epoch_end of the same step


def test_reset_starts_a_new_run() -> None:
    schedule = CollectionSchedule(3)
    schedule.first(1, 6)
    schedule.reset()
    assert not schedule.started
    assert schedule.first(1, 6) is Collect.EVERYTHING


def test_ranks_get_disjoint_contiguous_shares() -> None:
    shares = []
    for rank in range(2):
        schedule = CollectionSchedule(3, world_size=2, rank=rank)
        schedule.first(1, 60)
        shares.append(schedule.own_tensor_units)
    single = [1, *range(3, 58, 3)]
    assert shares == [single[:10], single[10:]]
    # rank 1 does not record tensors at the first step; rank 0 does
    assert CollectionSchedule(3, world_size=2, rank=1).first(1, 60) is Collect.ALL_BUT_TENSOR
    assert CollectionSchedule(3, world_size=2, rank=0).first(1, 60) is Collect.EVERYTHING


@given(
    total=st.integers(0, 400),
    freq=st.integers(1, 40),
    tensor_freq=st.none() | st.integers(1, 40),
    world_size=st.integers(1, 5),
)
def test_rank_tensor_steps_partition_the_single_process_steps(
    total: int, freq: int, tensor_freq: int | None, world_size: int
) -> None:
    units = range(1, total + 1) if total else range(1, 2)

    def tensor_steps(rank: int, size: int) -> list[int]:
        schedule = CollectionSchedule(freq, tensor_freq, world_size=size, rank=rank)
        found = decisions(schedule, units, total)
        return [u for u, d in found.items() if d in (Collect.EVERYTHING, Collect.TENSOR_ONLY)]

    single = tensor_steps(0, 1)
    per_rank = [tensor_steps(rank, world_size) for rank in range(world_size)]
    assert [unit for share in per_rank for unit in share] == single
    assert max(map(len, per_rank)) - min(map(len, per_rank)) <= 1


def tensor_units_of_ranks(
    lengths: list[int], freq: int, tensor_freq: int | None = None, agreed: bool = True
) -> list[list[int]]:
    """The units at which each rank records tensors when rank r runs ``lengths[r]`` units
    (from unit 1) and the ranks agreed on ``lengths`` (or did not: each uses its own)."""
    per_rank = []
    for rank, total in enumerate(lengths):
        schedule = CollectionSchedule(freq, tensor_freq, world_size=len(lengths), rank=rank)
        schedule.agree_run_lengths(lengths if agreed else None)
        found = decisions(schedule, range(1, max(total, 1) + 1), total)
        tensors = (Collect.EVERYTHING, Collect.TENSOR_ONLY)
        per_rank.append([unit for unit, decision in found.items() if decision in tensors])
    return per_rank


def test_shards_of_38_and_37_steps_record_each_tensor_step_once() -> None:
    # 75 rows over 2 ranks, one row a step: the job's tensor steps are those of 38 steps,
    # range(0, 39, 38 // 19)[:20]; step 38 goes to rank 0, the only rank that runs it.
    job = [1, *range(2, 39, 2)]
    assert tensor_units_of_ranks([38, 37], 1) == [[1, *range(2, 19, 2), 38], list(range(20, 37, 2))]
    # each rank on its own steps: steps 12-18 twice, steps 3-9 and 20-38 of the job never
    # (what the ranks did before they agreed on the run lengths)
    alone = tensor_units_of_ranks([38, 37], 1, agreed=False)
    assert sorted(set(alone[0]) & set(alone[1])) == [12, 14, 16, 18]
    assert not set(job) <= set(alone[0]) | set(alone[1])


@given(
    lengths=st.lists(st.integers(0, 200), min_size=1, max_size=5),
    freq=st.integers(1, 40),
    tensor_freq=st.none() | st.integers(1, 40),
)
def test_agreed_shares_cover_the_longest_run_once(
    lengths: list[int], freq: int, tensor_freq: int | None
) -> None:
    per_rank = tensor_units_of_ranks(lengths, freq, tensor_freq)
    recorded = sorted(unit for share in per_rank for unit in share)
    # the steps one process running the longest shard records tensors at, each once
    assert recorded == tensor_units_of_ranks([max(lengths)], freq, tensor_freq)[0]
    for share, total in zip(per_rank, lengths, strict=True):
        assert all(unit <= max(total, 1) for unit in share)  # a rank records what it runs


def test_equal_lengths_share_as_before() -> None:
    assert tensor_units_of_ranks([60, 60], 3) == tensor_units_of_ranks([60, 60], 3, agreed=False)


def test_missed_tensor_units_are_those_after_the_last_unit_run() -> None:
    schedule = CollectionSchedule(1, world_size=2, rank=1)
    schedule.agree_run_lengths([38, 37])
    schedule.first(1, 37)
    assert schedule.missed_tensor_units(25) == list(range(26, 37, 2))
    assert schedule.missed_tensor_units(37) == []


def _tensor_units_reached(schedule: CollectionSchedule, first: int, last: int) -> list[int]:
    """The units from ``first`` to ``last`` whose decision keeps tensors, the schedule
    walked as the collector walks it (from one collected unit to the next)."""
    kept = []
    unit = first
    while unit <= last:
        decision = schedule.next(unit)
        if decision in (Collect.EVERYTHING, Collect.TENSOR_ONLY):
            kept.append(unit)
        unit = schedule.next_collected(unit)
    return kept


def test_a_run_nobody_knows_the_length_of_takes_its_tensor_units_open_ended() -> None:
    """No rank knows its run's length (0 everywhere, as a loop over an iterable with no
    length reports): with collect_tensor_freq every multiple of it, without end; by
    default the first unit, then collect_freq, twice it, four times it ... (the spacing
    doubling, 20 units in all); and none said missed at the end, wherever it comes."""
    schedule = CollectionSchedule(5, 4)
    assert schedule.first(1, 0) is Collect.EVERYTHING
    assert _tensor_units_reached(schedule, 2, 100_000) == list(range(4, 100_001, 4))
    assert schedule.missed_tensor_units(100_000) == []
    default = CollectionSchedule(10)
    assert default.first(1, 0) is Collect.EVERYTHING
    assert _tensor_units_reached(default, 2, 100) == [10, 20, 40, 80]
    default.would_collect(10**12)  # the list to its end
    assert default.job_tensor_units == [1, *(10 << power for power in range(19))]
    assert default.missed_tensor_units(100) == []


def test_open_ended_tensor_units_go_to_the_ranks_in_turn() -> None:
    """Across 3 ranks that all report no length: the job's i-th tensor unit is rank
    i % 3's, each unit recorded by exactly one rank, and together the single process's."""
    shares = []
    for rank in range(3):
        schedule = CollectionSchedule(5, 4, world_size=3, rank=rank)
        schedule.agree_run_lengths([0, 0, 0])
        first = schedule.first(1, 0)
        assert (first is Collect.EVERYTHING) == (rank == 0)
        shares.append(([1] if rank == 0 else []) + _tensor_units_reached(schedule, 2, 400))
    job = [1, *range(4, 401, 4)]
    assert sorted(unit for share in shares for unit in share) == job
    for rank, share in enumerate(shares):
        assert share == job[rank::3]


@pytest.mark.parametrize(
    ("lengths", "error"),
    [
        ([38], ValueError),  # one per rank: 2 ranks
        ([38, -1], ValueError),
        ([38, True], ValueError),
        ([38, 37.0], ValueError),
        ("38, 37", TypeError),
        (38, TypeError),
    ],
)
def test_run_lengths_must_be_one_count_per_rank(lengths: Any, error: type[Exception]) -> None:
    schedule = CollectionSchedule(1, world_size=2, rank=0)
    with pytest.raises(error, match="run_lengths must be a list of one int >= 0 per rank"):
        schedule.agree_run_lengths(lengths)


class StopAfter(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def step_end(self, run_context: RunContext) -> None:
        if run_context.original_args().cur_step_num == self.step:
            run_context.request_stop()


def train_stopping(directory: Path, world_size: int, stop_after: int) -> SummaryCollector:
    """Rank 0 of ``world_size`` (its rank 1 never answers) trains 20 steps, stops after one."""
    network = ArrayNetwork({"w": np.ones(3, np.float32)})
    info = RankInfo(0, world_size, 0, world_size, "h", "pmi" if world_size > 1 else "single")
    collector = SummaryCollector(
        directory,
        collect_freq=1,
        collect_specified_data={"collect_landscape": None},
        rank_info=info,
        coordinator=RankZeroAlone(info) if world_size > 1 else None,
        merge_timeout=30,
    )

    def step(batch: Any) -> float:
        tensor_summary("weights", network["w"])
        return 1.0

    TrainLoop(step, network=network).train(
        1,
        ArrayDataset(np.zeros((20, 2), np.float32), batch_size=1),
        callbacks=[StopAfter(stop_after), collector],
    )
    collector.close()
    return collector


def test_a_rank_that_cannot_agree_or_stops_early_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        train_stopping(tmp_path, 2, stop_after=3)
    warnings = [record.getMessage() for record in caplog.records]
    # rank 1 never said its run length: rank 0 shares as if both ran its 20 steps
    [unagreed] = [line for line in warnings if "run lengths" in line]
    assert unagreed.startswith(
        "Rank 0 could not learn the other ranks' run lengths (ranks 1 did not say theirs in "
        "time): it shares the job's tensor steps as if every rank ran its 20 units"
    )
    # its share of 1..20 is 1..10; it stopped after step 3, so no rank records 4..10
    [stopped] = [line for line in warnings if "stopped at step" in line]
    assert stopped.startswith(
        "Rank 0 stopped at step 3, before the tensor steps 4, 5, 6, 7, 8, 9, 10 of its share: "
        "no rank records tensor data there"
    )
    assert steps_by_tag(tmp_path / "rank_0")[("tensor", "weights")] == [1, 2, 3]


def test_a_single_process_that_stops_early_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        train_stopping(tmp_path, 1, stop_after=3)
    assert not [record for record in caplog.records if "stopped at step" in record.getMessage()]
    assert steps_by_tag(tmp_path)[("tensor", "weights")] == [1, 2, 3]
