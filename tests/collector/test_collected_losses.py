"""A collected step whose only value is the loss (read on the host) is kept with the step
times and written with them (docs/collector-cost.md, "A collected step of the loss
alone"): the file holds what ``record.record`` of the step would write, in step order;
anything else to record at the step sends it through the record at once. Most of these
steps are light (planned, and taken on the quiet step's path): the tests' runs hold them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import Callback, RunContext, SummaryCollector, TrainLoop
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.writer import scalar_summary, tensor_summary
from rankscribe.writer.events import load_dir
from tests._support.clocks import ManualClock
from tests.collector.conftest import values_by_tag

LOSS_TAG = "loss/auto"
COLLECT_FREQ = 4
#: The collector's options that leave the loss the collected steps' only value.
LOSS_ALONE: dict[str, Any] = {
    "keep_default_action": False,
    "collect_specified_data": {"collect_metric": True},
    "fingerprints": False,
}


def loss_of(step: int) -> float:
    return 1.0 / step


class Counting:
    """The step function: its step number, and the loss it returns."""

    def __init__(self, clock: ManualClock | None = None, seconds: float = 0.0) -> None:
        self.step, self.clock, self.seconds = 0, clock, seconds

    def __call__(self, batch: Any) -> float:
        self.step += 1
        if self.clock is not None:
            self.clock.advance(self.seconds)
        return loss_of(self.step)


def summary_events(directory: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every summary event's step and scalars, in file order."""
    found = []
    for event in load_dir(directory):
        if event.what == "summary" and event.step is not None:
            found.append((event.step, {value.tag: value.value for value in event.values}))
    return found


def test_each_collected_loss_is_one_event_of_its_step_with_its_timings(
    model: Any, tmp_path: Path
) -> None:
    data = model(24)
    collector = SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE)
    TrainLoop(Counting(), network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector]
    )
    events = summary_events(tmp_path)
    steps = [step for step, _ in events]
    assert steps == sorted(steps)  # the file stays in step order
    with_loss = [(step, values) for step, values in events if LOSS_TAG in values]
    collected = [1, *range(COLLECT_FREQ, 25, COLLECT_FREQ)]
    assert [step for step, _ in with_loss] == collected
    for step, values in with_loss:
        # one event of the step, holding its loss and its step time
        assert values[LOSS_TAG] == pytest.approx(loss_of(step), rel=1e-6)
        assert STEP_TIME_TAG in values
        assert sum(1 for other, _ in events if other == step) == 1


@pytest.mark.parametrize("source", ["add_value", "summary operator"])
def test_what_else_a_collected_step_holds_is_recorded_at_that_step(
    model: Any, tmp_path: Path, source: str
) -> None:
    data = model(16)
    collector = SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE)

    class AddsAtEight(Callback):
        """Before the collector's step_end (first in the list), at step 8 only."""

        def step_end(self, run_context: RunContext) -> None:
            if run_context.original_args().cur_step_num != 8:
                return
            if source == "add_value":
                assert collector.record is not None
                collector.record.add_value("scalar", "mine", 8.0)
            else:
                scalar_summary("mine", 8.0)

    TrainLoop(Counting(), network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[AddsAtEight(), collector]
    )
    assert values_by_tag(tmp_path, "scalar", "mine") == {8: 8.0}
    assert values_by_tag(tmp_path, "scalar", LOSS_TAG)[8] == pytest.approx(loss_of(8))


def test_an_operators_value_right_after_a_recorded_step_is_recorded(
    model: Any, tmp_path: Path
) -> None:
    # Every step collected: step 1 goes through the record, step 2 is planned light there;
    # the summary operators must not skip step 2, whose value is then recorded at it.
    data = model(6)
    collector = SummaryCollector(tmp_path, collect_freq=1, **LOSS_ALONE)

    class AddsAtTwo(Callback):
        def step_end(self, run_context: RunContext) -> None:
            if run_context.original_args().cur_step_num == 2:
                scalar_summary("mine", 2.0)

    TrainLoop(Counting(), network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[AddsAtTwo(), collector]
    )
    assert values_by_tag(tmp_path, "scalar", "mine") == {2: 2.0}
    assert sorted(values_by_tag(tmp_path, "scalar", LOSS_TAG)) == list(range(1, 7))


def test_the_kept_losses_and_step_times_are_written_when_training_stops_on_an_error(
    model: Any, tmp_path: Path
) -> None:
    data = model(30)
    counting = Counting()

    def step(batch: Any) -> float:
        if counting.step == 22:
            raise RuntimeError("the step failed")
        return counting(batch)

    with (
        pytest.raises(RuntimeError, match="the step failed"),
        SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE) as collector,
    ):
        TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
            1, data.dataset, callbacks=[collector]
        )
    losses = values_by_tag(tmp_path, "scalar", LOSS_TAG)
    assert sorted(losses) == [1, *range(COLLECT_FREQ, 23, COLLECT_FREQ)]
    assert all(value == pytest.approx(loss_of(step)) for step, value in losses.items())
    assert sorted(values_by_tag(tmp_path, "scalar", STEP_TIME_TAG)) == list(range(1, 23))


def test_a_collected_loss_of_a_long_step_reaches_the_file_at_once(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(8)
    collector = SummaryCollector(
        tmp_path, collect_freq=COLLECT_FREQ, system_interval=0, **LOSS_ALONE
    )
    on_disk: dict[int, list[int]] = {}

    class Watch(Callback):
        def step_end(self, run_context: RunContext) -> None:
            assert collector.record is not None
            collector.record.flush()  # what the writer was given is on disk
            step = run_context.original_args().cur_step_num
            on_disk[step] = sorted(values_by_tag(tmp_path, "scalar", LOSS_TAG))

    # A step of a quarter second or more writes what is kept at once (the step times' rule).
    counting = Counting(collector_clock, seconds=0.3)
    TrainLoop(counting, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector, Watch()]
    )
    assert on_disk[4] == [1, 4]
    assert on_disk[8] == [1, 4, 8]


