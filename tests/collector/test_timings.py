"""The collector's timings and budgeted fingerprints, read back from the rank's files.

Data wait, sections, the TrainSession step time, the fingerprint when training
begins and the rotating slices of the fingerprint budget (docs/job-view.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest

from rankscribe.collector import ArrayDataset, SummaryCollector, TrainLoop, TrainSession
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.jobview.feed import (
    ARRIVAL_TIME_TAG,
    DATA_WAIT_TAG,
    FINGERPRINT_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
    SYNC_SECTION,
)
from rankscribe.writer.reader import scalars
from tests._support.clocks import ManualClock

NO_LANDSCAPE = {"collect_landscape": None}
SLEEP = 0.004


def rank_scalars(directory: Path) -> dict[str, dict[int, float]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return {tag: dict(points) for tag, points in scalars(path).items()}


class SlowData(ArrayDataset):
    """Takes SLEEP of the clock before handing out each batch: a loader the steps wait for."""

    clock: ManualClock

    def __iter__(self) -> Iterator[Any]:
        for batch in super().__iter__():
            self.clock.advance(SLEEP)
            yield batch


def test_the_data_wait_is_the_time_between_steps_within_an_epoch(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(6)
    slow = SlowData(*data.dataset.columns, batch_size=2)
    slow.clock = collector_clock
    collector = SummaryCollector(tmp_path, collect_freq=3, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(lambda batch: 0.5, network=data.network).train(2, slow, callbacks=[collector])
    waits = rank_scalars(tmp_path)[DATA_WAIT_TAG]
    # the first step of each epoch has none: between epochs is no data wait
    assert sorted(waits) == [2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
    assert waits == {step: pytest.approx(SLEEP) for step in waits}
    # the steps themselves take no time: the wait is not counted in the step time
    times = rank_scalars(tmp_path)[STEP_TIME_TAG]
    assert times == {step: 0.0 for step in range(1, 13)}


def test_sections_add_up_within_a_step_and_become_rank_tags(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)

    def step(batch: Any) -> float:
        for _ in range(2):
            with collector.section("compute"):
                collector_clock.advance(SLEEP)
        with collector.section("io.read-1"):
            pass
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)
    compute = found[f"{SECTION_TAG_PREFIX}compute"]
    assert sorted(compute) == [1, 2, 3, 4]  # collected (1, 2, 4) and quiet (3) steps alike
    assert compute == {step: pytest.approx(2 * SLEEP) for step in compute}
    assert found[f"{SECTION_TAG_PREFIX}io.read-1"] == {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}
    assert found[STEP_TIME_TAG] == {step: pytest.approx(2 * SLEEP) for step in compute}


def test_the_arrival_is_the_step_time_less_the_sync_section(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(6)
    collector = SummaryCollector(tmp_path, collect_freq=3, collect_specified_data=NO_LANDSCAPE)

    def step(batch: Any) -> float:
        with collector.section("compute"):
            collector_clock.advance(3 * SLEEP)
        with collector.section(SYNC_SECTION):  # the collective: waits for the others
            collector_clock.advance(SLEEP)
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)
    arrival = found[ARRIVAL_TIME_TAG]
    assert sorted(arrival) == list(range(1, 7))  # collected (1, 3, 6) and quiet steps alike
    assert arrival == {step: pytest.approx(3 * SLEEP) for step in arrival}
    assert found[STEP_TIME_TAG] == {step: pytest.approx(4 * SLEEP) for step in arrival}
    assert found[f"{SECTION_TAG_PREFIX}{SYNC_SECTION}"] == {
        step: pytest.approx(SLEEP) for step in arrival
    }


def test_steps_without_a_sync_section_have_no_arrival(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)

    def step(batch: Any) -> float:
        with collector.section("compute"):
            collector_clock.advance(SLEEP)
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    assert ARRIVAL_TIME_TAG not in rank_scalars(tmp_path)


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("", CollectorValueError),
        ("a/b", CollectorValueError),
        ("naïve", CollectorValueError),
        ("two words", CollectorValueError),
        (5, CollectorTypeError),
        (None, CollectorTypeError),
    ],
)
def test_a_bad_section_name_is_refused_naming_the_argument(
    tmp_path: Path, name: Any, error: type
) -> None:
    collector = SummaryCollector(tmp_path)
    with pytest.raises(error, match=r"'name'"):
        collector.section(name)
    assert issubclass(error, (TypeError, ValueError))


def test_a_train_session_records_the_time_between_step_calls(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(5)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)
    with TrainSession(
        [collector], network=data.network, train_dataset=data.dataset, epochs=2
    ) as session:
        for _ in session.epochs():
            for batch in data.dataset:
                collector_clock.advance(SLEEP)  # the script's own step
                with collector.section("compute"):
                    collector_clock.advance(SLEEP / 2)
                session.step(batch, 0.5)
    found = rank_scalars(tmp_path)
    times = found[STEP_TIME_TAG]
    assert sorted(times) == list(range(1, 11))
    assert times == {step: pytest.approx(1.5 * SLEEP) for step in times}, times
    assert DATA_WAIT_TAG not in found  # inside the step in a session: nothing to tell apart
    compute = found[f"{SECTION_TAG_PREFIX}compute"]
    assert compute == {step: pytest.approx(SLEEP / 2) for step in range(1, 11)}


def _expected(network: Any, start: int, stop: int) -> float:
    raw = b"".join(np.ascontiguousarray(value).tobytes() for _, value in network.named_parameters())
    return float(crc32c.crc32c(raw[start:stop]) & 0xFFFFFF)


def test_fingerprints_hash_a_rotating_slice_within_the_budget(model: Any, tmp_path: Path) -> None:
    data = model(12)
    big = np.arange(600, dtype=np.float32)  # 2400 bytes: 3 slices of 1024 with the rest
    data.network.parameters["big.weight"] = big
    total = sum(np.asarray(value).nbytes for _, value in data.network.named_parameters())
    assert 2048 < total <= 3072
    expected: dict[int, float] = {}
    at_start = _expected(data.network, 0, total)

    def step(batch: Any) -> float:
        big[:] += 1.0
        return 0.5

    collector = SummaryCollector(
        tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE, fingerprint_budget=1024
    )

    loop = TrainLoop(step, network=data.network)
    original_step_end = collector.step_end

    # The expected slice fingerprint after each step, computed just before the collector's.
    def step_end(run_context: Any) -> None:
        current = run_context.original_args().cur_step_num
        index = (current // 2) % 3
        start = index * 1024
        expected[current] = _expected(data.network, start, min(start + 1024, total))
        original_step_end(run_context)

    collector.step_end = step_end  # type: ignore[method-assign]
    loop.train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)[FINGERPRINT_TAG]
    assert sorted(found) == [0, 1, 2, 4, 6, 8, 10, 12]
    assert found[0] == at_start  # when training begins: every byte, whatever the budget
    for current in (1, 2, 4, 6, 8, 10, 12):
        assert found[current] == expected[current], current
    # every byte is covered: slices 0, 1 and 2 all occur
    assert {(current // 2) % 3 for current in found if current} == {0, 1, 2}


def test_the_start_fingerprint_covers_every_byte_before_any_update(
    model: Any, tmp_path: Path
) -> None:
    data = model(3)
    before = _expected(data.network, 0, 10**9)

    def step(batch: Any) -> float:
        data.network["fc.bias"][:] += 1.0
        return 0.5

    collector = SummaryCollector(
        tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE, fingerprint_budget=1024
    )
    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)[FINGERPRINT_TAG]
    assert found[0] == before
    assert found[1] != before


@pytest.mark.parametrize(
    ("budget", "error"),
    [
        (1023, CollectorValueError),
        (0, CollectorValueError),
        (-5, CollectorValueError),
        (1.5e6, CollectorTypeError),
        ("4MiB", CollectorTypeError),
        (True, CollectorTypeError),
    ],
)
def test_a_bad_fingerprint_budget_is_refused_naming_the_argument(
    tmp_path: Path, budget: Any, error: type
) -> None:
    with pytest.raises(error, match="'fingerprint_budget'"):
        SummaryCollector(tmp_path, fingerprint_budget=budget)


def test_the_default_budget_is_4_mib() -> None:
    default = inspect.signature(SummaryCollector).parameters["fingerprint_budget"].default
    assert default == 4 * 1024 * 1024


def test_the_timing_clock_must_be_a_function() -> None:
    # (Every test with the collector_clock fixture uses timing_clock's clock.)
    from rankscribe.collector.testing import timing_clock

    with (
        pytest.raises(CollectorTypeError, match="argument 'clock' must be a function"),
        timing_clock(5.0),  # type: ignore[arg-type]
    ):
        pass


def test_timings_written_between_steps_leave_the_scripts_pending_values_alone(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # Steps of 0.05 s have their timings written at once, at each step's end: a value the
    # script added at step 3 must still land at the step of the script's own record (5).
    data = model(6)
    collector = SummaryCollector(tmp_path, collect_freq=100, collect_specified_data=NO_LANDSCAPE)
    seen = {"step": 0}

    def step(batch: Any) -> float:
        seen["step"] += 1
        collector_clock.advance(0.05)
        record = collector.record
        assert record is not None
        if seen["step"] == 3:
            record.add_value("scalar", "user/metric", 7.0)
        if seen["step"] == 5:
            record.record(5)
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)
    assert found["user/metric"] == {5: 7.0}
    assert found[STEP_TIME_TAG] == {step: pytest.approx(0.05) for step in range(1, 7)}


class TwoSameRanks:
    """An MPI communicator's stand-in: two ranks that hold the same arrays (the sum: 2x)."""

    def Allreduce(self, send: np.ndarray, receive: np.ndarray) -> None:
        receive[...] = send * 2

    def Get_size(self) -> int:
        return 2


