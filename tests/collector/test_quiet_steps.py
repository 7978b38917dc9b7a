"""Quiet steps: the steps a TrainSession finishes without calling its one callback, the
collector, which records nothing at them (docs/collector-cost.md, "Quiet steps").

What the files hold must not change: each test trains the same script twice, once with
the collector alone (its quiet steps logged by the session) and once beside a callback
that acts at every step (every step calls both), and reads back the same values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.jobview.feed import ARRIVAL_TIME_TAG, SECTION_TAG_PREFIX, STEP_TIME_TAG
from rankscribe.writer import SummaryRecord, scalar_summary
from rankscribe.writer.reader import scalars
from tests._support.callbacks import EveryStep
from tests._support.clocks import ManualClock

NO_LANDSCAPE = {"collect_landscape": None}
#: Collected steps that record the loss alone: the collector's light steps.
LOSS_ALONE = {"collect_metric": True, "collect_landscape": None}
STEPS = 240
OPERATOR_TAG = "user/every_step"


def rank_scalars(directory: Path) -> dict[str, dict[int, float]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return {tag: dict(points) for tag, points in scalars(path).items()}


def step_seconds(step: int) -> float:
    """A step's own time: uneven, and one long step (written at once) in the middle."""
    return 0.3 if step == 101 else 0.001 * (1 + step % 7)


def quiet_collector(
    directory: Path,
    collected: dict[str, Any] | None,
    kind: type[SummaryCollector] = SummaryCollector,
    **options: Any,
) -> SummaryCollector:
    """The tests' collector: every 10th step, no landscape; ``collected``: what it
    collects instead of its defaults; ``options``: its other arguments."""
    return kind(
        directory,
        collect_freq=10,
        keep_default_action=collected is None,
        collect_specified_data=collected or NO_LANDSCAPE,
        # Asked for the loss alone, no fingerprint either: its collected steps are light.
        fingerprints=collected is None,
        system_interval=0,  # the machine's readings differ from run to run
        **options,
    )


class Run:
    """A training run's collector, and the steps at which the session called it."""

    def __init__(self, collector: SummaryCollector) -> None:
        self.collector = collector
        self.called: list[int] = []


def train(
    data: Any,
    directory: Path,
    clock: ManualClock,
    *,
    beside: bool,
    script: Callable[[int, SummaryCollector], None] = lambda step, collector: None,
    collected: dict[str, Any] | None = None,
    steps: int = STEPS,
    kind: type[SummaryCollector] = SummaryCollector,
    loss: Callable[[int], Any] = lambda step: 0.5 + step / 1000,
) -> Run:
    """``steps`` steps of 2 epochs: the collector alone, or beside a callback that acts at
    every step; ``script(step, collector)`` runs inside each step, ``loss(step)`` is what
    the step hands the session as its outputs."""
    collector = quiet_collector(directory, collected, kind)
    callbacks: list[Any] = [collector, EveryStep()] if beside else [collector]
    batches = list(data.dataset)
    step = 0
    run = Run(collector)
    session = TrainSession(
        callbacks,
        network=data.network,
        optimizer=data.optimizer,
        train_dataset=data.dataset,
        epochs=2,
        steps_per_epoch=steps // 2,
    )
    # The session's callback list: each step that calls the callbacks calls its step_end.
    dispatch = session._callbacks.step_end

    def counted(run_context: Any) -> None:
        run.called.append(run_context.original_args().cur_step_num)
        dispatch(run_context)

    session._callbacks.step_end = counted  # type: ignore[method-assign]
    with session:
        for _ in session.epochs():
            for index in range(steps // 2):
                step += 1
                clock.advance(step_seconds(step))
                script(step, collector)
                session.step(batches[index % len(batches)], loss(step))
    return run


def both(
    model: Any, tmp_path: Path, clock: ManualClock, **options: Any
) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, float]], Run]:
    """The scalars of the run alone and of the run beside a callback, and the run alone."""
    alone = train(model(8), tmp_path / "alone", clock, beside=False, **options)
    train(model(8), tmp_path / "beside", clock, beside=True, **options)
    return rank_scalars(tmp_path / "alone"), rank_scalars(tmp_path / "beside"), alone


