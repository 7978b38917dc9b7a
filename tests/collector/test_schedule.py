"""The collection schedule: tensor ranges worked out by hand, decisions, shares across ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.collector import Collect, CollectionSchedule, SummaryCollector, TrainLoop


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