def test_allreduce_gradients_records_each_arrays_local_norm_then_averages_in_place(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)
    rng = np.random.default_rng(0)
    sent: list[list[np.ndarray]] = []
    averaged: list[list[np.ndarray]] = []

    def step(batch: Any) -> float:
        grads: list[np.ndarray] = [
            rng.standard_normal(6000).astype(np.float32),
            rng.standard_normal(3),
        ]
        sent.append([grad.copy() for grad in grads])
        collector_clock.advance(SLEEP)
        collector.allreduce_gradients(TwoSameRanks(), grads)
        averaged.append(grads)
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)
    for step_number, arrays in enumerate(sent, start=1):
        for bucket, array in enumerate(arrays):
            expected = float(np.linalg.norm(array.astype(np.float64)))
            recorded = found[f"{GRADIENT_NORM_TAG_PREFIX}{bucket}"][step_number]
            assert recorded == pytest.approx(expected, rel=1e-6)  # float32 in the file
            # The peak: the largest norm of a row of 256 consecutive elements (the last
            # row shorter; an array of 3 elements is one row: its norm).
            rows = [array[first : first + 256] for first in range(0, array.size, 256)]
            largest = max(float(np.linalg.norm(row.astype(np.float64))) for row in rows)
            peak = found[f"{GRADIENT_PEAK_TAG_PREFIX}{bucket}"][step_number]
            assert peak == pytest.approx(largest, rel=1e-6)
            # (2 x itself) / 2 ranks: the same values back, in the caller's arrays
            assert np.array_equal(averaged[step_number - 1][bucket], array)
    assert found[GRADIENT_READY_TAG] == {step: pytest.approx(SLEEP) for step in range(1, 5)}


