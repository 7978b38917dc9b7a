"""The collector's side of the job view: step times, fingerprints, the series rank 0 merges."""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import Any, cast

import crc32c
import numpy as np
import pytest

from rankscribe.collector import (
    ArrayNetwork,
    Callback,
    CallbackParams,
    CollectionSchedule,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.jobview import verdict_lines
from rankscribe.jobview.feed import DATA_WAIT_TAG, FINGERPRINT_TAG, STEP_TIME_TAG
from rankscribe.lineage.recording import parse_run
from rankscribe.ranks import Coordinator, RankInfo
from rankscribe.writer import scalar_summary, tensor_summary
from rankscribe.writer.events import load_dir
from rankscribe.writer.reader import scalars
from tests._support.clocks import ManualClock
from tests.collector.coordinators import Handing

NO_LANDSCAPE = {"collect_landscape": None}
STEP_SECONDS = 0.002
# When a rank's step times reach its file (docs/job-view.md, "When they reach the file"):
# at least every 4,096 steps, and at once for a step of 0.25 s or more.
STEP_TIME_WRITE_COUNT = 4096
STEP_TIME_WRITE_AT_ONCE = 0.25


def summary_steps(directory: Path) -> list[int]:
    """The step of every summary event, in file order."""
    return [
        event.step
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
    ]


def rank_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return scalars(path)


def job_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return scalars(path)


class Snapshots(Callback):
    """After each step: the expected fingerprint of the network's parameters, by hand."""

    def __init__(self, network: Any) -> None:
        self.network = network
        self.by_step: dict[int, int] = {}

    def _snapshot(self, step: int) -> None:
        raw = b"".join(
            np.ascontiguousarray(value).tobytes() for _, value in self.network.named_parameters()
        )
        self.by_step[step] = crc32c.crc32c(raw) & 0xFFFFFF

    def begin(self, run_context: RunContext) -> None:
        self._snapshot(0)  # before any update

    def step_end(self, run_context: RunContext) -> None:
        self._snapshot(run_context.original_args().cur_step_num)


def train(
    model: Any,
    directory: Path,
    *,
    batches: int = 12,
    epochs: int = 1,
    collect_freq: int = 4,
    step: Any = None,
    clock: ManualClock | None = None,
    **arguments: Any,
) -> tuple[Any, Snapshots]:
    data = model(batches)

    def default_step(batch: Any) -> float:
        data.network["fc.bias"][:] += 0.5  # the parameters change at every step
        if clock is not None:
            clock.advance(STEP_SECONDS)  # the step's work, on the collector's clock
        return 0.25

    arguments.setdefault("collect_specified_data", NO_LANDSCAPE)
    collector = SummaryCollector(directory, collect_freq=collect_freq, **arguments)
    snapshots = Snapshots(data.network)
    TrainLoop(step or default_step, network=data.network, optimizer=data.optimizer).train(
        epochs, data.dataset, callbacks=[collector, snapshots]
    )
    return data, snapshots


# --------------------------------------------------------------- the rank's files


def test_every_step_has_its_step_time(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    train(model, tmp_path, batches=12, epochs=2, clock=collector_clock)
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    times = scalars(path)[STEP_TIME_TAG]
    assert [step for step, _ in times] == list(range(1, 25))
    # each step took STEP_SECONDS of the clock, and nothing else counts in it
    assert [seconds for _, seconds in times] == [pytest.approx(STEP_SECONDS)] * 24


def test_the_file_stays_in_step_order(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path, batches=12, epochs=2)
    steps = summary_steps(tmp_path)
    assert steps == sorted(steps)


def test_the_fingerprint_is_crc32c_of_the_parameters_at_collected_steps(
    model: Any, tmp_path: Path
) -> None:
    _, snapshots = train(model, tmp_path, batches=12, collect_freq=4)
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    curves = scalars(path)
    fingerprints = dict(curves[FINGERPRINT_TAG])
    # step 0: when training begins, before any update; then every collected step
    assert sorted(fingerprints) == [0, 1, 4, 8, 12]
    assert [step for step, _ in curves["loss/auto"]] == [1, 4, 8, 12]
    assert fingerprints == {step: float(snapshots.by_step[step]) for step in fingerprints}
    assert len(set(fingerprints.values())) == 5  # the parameters changed in between


def test_fingerprints_can_be_turned_off(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path, fingerprints=False)
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    assert FINGERPRINT_TAG not in scalars(path)
    assert STEP_TIME_TAG in scalars(path)


def test_fingerprints_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="fingerprints"):
        SummaryCollector(tmp_path, fingerprints="yes")  # type: ignore[arg-type]


def test_steps_that_collect_only_tensors_keep_their_step_time(model: Any, tmp_path: Path) -> None:
    def step(batch: Any) -> float:
        tensor_summary("weights", np.arange(3.0))
        scalar_summary("operator_loss", 0.5)
        return 0.25

    # collect_tensor_freq 3: steps 3, 6, 9, 12 collect tensors alone (filter: tensor only)
    train(model, tmp_path, batches=12, collect_freq=4, collect_tensor_freq=3, step=step)
    found: dict[str, list[int]] = {}
    for event in load_dir(tmp_path):
        if event.what == "summary":
            for value in event.values:
                found.setdefault(value.tag, []).append(event.step)  # type: ignore[arg-type]
    assert found[STEP_TIME_TAG] == list(range(1, 13))
    assert found["weights"] == [1, 3, 6, 9, 12]
    # the operator's scalar stays at the steps that collect scalars, as before
    assert found["operator_loss"] == [1, 4, 8, 12]


def test_dataset_sink_mode_records_one_step_time_per_epoch(model: Any, tmp_path: Path) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer).train(
        3, data.dataset, callbacks=[collector], dataset_sink_mode=True
    )
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    assert [step for step, _ in scalars(path)[STEP_TIME_TAG]] == [4, 8, 12]


