"""TrainSession: the collector's automatic collection from a NumPy loop of the script's own.

What is checked is what lands on disk: the loss at the collected steps, the weights'
histograms, the input images, the lineage, and the job's merged lineage (two ranks run
one after the other in this process, over a FileCoordinator: rank 1 hands its lineage
over and returns, rank 0 finds it and merges).
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    Callback,
    CollectorError,
    RunContext,
    SummaryCollector,
    TrainSession,
)
from rankscribe.collector.errors import (
    CollectorTypeError,
    CollectorValueError,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.ranks import FileCoordinator, RankInfo
from rankscribe.writer.reader import scalars

NO_LANDSCAPE = {"collect_landscape": None}


class SoftmaxCrossEntropy:
    """Stands for a loss function: the lineage records its class name."""


def _loss(step: int, rank: int) -> float:
    return 1.0 / step + rank


def _own_loop(
    data: Any, collector: SummaryCollector, epochs: int, rank: int = 0, fail_at: int | None = None
) -> None:
    with TrainSession(
        [collector],
        network=data.network,
        optimizer=data.optimizer,
        loss_fn=SoftmaxCrossEntropy(),
        train_dataset=data.dataset,
        epochs=epochs,
    ) as session:
        step = 0
        for _ in session.epochs():
            for batch in data.dataset:
                step += 1
                if step == fail_at:
                    raise RuntimeError("the loop broke")
                data.network["fc.bias"][:] += 1.0
                session.step(batch, np.float32(_loss(step, rank)))


def test_loss_histograms_inputs_and_lineage_of_a_numpy_loop(
    model: Any, tmp_path: Path, read_steps: Any
) -> None:
    data = model(4)
    _own_loop(
        data,
        SummaryCollector(tmp_path, collect_freq=2, collect_specified_data=NO_LANDSCAPE),
        epochs=2,
    )
    losses = scalars(tmp_path)["loss/auto"]
    assert [step for step, _ in losses] == [1, 2, 4, 6, 8]
    np.testing.assert_allclose(
        [value for _, value in losses], [_loss(step, 0) for step in (1, 2, 4, 6, 8)], rtol=1e-6
    )
    steps = read_steps(tmp_path)
    assert steps[("histogram", "fc.bias/auto")] == [1, 2, 4, 6, 8]
    assert steps[("image", "input_data/auto")] == [1, 2, 4, 6, 8]
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["hyper_parameters"]["epoch"] == 2
    assert lineage["hyper_parameters"]["optimizer"] == "Momentum"
    assert lineage["hyper_parameters"]["batch_size"] == 2
    assert lineage["algorithm"]["network"] == "TinyNet"
    assert lineage["hyper_parameters"]["loss_function"] == "SoftmaxCrossEntropy"
    assert lineage["dataset_graph"]["op_type"] == "ArrayDataset"
    assert lineage["algorithm"]["loss"] == pytest.approx(_loss(8, 0))
    assert lineage["train_dataset"]["train_dataset_size"] == 8


def test_two_ranks_merge_the_job_lineage(model: Any, tmp_path: Path) -> None:
    # The ranks run at once (a thread each), as a job's do: they claim the job's
    # directory together before either writes (docs/layout.md), then rank 0 merges.
    summary = tmp_path / "job"
    rendezvous = tmp_path / "rendezvous"
    failed: dict[int, BaseException] = {}

    def rank_run(rank: int, data: Any) -> None:
        info = RankInfo(
            rank=rank, world_size=2, local_rank=rank, local_size=2, host="h", launcher="pmi"
        )
        collector = SummaryCollector(
            summary,
            collect_freq=1,
            collect_specified_data=NO_LANDSCAPE,
            rank_info=info,
            coordinator=FileCoordinator(info, rendezvous, timeout=30),
            merge_timeout=30,
        )
        try:
            _own_loop(data, collector, epochs=1, rank=rank)
        except BaseException as error:
            failed[rank] = error

    threads = [
        threading.Thread(target=rank_run, args=(rank, model(3, seed=rank))) for rank in (0, 1)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failed and not any(thread.is_alive() for thread in threads)
    for rank in (0, 1):
        losses = scalars(summary / f"rank_{rank}")["loss/auto"]
        assert [step for step, _ in losses] == [1, 2, 3]
        assert losses[-1][1] == pytest.approx(_loss(3, rank))
    merged = [name for name in os.listdir(summary) if ".merged." in name]
    assert len(merged) == 1
    lineage = get_summary_lineage(str(summary))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["algorithm"]["network"] == "TinyNet"
    assert lineage["train_dataset"]["train_dataset_size"] == 12  # both ranks' samples


def test_a_loop_that_raises_still_closes_the_collector(model: Any, tmp_path: Path) -> None:
    data = model(4)
    collector = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    with pytest.raises(RuntimeError, match="the loop broke"):
        _own_loop(data, collector, epochs=1, fail_at=4)
    assert collector.record is None  # closed
    losses = scalars(tmp_path)["loss/auto"]
    assert [step for step, _ in losses] == [1, 2, 3]
    summaries = [name for name in os.listdir(tmp_path) if name.endswith("_MS")]
    assert summaries and all(
        stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o400 for name in summaries
    )


class Recorder(Callback):
    def __init__(self, stop_at_step: int | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.stop_at_step = stop_at_step

    def __enter__(self) -> Recorder:
        self.events.append(("enter",))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.events.append(("exit", exc_type))

    def _log(self, name: str, context: RunContext) -> None:
        params = context.original_args()
        self.events.append((name, params.cur_epoch_num, params.cur_step_num))

    def begin(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        self.events.append(
            (
                "begin",
                params.mode,
                params.epoch_num,
                params.batch_num,
                params.parallel_mode,
                params.device_number,
            )
        )

    def epoch_begin(self, run_context: RunContext) -> None:
        self._log("epoch_begin", run_context)

    def step_begin(self, run_context: RunContext) -> None:
        self._log("step_begin", run_context)

    def step_end(self, run_context: RunContext) -> None:
        self._log("step_end", run_context)
        params = run_context.original_args()
        self.events.append(("outputs", params.net_outputs))
        if params.cur_step_num == self.stop_at_step:
            run_context.request_stop()

    def epoch_end(self, run_context: RunContext) -> None:
        self._log("epoch_end", run_context)

    def end(self, run_context: RunContext) -> None:
        self._log("end", run_context)


def test_the_hooks_come_in_train_loops_order(model: Any) -> None:
    recorder = Recorder()
    data = model(2)
    with TrainSession(
        recorder, network=data.network, train_dataset=data.dataset, epochs=2
    ) as session:
        for epoch in session.epochs():
            for index, batch in enumerate(data.dataset):
                session.step(batch, 10 * epoch + index)
    assert recorder.events == [
        ("enter",),
        ("begin", "train", 2, 2, "stand_alone", 1),
        ("epoch_begin", 1, 0),
        ("step_begin", 1, 1),
        ("step_end", 1, 1),
        ("outputs", 10),
        ("step_begin", 1, 2),
        ("step_end", 1, 2),
        ("outputs", 11),
        ("epoch_end", 1, 2),
        ("epoch_begin", 2, 2),
        ("step_begin", 2, 3),
        ("step_end", 2, 3),
        ("outputs", 20),
        ("step_begin", 2, 4),
        ("step_end", 2, 4),
        ("outputs", 21),
        ("epoch_end", 2, 4),
        ("end", 2, 4),
        ("exit", None),
    ]


def test_a_stop_request_ends_the_epochs_and_steps_per_epoch_is_given(model: Any) -> None:
    recorder = Recorder(stop_at_step=2)
    with TrainSession([recorder], epochs=5, steps_per_epoch=3) as session:
        for _ in session.epochs():
            for step in range(3):
                session.step(None, step)
                if session.stop_requested:
                    break
    assert recorder.events[1] == ("begin", "train", 5, 3, "stand_alone", 1)
    assert [event[0] for event in recorder.events[-4:]] == ["outputs", "epoch_end", "end", "exit"]
    assert recorder.events[-3] == ("epoch_end", 1, 2)


def test_a_raising_body_exits_the_callbacks_without_end(model: Any) -> None:
    recorder = Recorder()
    with pytest.raises(KeyError), TrainSession([recorder], epochs=1) as session:
        for _ in session.epochs():
            raise KeyError("x")
    assert [event[0] for event in recorder.events] == ["enter", "begin", "epoch_begin", "exit"]
    assert recorder.events[-1] == ("exit", KeyError)


@pytest.mark.parametrize(
    ("arguments", "error", "parts"),
    [
        ({"epochs": 0}, CollectorValueError, ["'epochs'", "int >= 1", "0"]),
        ({"epochs": True}, CollectorValueError, ["'epochs'", "True"]),
        ({"steps_per_epoch": -1}, CollectorValueError, ["'steps_per_epoch'", "or None", "-1"]),
        ({"device_number": 0}, CollectorValueError, ["'device_number'", "0"]),
    ],
)
def test_bad_arguments_name_themselves(
    arguments: dict[str, Any], error: type, parts: list[str]
) -> None:
    with pytest.raises(error) as raised:
        TrainSession([], **arguments)
    assert "TrainSession" in str(raised.value)
    for part in parts:
        assert part in str(raised.value)


def test_callbacks_must_be_callbacks() -> None:
    with pytest.raises(
        CollectorTypeError,
        match=r"'callbacks' .* callbacks\[0\] must be a "
        r"Callback \(or have its hooks: .*\), but got "
        r"str, which has no begin, ",
    ):
        TrainSession(["collector"])


def test_calls_out_of_place_say_where_they_belong(model: Any) -> None:
    session = TrainSession([], epochs=1)
    with pytest.raises(CollectorError, match="inside `with TrainSession"):
        session.step(None, 1.0)
    with session, pytest.raises(CollectorError, match=r"inside `for epoch in session\.epochs"):
        session.step(None, 1.0)
    with pytest.raises(CollectorError, match="runs once"):
        session.__enter__()
