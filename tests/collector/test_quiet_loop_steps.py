"""Quiet steps in a TrainLoop: the steps the loop runs without calling its one callback
that acts at steps, the collector, which records nothing at them (docs/collector-cost.md,
"Quiet steps").

What the files hold must not change: each test trains the same script twice, once with
the collector alone (its quiet steps logged by the loop) and once beside a callback that
acts at every step (every step calls both), and reads back the same values, the data
waits among them.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    Callback,
    CheckpointConfig,
    CollectionSchedule,
    ModelCheckpoint,
    Progress,
    RunContext,
    SummaryCollector,
    TrainLoop,
    TrainSession,
)
from rankscribe.jobview.feed import DATA_WAIT_TAG, SECTION_TAG_PREFIX, STEP_TIME_TAG
from rankscribe.ranks import RankInfo
from rankscribe.writer import scalar_summary, tensor_summary
from rankscribe.writer.reader import scalars
from tests._support.callbacks import EveryStep
from tests._support.clocks import ManualClock
from tests.collector.conftest import values_by_tag
from tests.collector.test_quiet_steps import (
    LOSS_ALONE,
    NO_LANDSCAPE,
    StopError,
    assert_light_steps_logged,
    quiet_collector,
    rank_scalars,
    step_seconds,
)

EPOCHS, PER_EPOCH = 2, 120
STEPS = EPOCHS * PER_EPOCH
OPERATOR_TAG = "user/every_step"
TENSOR_TAG = "user/weights"


def wait_seconds(step: int) -> float:
    """The wait for a step's batch: uneven, none at every 5th step."""
    return 0.0 if step % 5 == 0 else 0.0001 * (1 + step % 3)


class Batches:
    """``PER_EPOCH`` batches an epoch, each taking ``wait_seconds`` of the clock to come."""

    batch_size = 2

    def __init__(self, batches: list[Any], clock: ManualClock) -> None:
        self._batches, self._clock = batches, clock
        self.served = 0

    def __len__(self) -> int:
        return PER_EPOCH

    def __iter__(self) -> Iterator[Any]:
        for index in range(PER_EPOCH):
            self.served += 1
            self._clock.advance(wait_seconds(self.served))
            yield self._batches[index % len(self._batches)]


class Run:
    """A training run's collector, and the steps at which the loop called it."""

    def __init__(self, collector: SummaryCollector) -> None:
        self.collector = collector
        self.called: list[int] = []


@contextlib.contextmanager
def counting_calls(called: list[int], stop_at: int | None = None) -> Iterator[None]:
    """The collector's step_end, counted in ``called`` (its class's own method, wrapped on
    the class: the loop still sees SummaryCollector's hooks). ``stop_at``: from that step
    on, a called step asks the loop to stop."""
    ended = SummaryCollector.step_end

    def counted(self: SummaryCollector, run_context: RunContext) -> None:
        step = run_context.original_args().cur_step_num
        called.append(step)
        ended(self, run_context)
        if stop_at is not None and step >= stop_at:
            run_context.request_stop()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SummaryCollector, "step_end", counted)
        yield


def train(
    data: Any,
    directory: Path,
    clock: ManualClock,
    *,
    beside: Callback | None,
    script: Callable[[int, SummaryCollector], None] = lambda step, collector: None,
    collected: dict[str, Any] | None = None,
    stop_at: int | None = None,
    loss: Callable[[float], Any] = float,
    tensor_freq: int | None = None,
) -> Run:
    """``STEPS`` steps of 2 epochs in a TrainLoop: the collector alone, or beside another
    callback; ``script(step, collector)`` runs inside each step, whose loss is
    ``loss(0.5 + step / 1000)``; ``tensor_freq``: the collector's ``collect_tensor_freq``."""
    collector = quiet_collector(directory, collected, collect_tensor_freq=tensor_freq)
    run = Run(collector)
    step = 0

    def step_fn(batch: Any) -> float:
        nonlocal step
        step += 1
        clock.advance(step_seconds(step))
        script(step, collector)
        return loss(0.5 + step / 1000)

    loop = TrainLoop(step_fn, network=data.network, optimizer=data.optimizer)
    callbacks: list[Any] = [collector] if beside is None else [collector, beside]
    with counting_calls(run.called, stop_at):
        loop.train(EPOCHS, Batches(list(data.dataset), clock), callbacks=callbacks)
    return run