def test_long_quiet_stretches_still_write_their_step_times(model: Any, tmp_path: Path) -> None:
    """collect_freq beyond the run: the step times go out in bounded runs, all of them."""
    batches = STEP_TIME_WRITE_COUNT * 2 + 10
    data = model(batches)
    collector = SummaryCollector(tmp_path, collect_freq=10_000, collect_specified_data=NO_LANDSCAPE)
    seen: list[int] = []

    class Watch(Callback):
        def step_end(self, run_context: RunContext) -> None:
            step = run_context.original_args().cur_step_num
            if step == STEP_TIME_WRITE_COUNT + 5:
                assert collector.record is not None
                collector.record.flush()
                seen.extend(summary_steps(tmp_path))

    TrainLoop(lambda batch: 0.5, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector, Watch()]
    )
    # mid-run, at most STEP_TIME_WRITE_COUNT step times were still waiting
    assert len(seen) >= 5
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    assert [step for step, _ in scalars(path)[STEP_TIME_TAG]] == list(range(1, batches + 1))


def test_a_long_step_writes_its_step_time_at_once(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(5)
    collector = SummaryCollector(
        tmp_path,
        collect_freq=100,
        collect_specified_data=NO_LANDSCAPE,
        system_interval=0,  # the step times alone: no machine sample at step 0
    )
    on_disk: dict[int, list[int]] = {}

    class Watch(Callback):
        def step_end(self, run_context: RunContext) -> None:
            assert collector.record is not None
            collector.record.flush()  # what the writer was given is on disk
            on_disk[run_context.original_args().cur_step_num] = summary_steps(tmp_path)

    def step(batch: Any) -> float:
        collector_clock.advance(STEP_TIME_WRITE_AT_ONCE * 1.25)
        return 0.5

    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[collector, Watch()]
    )
    # step 0 is the fingerprint taken when training began
    assert on_disk == {step: list(range(step + 1)) for step in range(1, 6)}


def test_step_times_written_at_the_end_take_no_operator_value(model: Any, tmp_path: Path) -> None:
    """A summary operator called after the last step belongs to no step, as before.

    Driven by hand: a loop that calls no epoch_end leaves step times kept
    until end(), where an operator value is waiting.
    """
    data = model(7)
    params = CallbackParams(
        mode="train",
        network=data.network,
        train_network=data.network,
        optimizer=data.optimizer,
        epoch_num=1,
        batch_num=7,
        train_dataset=data.dataset,
        net_outputs=0.5,
    )
    context = RunContext(params)
    with SummaryCollector(
        tmp_path, collect_freq=100, collect_specified_data=NO_LANDSCAPE
    ) as collector:
        params.list_callback = [collector]
        collector.begin(context)
        for step in range(1, 6):
            params.cur_step_num = step
            collector.step_begin(context)
            collector.step_end(context)
        scalar_summary("after_training", 2.0)
        collector.end(context)
    [path] = [path for path in tmp_path.iterdir() if path.name.endswith("_MS")]
    curves = scalars(path)
    assert [step for step, _ in curves[STEP_TIME_TAG]] == [1, 2, 3, 4, 5]
    assert [tag for tag in curves if "after" in tag] == []


# ------------------------------------------------------------------- the series