def test_in_a_train_session_the_ready_time_is_from_the_steps_own_start(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # A TrainSession calls step_begin after the step: the ready time is taken from the
    # step's own start (the previous step() call), never from the step before it.
    data = model(5)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)
    with TrainSession(
        [collector], network=data.network, train_dataset=data.dataset, epochs=1
    ) as session:
        for _ in session.epochs():
            for step, batch in enumerate(data.dataset, start=1):
                collector_clock.advance(step * SLEEP)  # forward and backward: longer each step
                collector.allreduce_gradients(TwoSameRanks(), [np.ones(4)])
                collector_clock.advance(SLEEP)  # the optimizer's step
                session.step(batch, 0.5)
    found = rank_scalars(tmp_path)
    expected = {step: pytest.approx(step * SLEEP) for step in range(1, 6)}
    assert found[GRADIENT_READY_TAG] == expected
    # A loop's own reduce is no arrival unless the loop marks it (the DDP probe's is:
    # tests/collector_torch/test_slow_backward.py).
    assert ARRIVAL_TIME_TAG not in found
    assert found[STEP_TIME_TAG] == {step: pytest.approx((step + 1) * SLEEP) for step in expected}


def test_a_loops_own_reduce_inside_a_sync_section_gives_the_sections_arrival(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE)

    def step(batch: Any) -> float:
        collector_clock.advance(2 * SLEEP)
        with collector.section(SYNC_SECTION):
            collector_clock.advance(SLEEP)  # a collective of the loop's own, before the reduce
            collector.allreduce_gradients(TwoSameRanks(), [np.ones(4)])
        return 0.5

    TrainLoop(step, network=data.network).train(1, data.dataset, callbacks=[collector])
    found = rank_scalars(tmp_path)
    # The step time less the sync section (2 x SLEEP), not the gradients' ready time (3 x).
    assert found[ARRIVAL_TIME_TAG] == {step: pytest.approx(2 * SLEEP) for step in range(1, 5)}
    assert found[GRADIENT_READY_TAG] == {step: pytest.approx(3 * SLEEP) for step in range(1, 5)}


def test_allreduce_gradients_refuses_what_it_cannot_reduce(tmp_path: Path) -> None:
    collector = SummaryCollector(tmp_path)
    comm = TwoSameRanks()
    with pytest.raises(CollectorTypeError, match="'comm' should be an MPI communicator"):
        collector.allreduce_gradients(object(), [np.zeros(3)])
    with pytest.raises(CollectorTypeError, match="'gradients' should be a NumPy array or a"):
        collector.allreduce_gradients(comm, [])
    with pytest.raises(CollectorTypeError, match=r"gradients\[1\] should be a NumPy array of"):
        collector.allreduce_gradients(comm, [np.zeros(3), [1.0, 2.0]])
    with pytest.raises(CollectorValueError, match=r"gradients\[0\] should be a writeable"):
        collector.allreduce_gradients(comm, [np.zeros((4, 4))[:, 0]])
    with pytest.raises(CollectorTypeError, match="'average' should be a bool"):
        collector.allreduce_gradients(comm, np.zeros(3), average=1)  # type: ignore[arg-type]
    single = np.ones(3)
    collector.allreduce_gradients(comm, single, average=False)  # outside training: no record
    assert single.tolist() == [2.0, 2.0, 2.0]