def both(
    model: Any, tmp_path: Path, clock: ManualClock, **options: Any
) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, float]], Run]:
    """The scalars of the run alone and of the run beside a callback acting at every step,
    and the run alone."""
    alone = train(model(8), tmp_path / "alone", clock, beside=None, **options)
    train(model(8), tmp_path / "beside", clock, beside=EveryStep(), **options)
    return rank_scalars(tmp_path / "alone"), rank_scalars(tmp_path / "beside"), alone


def expected_waits() -> dict[int, Any]:
    """Each step's data wait: none at an epoch's first step."""
    return {
        step: pytest.approx(wait_seconds(step))
        for step in range(1, STEPS + 1)
        if (step - 1) % PER_EPOCH
    }


@pytest.mark.parametrize("collected", [None, LOSS_ALONE], ids=["defaults", "loss-alone"])
def test_the_files_hold_what_a_loop_calling_every_step_writes(
    model: Any, tmp_path: Path, collector_clock: ManualClock, collected: Any
) -> None:
    alone, beside, run = both(model, tmp_path, collector_clock, collected=collected)
    # Most steps were logged by the loop, not called.
    assert len(run.called) < STEPS // 3
    assert alone == beside
    assert alone[STEP_TIME_TAG] == {
        step: pytest.approx(step_seconds(step)) for step in range(1, STEPS + 1)
    }
    assert alone[DATA_WAIT_TAG] == expected_waits()
    assert alone["loss/auto"] == {
        step: pytest.approx(0.5 + step / 1000) for step in [1, *range(10, STEPS + 1, 10)]
    }