def as_rank(rank: int, coordinator: Handing, world_size: int = 2) -> dict[str, Any]:
    """The arguments of rank ``rank``'s collector; the root's goes on in the directory its
    other ranks (run before it, in this process) wrote into already."""
    return {
        "rank_info": RankInfo(rank, world_size, rank, world_size, "host", "pmi"),
        "coordinator": cast(Coordinator, coordinator),  # registered as a Coordinator
        "on_exists": "append",
    }


def test_the_series_travels_to_rank_zero_as_the_collector_recorded_it(
    model: Any, tmp_path: Path
) -> None:
    def step(batch: Any) -> float:
        scalar_summary("operator_loss", 0.5)  # the files have it; the series does not
        return 0.75

    rank_1 = Handing(1)
    train(model, tmp_path, batches=8, collect_freq=4, step=step, **as_rank(1, rank_1))
    rank_0 = Handing(0, others=rank_1.replayed(1))
    train(model, tmp_path, batches=8, collect_freq=4, **as_rank(0, rank_0))
    on_disk = rank_scalars(tmp_path / "rank_1")
    assert "operator_loss" in on_disk
    job = job_scalars(tmp_path)
    # every point of rank 1's files reached rank 0, which counts two ranks at each
    for tag in ("loss/auto", STEP_TIME_TAG, DATA_WAIT_TAG, FINGERPRINT_TAG):
        assert dict(job[f"{tag}/ranks"]) == {step: 2.0 for step, _ in on_disk[tag]}, tag
    assert job["loss/auto/mean"] == [(step, 0.5) for step, _ in on_disk["loss/auto"]]
    assert dict(job["loss/auto/max_rank"]) == {step: 1.0 for step, _ in on_disk["loss/auto"]}
    assert not [tag for tag in job if tag.startswith("operator_loss")]
    assert user_defined(tmp_path)["job/last_step/1"] == 8


def test_a_new_training_run_starts_a_new_series(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    data = model(5)
    rank_1 = Handing(1)
    collector = SummaryCollector(
        tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE, **as_rank(1, rank_1)
    )
    seconds = [0.5]  # the first run's steps are slow, the second's quick; it is shorter

    def step(batch: Any) -> float:
        collector_clock.advance(seconds[0])
        return 0.5

    loop = TrainLoop(
        step, network=data.network, optimizer=data.optimizer, eval_fn=lambda batch: {"acc": 1.0}
    )
    loop.train(2, data.dataset, callbacks=[collector])
    seconds[0] = STEP_SECONDS
    loop.train(1, data.dataset, callbacks=[collector])
    loop.eval(data.dataset, callbacks=[collector])  # keeps the training run's series
    collector.close()
    rank_0 = Handing(0, others=[{1: payload} for payload in rank_1.handed[-2:]])
    train(model, tmp_path, batches=5, collect_freq=2, clock=collector_clock, **as_rank(0, rank_0))
    # the second run's steps only, from rank 1's last hand-over (the evaluation's)
    job = job_scalars(tmp_path)
    assert dict(job[f"{STEP_TIME_TAG}/ranks"]) == {step: 2.0 for step in range(1, 6)}
    assert [step for step, _ in job[f"{STEP_TIME_TAG}/max"]] == [1, 2, 3, 4, 5]
    assert [value for _, value in job[f"{STEP_TIME_TAG}/max"]] == [pytest.approx(STEP_SECONDS)] * 5


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        {"loss": [1, 2]},
        {1: (array("q"), array("f"))},
        {"loss": (array("q", [1]), array("f"))},
    ],
)
def test_a_malformed_series_is_refused(model: Any, tmp_path: Path, payload: Any) -> None:
    # rank 1's lineage and series, as rank 0's merge receives them
    arrived = {1: {"lineage": None, "series": payload}}
    rank_0 = Handing(0, others=[{}, arrived])  # the start's gather, then the merge's
    train(model, tmp_path, batches=4, collect_freq=2, **as_rank(0, rank_0))
    job = job_scalars(tmp_path)
    assert dict(job[f"{STEP_TIME_TAG}/ranks"]) == {step: 1.0 for step in range(1, 5)}
    assert not [tag for tag in job if tag.startswith("loss/") and not tag.startswith("loss/auto")]