def test_a_nan_loss_is_kept_and_written_as_nan(model: Any, tmp_path: Path) -> None:
    data = model(8)
    collector = SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE)
    counting = Counting()

    def step(batch: Any) -> float:
        loss = counting(batch)
        return math.nan if counting.step == 8 else loss

    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector]
    )
    losses = values_by_tag(tmp_path, "scalar", LOSS_TAG)
    assert sorted(losses) == [1, 4, 8]
    assert math.isnan(losses[8]) and losses[4] == pytest.approx(0.25)


def test_a_collected_step_at_an_epochs_end_is_recorded_once(model: Any, tmp_path: Path) -> None:
    # Steps 8 and 16 end epochs and are collected: the epoch's end collects nothing more
    # there (the step was collected on the quiet step's path, the schedule knows it).
    data = model(8)
    collector = SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE)
    seen_collected: dict[int, bool] = {}

    class AfterTheCollector(Callback):
        def step_end(self, run_context: RunContext) -> None:
            step = run_context.original_args().cur_step_num
            assert collector.schedule is not None
            seen_collected[step] = not collector.schedule.would_collect(step)

    TrainLoop(Counting(), network=data.network, optimizer=data.optimizer).train(
        3, data.dataset, callbacks=[collector, AfterTheCollector()]
    )
    # The public schedule says each collected step was collected when its step ended
    # (would_collect: no longer, the step being its last collected).
    collected = [1, *range(COLLECT_FREQ, 25, COLLECT_FREQ)]
    assert all(seen_collected[step] for step in collected)
    events = summary_events(tmp_path)
    losses = [(step, values[LOSS_TAG]) for step, values in events if LOSS_TAG in values]
    assert [step for step, _ in losses] == [1, *range(COLLECT_FREQ, 25, COLLECT_FREQ)]
    assert all(value == pytest.approx(loss_of(step)) for step, value in losses)
    steps = [step for step, _ in events]
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # one event a step


def test_steps_that_collect_tensors_only_record_no_loss(model: Any, tmp_path: Path) -> None:
    # collect_tensor_freq=3: steps 3, 6, 9, ... collect the summary operators' tensors, not
    # the collector's own values; the loss stays at step 1 and every 4th.
    data = model(24)
    collector = SummaryCollector(
        tmp_path, collect_freq=COLLECT_FREQ, collect_tensor_freq=3, **LOSS_ALONE
    )
    TrainLoop(Counting(), network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector]
    )
    losses = values_by_tag(tmp_path, "scalar", LOSS_TAG)
    assert sorted(losses) == [1, *range(COLLECT_FREQ, 25, COLLECT_FREQ)]


def test_a_tensor_step_is_collected_whether_or_not_a_tensor_came(
    model: Any, tmp_path: Path
) -> None:
    # collect_tensor_freq=3 beside collect_freq=4: steps 3, 6, 9, ... are this rank's
    # tensor steps, off the frequency but for 12 and 24. The script gives a tensor at 9
    # and 18 only; the other tensor steps have nothing to record but remain collected.
    data = model(24)
    collector = SummaryCollector(
        tmp_path, collect_freq=COLLECT_FREQ, collect_tensor_freq=3, **LOSS_ALONE
    )
    counting = Counting()
    seen_collected: dict[int, bool] = {}

    def step(batch: Any) -> float:
        loss = counting(batch)
        if counting.step in (9, 18):
            tensor_summary("given", np.full(2, float(counting.step)))
        return loss

    class AfterTheCollector(Callback):
        def step_end(self, run_context: RunContext) -> None:
            number = run_context.original_args().cur_step_num
            assert collector.schedule is not None
            seen_collected[number] = not collector.schedule.would_collect(number)

    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector, AfterTheCollector()]
    )
    tensors = values_by_tag(tmp_path, "tensor", "given")
    assert sorted(tensors) == [9, 18]
    assert all(np.array_equal(tensors[at], np.full(2, float(at))) for at in tensors)
    # (would_collect: no longer, the step being the last the schedule collected)
    assert all(seen_collected[at] for at in range(3, 25, 3))
    events = summary_events(tmp_path)
    steps = [at for at, _ in events]
    assert steps == sorted(steps)  # in step order (a tensor is an event of its own)
    times = [at for at, values in events if STEP_TIME_TAG in values]
    assert times == list(range(1, 25))  # every step's time once, the tensor steps' too
    losses = values_by_tag(tmp_path, "scalar", LOSS_TAG)
    assert sorted(losses) == [1, *range(COLLECT_FREQ, 25, COLLECT_FREQ)]


def test_a_collected_loss_is_its_value_at_its_step(model: Any, tmp_path: Path) -> None:
    # The script hands the same one-element array every step, changed in place: the loss
    # kept at a collected step is read there, not when it is written.
    data = model(16)
    collector = SummaryCollector(tmp_path, collect_freq=COLLECT_FREQ, **LOSS_ALONE)
    counting, held = Counting(), np.zeros(1)

    def step(batch: Any) -> np.ndarray:
        held[0] = counting(batch)
        return held

    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector]
    )
    losses = values_by_tag(tmp_path, "scalar", LOSS_TAG)
    assert sorted(losses) == [1, 4, 8, 12, 16]
    assert all(value == pytest.approx(loss_of(step)) for step, value in losses.items())