def test_light_steps_are_logged_by_the_loop_with_their_loss(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # Collected steps whose only value is the loss: logged by the loop once the
    # collector has kept their loss, the collector called at few of them.
    alone, beside, run = both(model, tmp_path, collector_clock, collected=LOSS_ALONE)
    assert_light_steps_logged(alone, beside, run.called)


class SlowLoss(np.ndarray):
    """A loss whose read on the host takes ``seconds`` of ``clock`` (its ``reshape``, the
    read's first look at it: a loss tensor's ``item`` on a CPU the step turned over)."""

    clock: ManualClock
    seconds = 0.001

    @classmethod
    def of(cls, value: float) -> SlowLoss:
        return np.asarray(value, dtype=np.float64).view(cls)

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        SlowLoss.clock.advance(SlowLoss.seconds)
        return np.asarray(self).reshape(*shape, **kwargs)


def test_a_light_steps_loss_read_is_not_in_the_next_steps_data_wait(
    model: Any, tmp_path: Path, collector_clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop logs a light step once the collector has read its loss, and only then
    # waits for the next batch: that read (here 1 ms of the clock) is the collector's
    # work, not the next step's wait, as after a step the loop calls the collector at.
    monkeypatch.setattr(SlowLoss, "clock", collector_clock, raising=False)
    alone, beside, run = both(
        model, tmp_path, collector_clock, collected=LOSS_ALONE, loss=SlowLoss.of
    )
    assert_light_steps_logged(alone, beside, run.called)
    assert alone[DATA_WAIT_TAG] == expected_waits()
    assert alone[STEP_TIME_TAG] == {
        step: pytest.approx(step_seconds(step)) for step in range(1, STEPS + 1)
    }


def test_the_long_step_is_called_after_its_work_with_its_own_time_and_wait(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    alone, _, run = both(model, tmp_path, collector_clock, collected=LOSS_ALONE)
    # Step 101 (0.3 s) could not be logged: the loop called the collector after it.
    assert 101 in run.called
    assert alone[STEP_TIME_TAG][101] == pytest.approx(0.3)
    assert alone[DATA_WAIT_TAG][101] == pytest.approx(wait_seconds(101))
    assert alone[DATA_WAIT_TAG][102] == pytest.approx(wait_seconds(102))


def test_an_operator_and_sections_every_step_are_recorded_as_when_called(
    model: Any, tmp_path: Path, collector_clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        with collector.section("compute"):
            collector_clock.advance(0.0004)
        scalar_summary(OPERATOR_TAG, float(step))

    with caplog.at_level(logging.WARNING):
        alone, beside, run = both(
            model, tmp_path, collector_clock, script=script, collected=LOSS_ALONE
        )
    assert len(run.called) < STEPS // 3
    assert alone == beside
    assert alone[OPERATOR_TAG] == {step: step for step in [1, *range(10, STEPS + 1, 10)]}
    assert alone[f"{SECTION_TAG_PREFIX}compute"] == {
        step: pytest.approx(0.0004) for step in range(1, STEPS + 1)
    }
    assert not [record for record in caplog.records if "more than once" in record.message]


@pytest.mark.parametrize(
    ("tensor_freq", "tensor_steps"),
    [
        # MindSpore's 20 tensor steps: 240 // 19 steps apart, step 1 for unit 0.
        (None, [1, *range(12, STEPS, 12)]),
        (30, [1, *range(30, STEPS + 1, 30)]),
    ],
    ids=["spread", "on-the-frequency"],
)
def test_a_tensor_every_step_ends_the_plan_of_light_steps_at_the_next_tensor_step(
    model: Any,
    tmp_path: Path,
    collector_clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    tensor_freq: int | None,
    tensor_steps: list[int],
) -> None:
    # A script that gives the summary operators a tensor at every step (as the digits
    # example does): this rank's tensor steps record it, so the loop calls the collector
    # there. Once one has, the collector plans no light step past the next: it looks at
    # each collected step about once, not at the light steps beyond that it would plan
    # again at each tensor step.
    looked: list[int] = []
    next_collected = CollectionSchedule.next_collected

    def counted(self: CollectionSchedule, unit: int) -> int:
        following = next_collected(self, unit)
        looked.append(following)
        return following

    monkeypatch.setattr(CollectionSchedule, "next_collected", counted)

    def script(step: int, collector: SummaryCollector) -> None:
        tensor_summary(TENSOR_TAG, np.full(2, float(step)))

    options: dict[str, Any] = {
        "script": script,
        "collected": LOSS_ALONE,
        "tensor_freq": tensor_freq,
    }
    run = train(model(8), tmp_path / "alone", collector_clock, beside=None, **options)
    planned = len(looked)
    train(model(8), tmp_path / "beside", collector_clock, beside=EveryStep(), **options)
    alone, beside = (
        {
            step: value.tolist()
            for step, value in values_by_tag(tmp_path / name, "tensor", TENSOR_TAG).items()
        }
        for name in ("alone", "beside")
    )
    assert alone == beside == {step: [float(step)] * 2 for step in tensor_steps}
    assert set(tensor_steps) <= set(run.called)
    assert rank_scalars(tmp_path / "alone") == rank_scalars(tmp_path / "beside")
    collected_steps = set(range(10, STEPS + 1, 10)) | set(tensor_steps)
    assert planned <= len(collected_steps) + len(run.called)


class EpochOnly(Callback):
    """A callback of the user's that acts at epochs' ends only."""

    def __init__(self) -> None:
        self.epochs: list[int] = []

    def epoch_end(self, run_context: RunContext) -> None:
        self.epochs.append(run_context.original_args().cur_epoch_num)


def test_a_callback_without_step_hooks_leaves_the_quiet_steps_to_the_loop(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    epochs = EpochOnly()
    run = train(model(8), tmp_path / "loop", collector_clock, beside=epochs)
    assert len(run.called) < STEPS // 3
    assert epochs.epochs == [1, 2]
    assert rank_scalars(tmp_path / "loop")[DATA_WAIT_TAG] == expected_waits()
    # A TrainSession too: beside it the collector's steps are logged by the session.
    data = model(8)
    collector = SummaryCollector(
        tmp_path / "session", collect_freq=10, collect_specified_data=NO_LANDSCAPE
    )
    session_epochs = EpochOnly()
    called: list[int] = []
    with (
        counting_calls(called),
        TrainSession(
            [collector, session_epochs], network=data.network, epochs=1, steps_per_epoch=60
        ) as session,
    ):
        for _ in session.epochs():
            for _ in range(60):
                collector_clock.advance(0.002)
                session.step(None, 0.5)
    assert len(called) < 60 // 3
    assert session_epochs.epochs == [1]
    times = rank_scalars(tmp_path / "session")[STEP_TIME_TAG]
    assert times == {step: pytest.approx(0.002) for step in range(1, 61)}


def test_a_callback_whose_step_hook_is_set_on_the_instance_is_called_every_step(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    watcher = Callback()
    seen: list[int] = []
    watcher.step_end = lambda run_context: seen.append(  # type: ignore[method-assign]
        run_context.original_args().cur_step_num
    )
    run = train(model(8), tmp_path, collector_clock, beside=watcher)
    assert seen == list(range(1, STEPS + 1))
    assert run.called == seen


@pytest.mark.parametrize("stop_at", [30, 101], ids=["collected-step", "long-step"])
def test_a_stop_asked_at_a_called_step_ends_training_there(
    model: Any, tmp_path: Path, collector_clock: ManualClock, stop_at: int
) -> None:
    # Step 101 is the long step, which the loop calls after its work.
    run = train(model(8), tmp_path, collector_clock, beside=None, stop_at=stop_at)
    assert run.called[-1] == stop_at
    times = rank_scalars(tmp_path)[STEP_TIME_TAG]
    assert sorted(times) == list(range(1, stop_at + 1))


def test_a_session_after_a_loop_on_one_collector_has_no_data_waits(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # The loop's runs time their data waits; a session's steps have none, whether the
    # session logs its steps or calls the collector at each (beside a callback).
    data = model(8)
    collector = SummaryCollector(
        tmp_path, collect_freq=10, collect_specified_data=NO_LANDSCAPE, system_interval=0
    )
    loop = TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer)
    loop.train(1, Batches(list(data.dataset), collector_clock), callbacks=[collector])
    with TrainSession(
        [collector, EveryStep()], network=data.network, epochs=1, steps_per_epoch=60
    ) as session:
        for _ in session.epochs():
            for _ in range(60):
                collector_clock.advance(0.002)
                session.step(None, 0.5)
    files = sorted(path for path in tmp_path.iterdir() if path.name.endswith("_MS"))
    assert len(files) == 2
    loop_run, session_run = (scalars(path) for path in files)
    assert len(loop_run[DATA_WAIT_TAG]) == PER_EPOCH - 1
    assert DATA_WAIT_TAG not in session_run
    assert dict(session_run[STEP_TIME_TAG]) == {step: pytest.approx(0.002) for step in range(1, 61)}


def test_a_step_that_raises_keeps_the_logged_steps_before_it(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    def script(step: int, collector: SummaryCollector) -> None:
        if step == 77:
            raise StopError

    with pytest.raises(StopError):
        train(model(8), tmp_path, collector_clock, beside=None, script=script)
    found = rank_scalars(tmp_path)
    assert found[STEP_TIME_TAG] == {
        step: pytest.approx(step_seconds(step)) for step in range(1, 77)
    }
    assert found[DATA_WAIT_TAG] == {
        step: pytest.approx(wait_seconds(step)) for step in range(2, 77)
    }


class Rank0:
    """Progress's rank: 0 of 2 (it shows its lines)."""

    info = RankInfo(rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi")


def with_checkpoint_and_progress(
    data: Any, directory: Path, clock: ManualClock, *, beside: bool, session: bool
) -> tuple[dict[str, dict[int, float]], list[str], list[str], list[int]]:
    """A run of the README's callbacks (a checkpoint every 25 steps, the collector, a
    progress line every 37 steps), in a TrainLoop or a TrainSession, alone or beside a
    callback acting at every step: its scalars, checkpoint files, progress lines and the
    steps the collector was called at."""
    collector = SummaryCollector(
        directory / "summary",
        collect_freq=10,
        collect_specified_data=NO_LANDSCAPE,
        system_interval=0,
    )
    checkpoint = ModelCheckpoint(
        prefix="quiet",
        directory=directory / "ckpt",
        config=CheckpointConfig(save_checkpoint_steps=25, keep_checkpoint_max=100),
    )
    stream = io.StringIO()
    progress = Progress(
        every_steps=37, every_seconds=None, stream=stream, rank_info=Rank0.info, clock=clock
    )
    callbacks: list[Any] = [checkpoint, collector, progress, *([EveryStep()] if beside else [])]
    called: list[int] = []
    batches = list(data.dataset)
    with counting_calls(called):
        if session:
            with TrainSession(
                callbacks,
                network=data.network,
                optimizer=data.optimizer,
                epochs=EPOCHS,
                steps_per_epoch=PER_EPOCH,
            ) as run:
                for _ in run.epochs():
                    for index in range(PER_EPOCH):
                        clock.advance(step_seconds(run.params.cur_step_num + 1))
                        run.step(batches[index % len(batches)], 0.5)
        else:
            steps = iter(range(1, STEPS + 1))

            def step_fn(batch: Any) -> float:
                clock.advance(step_seconds(next(steps)))
                return 0.5

            loop = TrainLoop(step_fn, network=data.network, optimizer=data.optimizer)
            loop.train(EPOCHS, Batches(batches, clock), callbacks=callbacks)
    saved = sorted(path.name for path in (directory / "ckpt").rglob("*.ckpt"))
    return rank_scalars(directory / "summary"), saved, stream.getvalue().splitlines(), called


@pytest.mark.parametrize("session", [False, True], ids=["loop", "session"])
def test_a_checkpoint_and_progress_say_their_steps_and_leave_the_rest_quiet(
    model: Any, tmp_path: Path, collector_clock: ManualClock, session: bool
) -> None:
    alone = with_checkpoint_and_progress(
        model(8), tmp_path / "alone", collector_clock, beside=False, session=session
    )
    beside = with_checkpoint_and_progress(
        model(8), tmp_path / "beside", collector_clock, beside=True, session=session
    )
    scalars_alone, saved, lines, called = alone
    assert len(called) < STEPS // 3
    # Each callback was called where it acts: a save every 25 steps, a line every 37.
    assert {*range(25, STEPS + 1, 25), *range(37, STEPS + 1, 37)} <= set(called)
    # The same files, checkpoints and lines as when every step calls every callback.
    assert (scalars_alone, saved, lines) == beside[:3]
    assert saved == sorted(
        f"quiet-{(step - 1) // PER_EPOCH + 1}_{(step - 1) % PER_EPOCH + 1}.ckpt"
        for step in [*range(25, STEPS + 1, 25), STEPS]
    )
    assert [line.split("  ")[1] for line in lines[:-1]] == [
        f"step {step}/{STEPS}" for step in [*range(37, STEPS + 1, 37), STEPS]
    ]


def test_a_checkpoint_at_every_step_or_by_a_clock_of_its_own_is_called_at_every_step(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(8)
    for name, checkpoint in {
        "default": ModelCheckpoint(prefix="every", directory=tmp_path / "every"),
        "own-clock": ModelCheckpoint(
            prefix="clocked",
            directory=tmp_path / "clocked",
            config=CheckpointConfig(save_checkpoint_steps=None, save_checkpoint_seconds=3600),
            clock=lambda: 5.0,
        ),
    }.items():
        collector = SummaryCollector(
            tmp_path / name, collect_freq=10, collect_specified_data=NO_LANDSCAPE
        )
        called: list[int] = []
        loop = TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer)
        with counting_calls(called):
            loop.train(1, Batches(list(data.dataset), collector_clock), [checkpoint, collector])
        assert called == list(range(1, PER_EPOCH + 1)), name


def test_a_checkpoint_by_seconds_on_its_default_clock_is_called_when_due(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # An hour between saves: none comes due in training, and its steps are quiet.
    data = model(8)
    checkpoint = ModelCheckpoint(
        prefix="hourly",
        directory=tmp_path / "ckpt",
        config=CheckpointConfig(save_checkpoint_steps=None, save_checkpoint_seconds=3600),
    )
    collector = SummaryCollector(tmp_path, collect_freq=10, collect_specified_data=NO_LANDSCAPE)
    called: list[int] = []
    loop = TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer)
    with counting_calls(called):
        loop.train(1, Batches(list(data.dataset), collector_clock), [checkpoint, collector])
    assert len(called) < PER_EPOCH // 3
    # The end of training saves its final step, as ever.
    assert [path.name for path in (tmp_path / "ckpt").rglob("*.ckpt")] == [
        f"hourly-1_{PER_EPOCH}.ckpt"
    ]


@pytest.mark.parametrize("session", [False, True], ids=["loop", "session"])
def test_a_progress_bar_is_called_once_a_tenth_of_a_second_and_ends_at_the_last_step(
    model: Any, tmp_path: Path, collector_clock: ManualClock, session: bool
) -> None:
    data = model(8)
    terminal = Terminal()
    collector = SummaryCollector(tmp_path, collect_freq=50, collect_specified_data=NO_LANDSCAPE)
    progress = Progress(stream=terminal, rank_info=Rank0.info)
    called: list[int] = []
    ends: dict[int, float] = {}  # each step's end, on the loop's clock

    def step_fn(batch: Any) -> float:
        step = len(ends) + 1
        collector_clock.advance(0.004)
        ends[step] = collector_clock()
        return 1.0 / step

    batches = list(data.dataset)
    with counting_calls(called):
        if session:
            with TrainSession(
                [collector, progress],
                network=data.network,
                epochs=EPOCHS,
                steps_per_epoch=PER_EPOCH,
            ) as run:
                for _ in run.epochs():
                    for index in range(PER_EPOCH):
                        batch = batches[index % len(batches)]
                        run.step(batch, step_fn(batch))
        else:
            loop = TrainLoop(step_fn, network=data.network, optimizer=data.optimizer)
            loop.train(EPOCHS, Batches(batches, collector_clock), [collector, progress])
    # 4 ms a step: a call about every 25 steps (the bar's 0.1 s), not at every step...
    assert len(called) < STEPS // 10
    # ... and none later than the first step that ended 0.1 s after the last call.
    for earlier, later in itertools.pairwise(called):
        assert all(ends[step] < ends[earlier] + 0.1 for step in range(earlier + 1, later))
    assert f"{STEPS}/{STEPS}" in terminal.getvalue()
    # The last step's own loss, shown at the end.
    assert f"rank 0 loss={1.0 / STEPS:.4f}" in terminal.getvalue()


def test_progress_on_another_rank_is_never_called_at_steps(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(8)
    rank1 = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, host="h", launcher="pmi")
    stream = io.StringIO()
    collector = SummaryCollector(tmp_path, collect_freq=10, collect_specified_data=NO_LANDSCAPE)
    called: list[int] = []
    loop = TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer)
    with counting_calls(called):
        loop.train(
            EPOCHS,
            Batches(list(data.dataset), collector_clock),
            [collector, Progress(every_steps=1, stream=stream, rank_info=rank1)],
        )
    assert len(called) < STEPS // 3
    assert stream.getvalue() == ""


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a tty does: Progress draws a bar."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("clock", [None, "own"], ids=["default-clock", "own-clock"])
def test_progress_lines_by_seconds_leave_the_steps_before_the_next_line_quiet(
    model: Any, tmp_path: Path, collector_clock: ManualClock, clock: str | None
) -> None:
    # A line an hour: none comes due in training. On the default clock the loop may
    # leave the steps before it uncalled; on a clock of the caller's it cannot tell when.
    data = model(8)
    stream = io.StringIO()
    options: dict[str, Any] = {"clock": lambda: 7.0} if clock else {}
    progress = Progress(every_seconds=3600, stream=stream, rank_info=Rank0.info, **options)
    collector = SummaryCollector(tmp_path, collect_freq=10, collect_specified_data=NO_LANDSCAPE)
    called: list[int] = []
    loop = TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer)
    with counting_calls(called):
        loop.train(1, Batches(list(data.dataset), collector_clock), [collector, progress])
    if clock:
        assert called == list(range(1, PER_EPOCH + 1))
    else:
        assert len(called) < PER_EPOCH // 3
    # The end of training's line, as ever.
    assert stream.getvalue().splitlines()[0].startswith(f"epoch 1/1  step {PER_EPOCH}/")