def fingerprints_of(directory: Path, parameters: dict[str, Any]) -> dict[int, float] | None:
    """The fingerprints a run of a network of ``parameters`` (left as they are) records."""
    network = ArrayNetwork(parameters, name="Net")
    collector = SummaryCollector(directory, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(lambda batch: 0.5, network=network).train(1, [np.zeros(2)] * 2, callbacks=[collector])
    found = rank_scalars(directory).get(FINGERPRINT_TAG)
    return None if found is None else dict(found)


def test_the_fingerprint_chains_crc32c_over_the_raw_bytes(tmp_path: Path) -> None:
    parameters = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array(7.0),
        "c": np.arange(4, dtype=np.int64)[::2],
    }
    raw = b"".join(np.ascontiguousarray(value).tobytes() for value in parameters.values())
    expected = float(crc32c.crc32c(raw) & 0xFFFFFF)
    assert fingerprints_of(tmp_path / "net", parameters) == {0: expected, 1: expected, 2: expected}
    upper = {name.upper(): value for name, value in parameters.items()}
    assert fingerprints_of(tmp_path / "upper", upper) == {0: expected, 1: expected, 2: expected}
    assert fingerprints_of(tmp_path / "empty", {}) == {0: 0.0, 1: 0.0, 2: 0.0}


def test_a_parameter_without_raw_bytes_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert fingerprints_of(tmp_path, {"a": np.array([object()], dtype=object)}) is None
    assert "parameter of dtype object has no raw bytes" in caplog.text


# ------------------------------------------------------------- the fast path


def test_next_collected_is_what_next_would_collect() -> None:
    # ... and extracts_at whether it extracts (the collector's light steps are planned so)
    for world_size, rank, freq, tensor_freq in [
        (1, 0, 3, None),
        (2, 1, 4, 3),
        (3, 0, 1, None),
        (2, 0, 7, 5),
    ]:
        schedule = CollectionSchedule(freq, tensor_freq, world_size=world_size, rank=rank)
        schedule.first(1, 60)
        unit = 1
        while unit < 60:
            expected = next(u for u in range(unit + 1, 200) if schedule.would_collect(u))
            assert schedule.next_collected(unit) == expected
            for skipped in range(unit + 1, expected):
                assert schedule.next(skipped).name == "NOTHING"
            extracts = schedule.extracts_at(expected)
            decision = schedule.next(expected)
            assert decision.name != "NOTHING"
            assert decision.extracts == extracts
            unit = expected


def test_landscape_steps_are_still_saved(model: Any, tmp_path: Path) -> None:
    landscape = {
        "landscape_size": 4,
        "unit": "step",
        "create_landscape": {"train": True, "result": False},
        "num_samples": 2,
        "intervals": [[2, 3, 7]],
    }
    train(
        model,
        tmp_path,
        batches=9,
        collect_freq=4,
        collect_specified_data={"collect_landscape": landscape},
    )
    saved = sorted(path.name for path in (tmp_path / "ckpt_dir").glob("*.ckpt"))
    assert saved == ["TinyNet_2_step.ckpt", "TinyNet_3_step.ckpt", "TinyNet_7_step.ckpt"]


# ------------------------------------------------------------- rank 0's merge