@pytest.mark.parametrize("collected", [None, LOSS_ALONE], ids=["defaults", "loss-alone"])
def test_the_files_hold_what_a_session_calling_every_step_writes(
    model: Any, tmp_path: Path, collector_clock: ManualClock, collected: Any
) -> None:
    alone, beside, run = both(model, tmp_path, collector_clock, collected=collected)
    # Most steps were logged by the session, not called.
    assert len(run.called) < STEPS // 3
    assert alone == beside
    times = alone[STEP_TIME_TAG]
    assert times == {step: pytest.approx(step_seconds(step)) for step in range(1, STEPS + 1)}
    assert alone["loss/auto"] == {
        step: pytest.approx(0.5 + step / 1000) for step in [1, *range(10, STEPS + 1, 10)]
    }


COLLECTED = set(range(10, STEPS + 1, 10))


def test_light_steps_are_logged_by_the_session_with_their_loss(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # Collected steps whose only value is the loss: the session logs them as quiet steps
    # once the collector has kept their loss (the collector is called at the few where
    # it has more to do: its cost windows, the end of its plan).
    alone, beside, run = both(model, tmp_path, collector_clock, collected=LOSS_ALONE)
    assert_light_steps_logged(alone, beside, run.called)


def assert_light_steps_logged(
    alone: dict[str, dict[int, float]], beside: dict[str, dict[int, float]], called: list[int]
) -> None:
    """The loop called the collector at a quarter of the collected steps at most, and the
    files hold what a loop calling it at every step writes, every collected step's loss."""
    assert len(COLLECTED & set(called)) <= len(COLLECTED) // 4
    assert alone == beside
    assert alone["loss/auto"] == {
        step: pytest.approx(0.5 + step / 1000) for step in [1, *sorted(COLLECTED)]
    }


def test_a_loss_of_several_numbers_is_recorded_by_the_collector_at_each_light_step(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # Not one number on the host: the session calls the collector at each light step,
    # which records the loss as it records any step's (their mean).
    alone, beside, run = both(
        model,
        tmp_path,
        collector_clock,
        collected=LOSS_ALONE,
        loss=lambda step: np.array([step / 1000, 1 + step / 1000]),
    )
    assert set(run.called) >= COLLECTED
    assert alone == beside
    assert alone["loss/auto"] == {
        step: pytest.approx(0.5 + step / 1000) for step in [1, *sorted(COLLECTED)]
    }


def test_a_summary_operator_called_every_step_is_recorded_at_the_collected_steps(
    model: Any, tmp_path: Path, collector_clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        scalar_summary(OPERATOR_TAG, float(step))

    with caplog.at_level(logging.WARNING):
        alone, beside, _ = both(
            model, tmp_path, collector_clock, script=script, collected=LOSS_ALONE
        )
    assert alone == beside
    assert alone[OPERATOR_TAG] == {step: step for step in [1, *range(10, STEPS + 1, 10)]}
    assert not [record for record in caplog.records if "more than once" in record.message]


def test_a_second_record_opened_mid_run_stops_the_skip_and_nothing_piles_up(
    model: Any, tmp_path: Path, collector_clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A record of the user's own, opened at step 55: the operators then buffer at every
    # step (the collector's skip needs it to be the only record), so each step must be
    # called to forget them; none piles up into a warning.
    records: list[SummaryRecord] = []

    def script(step: int, collector: SummaryCollector) -> None:
        if step == 55:
            directory = collector.directory
            assert directory is not None
            records.append(SummaryRecord(directory.parent / f"{directory.name}-own"))
        scalar_summary(OPERATOR_TAG, float(step))

    with caplog.at_level(logging.WARNING):
        try:
            alone = train(
                model(8), tmp_path / "alone", collector_clock, beside=False, script=script
            )
        finally:
            for record in records:
                record.close()
    assert not [record for record in caplog.records if "more than once" in record.message]
    assert set(range(56, STEPS + 1)) <= set(alone.called)
    found = rank_scalars(tmp_path / "alone")
    assert found[STEP_TIME_TAG] == {
        step: pytest.approx(step_seconds(step)) for step in range(1, STEPS + 1)
    }
    assert found[OPERATOR_TAG] == {step: step for step in [1, *range(10, STEPS + 1, 10)]}


def test_a_section_first_used_mid_run_is_recorded_at_each_step_it_ran_in(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        if step > 33:
            with collector.section("compute"):
                collector_clock.advance(0.0005)

    alone, beside, run = both(model, tmp_path, collector_clock, script=script)
    assert alone == beside
    assert len(run.called) < STEPS // 3  # sections are logged too
    compute = alone[f"{SECTION_TAG_PREFIX}compute"]
    assert compute == {step: pytest.approx(0.0005) for step in range(34, STEPS + 1)}
    times = alone[STEP_TIME_TAG]
    assert times == {
        step: pytest.approx(step_seconds(step) + (0.0005 if step > 33 else 0.0))
        for step in range(1, STEPS + 1)
    }


def sync_seconds(step: int) -> float:
    """A step's time in its ``sync`` section (none at every 4th step)."""
    return 0.0 if step % 4 == 0 else 0.0002 * (1 + step % 3)


def test_a_sync_section_gives_each_logged_step_its_arrival(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        seconds = sync_seconds(step)
        if seconds:
            with collector.section("sync"):
                collector_clock.advance(seconds)

    alone, beside, run = both(model, tmp_path, collector_clock, script=script)
    assert alone == beside
    assert len(run.called) < STEPS // 3
    synced = [step for step in range(1, STEPS + 1) if sync_seconds(step)]
    assert alone[f"{SECTION_TAG_PREFIX}sync"] == {
        step: pytest.approx(sync_seconds(step)) for step in synced
    }
    # The arrival: the step time less its time in the sync section.
    assert alone[ARRIVAL_TIME_TAG] == {step: pytest.approx(step_seconds(step)) for step in synced}


class StopError(Exception):
    """The training script's own failure."""


def test_training_that_raises_keeps_the_step_times_of_the_logged_steps(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        if step == 77:
            raise StopError

    with pytest.raises(StopError):
        train(
            model(8), tmp_path, collector_clock, beside=False, script=script, collected=LOSS_ALONE
        )
    found = rank_scalars(tmp_path)
    assert found[STEP_TIME_TAG] == {
        step: pytest.approx(step_seconds(step)) for step in range(1, 77)
    }
    # The losses of the light steps the session logged before it.
    assert found["loss/auto"] == {
        step: pytest.approx(0.5 + step / 1000) for step in [1, *range(10, 77, 10)]
    }


def test_steps_of_several_sessions_are_their_own(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # One collector, two sessions one after the other: the second starts with no log
    # of the first's steps, and its step times are its own.
    data = model(8)
    collector = SummaryCollector(tmp_path, collect_freq=10, collect_specified_data=NO_LANDSCAPE)
    for run in range(2):
        with TrainSession(
            [collector], network=data.network, epochs=1, steps_per_epoch=60
        ) as session:
            for _ in session.epochs():
                for _ in range(60):
                    collector_clock.advance(0.002 * (run + 1))
                    session.step(None, 0.5)
    files = sorted(path for path in tmp_path.iterdir() if path.name.endswith("_MS"))
    assert len(files) == 2
    for run, path in enumerate(files):
        times = dict(scalars(path)[STEP_TIME_TAG])
        assert times == {step: pytest.approx(0.002 * (run + 1)) for step in range(1, 61)}


class CountingCollector(SummaryCollector):
    """A collector of the user's own that does something at every step."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ended: list[int] = []

    def step_end(self, run_context: Any) -> None:
        self.ended.append(run_context.original_args().cur_step_num)
        super().step_end(run_context)


def test_a_collector_whose_step_end_is_its_own_is_called_at_every_step(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    run = train(model(8), tmp_path, collector_clock, beside=False, kind=CountingCollector)
    assert isinstance(run.collector, CountingCollector)
    assert run.collector.ended == list(range(1, STEPS + 1))
    times = rank_scalars(tmp_path)[STEP_TIME_TAG]
    assert times == {step: pytest.approx(step_seconds(step)) for step in range(1, STEPS + 1)}