def user_defined(directory: Path) -> dict[str, Any]:
    lineage = parse_run(str(directory)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


def test_rank_zero_writes_the_job_view_from_the_gathered_series(
    model: Any, tmp_path: Path, collector_clock: ManualClock
) -> None:
    # rank 1: slow at every step, and its parameters leave the others' at step 5;
    # rank 2: its loss 2.0 where rank 0's is 1.0 and rank 1's 3.0
    def rank_step(rank: int, data: Any) -> Any:
        steps = iter(range(1, 100))

        def step(batch: Any) -> float:
            number = next(steps)
            data.network["fc.bias"][:] += 99.0 if rank == 1 and number >= 5 else 0.5
            collector_clock.advance(0.05 if rank == 1 else 0.01)
            return [1.0, 3.0, 2.0][rank]

        return step

    handed: dict[int, Handing] = {}
    for rank in (1, 2):
        data = model(8)
        handed[rank] = Handing(rank, 3)
        collector = SummaryCollector(
            tmp_path,
            collect_freq=2,
            collect_specified_data=NO_LANDSCAPE,
            **as_rank(rank, handed[rank], 3),
        )
        TrainLoop(rank_step(rank, data), network=data.network).train(
            1, data.dataset, callbacks=[collector]
        )
    others = [{1: one, 2: two} for one, two in zip(handed[1].handed, handed[2].handed, strict=True)]
    data = model(8)
    collector = SummaryCollector(
        tmp_path,
        collect_freq=2,
        collect_specified_data=NO_LANDSCAPE,
        **as_rank(0, Handing(0, 3, others), 3),
    )
    TrainLoop(rank_step(0, data), network=data.network).train(
        1, data.dataset, callbacks=[collector]
    )
    [job_file] = [name for name in os.listdir(tmp_path) if name.endswith("_MS")]
    assert ".job." in job_file
    curves = job_scalars(tmp_path)
    loss_steps = [step for step, _ in curves["loss/auto/mean"]]
    assert loss_steps == [1, 2, 4, 6, 8]
    assert curves["loss/auto/mean"] == [(step, 2.0) for step in loss_steps]
    assert dict(curves["loss/auto/max_rank"]) == {step: 1.0 for step in loss_steps}
    assert dict(curves[f"{STEP_TIME_TAG}/ranks"]) == {step: 3.0 for step in range(1, 9)}
    assert dict(curves[f"{STEP_TIME_TAG}/slowest_rank"]) == {step: 1.0 for step in range(1, 9)}
    user = user_defined(tmp_path)
    assert user["job/straggler_rank"] == 1
    # the first fingerprint taken after rank 1's parameters left: step 6
    assert (user["job/diverged_ranks"], user["job/diverged_first_step"]) == ("1", 6)
    assert user["job/missing_ranks"] == ""


def test_a_rank_that_never_arrives_is_missing_from_the_job_view(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path, batches=4, collect_freq=2, **as_rank(0, Handing(0)))
    curves = job_scalars(tmp_path)
    assert dict(curves[f"{STEP_TIME_TAG}/ranks"]) == {step: 1.0 for step in range(1, 5)}
    user = user_defined(tmp_path)
    assert user["job/missing_ranks"] == "1"
    assert user["ranks_missing"] == "1"


def test_an_evaluation_alone_keeps_the_job_files_and_verdicts(model: Any, tmp_path: Path) -> None:
    data = model(4)

    def loop_and_collector() -> tuple[TrainLoop, SummaryCollector]:
        collector = SummaryCollector(
            tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE, **as_rank(0, Handing(0))
        )
        loop = TrainLoop(
            lambda batch: 0.5,
            network=data.network,
            optimizer=data.optimizer,
            eval_fn=lambda batch: {"acc": 1.0},
        )
        return loop, collector

    loop, collector = loop_and_collector()
    loop.train(1, data.dataset, callbacks=[collector])
    collector.close()

    def job_files() -> dict[str, bytes]:
        return {
            name: (tmp_path / name).read_bytes()
            for name in os.listdir(tmp_path)
            if name.endswith("_MS")
        }

    def verdicts() -> dict[str, Any]:
        user = user_defined(tmp_path)
        return {key: value for key, value in user.items() if key.startswith("job/")}

    before, judged = job_files(), verdicts()
    assert judged["job/last_step/0"] == 4
    # Later, a collector of the job that only evaluates: a merge without steps of its own.
    loop, collector = loop_and_collector()
    loop.eval(data.dataset, callbacks=[collector])
    collector.close()
    assert job_files() == before and len(before) == 1
    assert verdicts() == judged


# ------------------------------------------------------------- step times off


def test_step_times_off_writes_neither_step_time_nor_data_wait(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path, batches=12, epochs=2, step_times=False)
    on_disk = rank_scalars(tmp_path)
    assert STEP_TIME_TAG not in on_disk and DATA_WAIT_TAG not in on_disk
    assert [step for step, _ in on_disk["loss/auto"]] == [1, 4, 8, 12, 16, 20, 24]


@pytest.mark.parametrize("value", ["off", 0, None])
def test_a_bad_step_times_is_refused_naming_the_argument(tmp_path: Path, value: Any) -> None:
    with pytest.raises(
        CollectorTypeError,
        match=r"^For `step_times` the type should be a valid type of \['bool'\], but got ",
    ):
        SummaryCollector(tmp_path, step_times=value)


@pytest.mark.parametrize("interval", [None, 0])  # the live view's verdicts; the end's only
def test_a_rank_without_step_times_is_named_untimed_not_judged(
    model: Any, tmp_path: Path, interval: float | None
) -> None:
    # Rank 1 turned its step times off: the job view says it has no timing for it and
    # still judges the rest (docs/job-view.md, "Verdicts").
    rank_1 = Handing(1)
    train(model, tmp_path, batches=8, step_times=False, **as_rank(1, rank_1))
    rank_0 = Handing(0, others=rank_1.replayed(1))
    train(model, tmp_path, batches=8, job_view_interval=interval, **as_rank(0, rank_0))
    job = job_scalars(tmp_path)
    assert dict(job[f"{STEP_TIME_TAG}/ranks"]) == {step: 1.0 for step in range(1, 9)}
    verdicts = user_defined(tmp_path)
    assert verdicts["job/untimed_ranks"] == "1"
    assert verdicts["job/straggler_rank"] == -1
    assert verdicts["job/last_step/1"] == 8
    assert "no timing: rank 1 (step times off: not judged as stragglers)" in verdict_lines(verdicts)
