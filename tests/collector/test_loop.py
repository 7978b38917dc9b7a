"""TrainLoop: the callback events and the run state, as MindSpore's Model gives them."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    Callback,
    RunContext,
    TrainLoop,
)
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError


class Recorder(Callback):
    """Writes down every event with the state it saw."""

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
        self._log("begin", run_context)

    def epoch_begin(self, run_context: RunContext) -> None:
        self._log("epoch_begin", run_context)

    def step_begin(self, run_context: RunContext) -> None:
        self._log("step_begin", run_context)

    def step_end(self, run_context: RunContext) -> None:
        self._log("step_end", run_context)
        if run_context.original_args().cur_step_num == self.stop_at_step:
            run_context.request_stop()

    def epoch_end(self, run_context: RunContext) -> None:
        self._log("epoch_end", run_context)

    def end(self, run_context: RunContext) -> None:
        self._log("end", run_context)


def dataset(batches: int = 3) -> ArrayDataset:
    return ArrayDataset(np.arange(2 * batches, dtype=np.float32), batch_size=2)


def test_train_events_in_order() -> None:
    recorder = Recorder()
    TrainLoop(lambda batch: 0.0).train(2, dataset(2), callbacks=[recorder])
    assert recorder.events == [
        ("enter",),
        ("begin", 0, 0),
        ("epoch_begin", 1, 0),
        ("step_begin", 1, 1),
        ("step_end", 1, 1),
        ("step_begin", 1, 2),
        ("step_end", 1, 2),
        ("epoch_end", 1, 2),
        ("epoch_begin", 2, 2),
        ("step_begin", 2, 3),
        ("step_end", 2, 3),
        ("step_begin", 2, 4),
        ("step_end", 2, 4),
        ("epoch_end", 2, 4),
        ("end", 2, 4),
        ("exit", None),
    ]


def test_run_state_is_filled() -> None:
    network = ArrayNetwork({"w": np.ones(2)})
    optimizer = ArrayOptimizer(network)
    seen: list[dict[str, Any]] = []

    class Look(Callback):
        def step_end(self, run_context: RunContext) -> None:
            params = run_context.original_args()
            seen.append(
                {
                    "element": params.train_dataset_element[0].tolist(),
                    "outputs": params.net_outputs,
                }
            )

    look = Look()
    data = dataset(2)
    loss = object()
    params = TrainLoop(
        lambda batch: float(batch[0].sum()), network=network, optimizer=optimizer, loss_fn=loss
    ).train(1, data, callbacks=look)
    assert seen == [
        {"element": [0.0, 1.0], "outputs": 1.0},
        {"element": [2.0, 3.0], "outputs": 5.0},
    ]
    assert params.mode == "train"
    assert (params.epoch_num, params.batch_num, params.cur_step_num) == (1, 2, 2)
    assert params.network is network and params.train_network is network
    assert params.optimizer is optimizer and params.loss_fn is loss
    assert params.train_dataset is data and params.list_callback == [look]
    assert params.dataset_sink_mode is False
    assert (params.device_number, params.parallel_mode) == (1, "stand_alone")


def test_device_number_and_parallel_mode_follow_the_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "4")
    loop = TrainLoop(lambda batch: 0.0)
    assert (loop.device_number, loop.parallel_mode) == (4, "data_parallel")
    chosen = TrainLoop(lambda b: 0.0, device_number=2, parallel_mode="auto_parallel")
    assert (chosen.device_number, chosen.parallel_mode) == (2, "auto_parallel")


def test_sink_mode_has_one_callback_step_per_epoch() -> None:
    recorder = Recorder()
    calls: list[float] = []
    params = TrainLoop(lambda batch: calls.append(float(batch[0][0])) or len(calls)).train(
        2, dataset(3), callbacks=[recorder], dataset_sink_mode=True
    )
    steps = [event for event in recorder.events if event[0].startswith("step")]
    assert steps == [
        ("step_begin", 1, 0),
        ("step_end", 1, 3),
        ("step_begin", 2, 3),
        ("step_end", 2, 6),
    ]
    assert len(calls) == 6  # the step function still runs on every batch
    assert params.net_outputs == 6 and params.train_dataset_element[0].tolist() == [4.0, 5.0]
    assert params.dataset_sink_mode is True


def test_request_stop_ends_after_the_step() -> None:
    recorder = Recorder(stop_at_step=2)
    params = TrainLoop(lambda batch: 0.0).train(3, dataset(3), callbacks=[recorder])
    names = [event[0] for event in recorder.events]
    assert params.cur_step_num == 2
    assert names[-4:] == ["step_end", "epoch_end", "end", "exit"]
    assert names.count("epoch_begin") == 1


def test_an_error_in_the_step_exits_the_callbacks() -> None:
    recorder = Recorder()

    def step(batch: Any) -> float:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        TrainLoop(step).train(1, dataset(), callbacks=[recorder])
    assert recorder.events[-1] == ("exit", RuntimeError)


def test_eval_events_and_metrics() -> None:
    recorder = Recorder()
    results = iter([{"acc": 0.5, "loss": np.float32(2.0)}, {"acc": 1.0, "loss": 4}])
    loop = TrainLoop(lambda batch: 0.0, eval_fn=lambda batch: next(results))
    metrics = loop.eval(dataset(2), callbacks=[recorder])
    assert metrics == {"acc": 0.75, "loss": 3.0}
    assert [event[0] for event in recorder.events] == [
        "enter",
        "begin",
        "step_begin",
        "step_end",
        "step_begin",
        "step_end",
        "end",
        "exit",
    ]


def test_eval_state() -> None:
    seen: dict[str, Any] = {}

    class Look(Callback):
        def end(self, run_context: RunContext) -> None:
            params = run_context.original_args()
            seen.update(
                mode=params.mode,
                metrics=params.metrics,
                valid=params.valid_dataset,
                network=params.eval_network,
            )

    data = dataset(1)
    network = object()
    TrainLoop(lambda b: 0.0, network=network, eval_fn=lambda b: {"acc": 1}).eval(
        data, callbacks=[Look()]
    )
    assert seen == {"mode": "eval", "metrics": {"acc": 1.0}, "valid": data, "network": network}


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: TrainLoop(None),
            CollectorTypeError,  # type: ignore[arg-type]
            "For 'TrainLoop', the argument 'step_fn' must be a function, but got NoneType.",
        ),
        (
            lambda: TrainLoop(lambda b: 0, eval_fn=3),
            CollectorTypeError,  # type: ignore[arg-type]
            "For 'TrainLoop', the argument 'eval_fn' must be a function, but got int.",
        ),
        (
            lambda: TrainLoop(lambda b: 0, device_number=0),
            CollectorValueError,
            "For 'TrainLoop', the argument 'device_number' must be an int >= 1, but got 0.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(0, dataset()),
            CollectorValueError,
            "For 'TrainLoop.train', the argument 'epoch' must be an int >= 1, but got 0.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(1, 5),
            CollectorTypeError,  # type: ignore[arg-type]
            "For 'TrainLoop', the argument 'train_dataset' must be an iterable of batches, but got "
            "int.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(1, dataset(), dataset_sink_mode=1),  # type: ignore[arg-type]
            CollectorTypeError,
            "For 'TrainLoop.train', the argument 'dataset_sink_mode' must be a bool, but got int.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).eval(dataset()),
            CollectorValueError,
            "For 'TrainLoop.eval', an eval_fn is needed: TrainLoop(step_fn, eval_fn=...).",
        ),
        (
            lambda: TrainLoop(lambda b: 0, eval_fn=lambda b: 0.5).eval(dataset()),
            CollectorTypeError,
            "For 'TrainLoop.eval', eval_fn must return a dict of metric name to number, but "
            "returned float.",
        ),
        (
            lambda: TrainLoop(lambda b: 0, eval_fn=lambda b: {"acc": "high"}).eval(dataset()),
            CollectorTypeError,
            "For 'TrainLoop.eval', metric 'acc' must be a number, but eval_fn returned str.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(1, dataset(), callbacks=5),  # type: ignore[arg-type]
            CollectorTypeError,
            "For 'TrainLoop.train', the argument 'callbacks' must be a Callback, a list of "
            "Callbacks or None, but got int 5.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(1, dataset(), callbacks="Recorder"),  # type: ignore[arg-type]
            CollectorTypeError,
            "For 'TrainLoop.train', the argument 'callbacks' must be a Callback, a list of "
            "Callbacks or None, but got str 'Recorder'.",
        ),
        (
            lambda: TrainLoop(lambda b: 0).train(1, dataset(), callbacks=[Recorder(), 5]),  # type: ignore[list-item]
            CollectorTypeError,
            "For 'TrainLoop.train', callbacks[1] must be a Callback (or have its hooks: begin, "
            "epoch_begin, step_begin, step_end, epoch_end, end), but got int, which has no begin, "
            "epoch_begin, step_begin, step_end, epoch_end, end.",
        ),
        (
            lambda: TrainLoop(lambda b: 0, eval_fn=lambda b: {}).eval(dataset(), callbacks=5),  # type: ignore[arg-type]
            CollectorTypeError,
            "For 'TrainLoop.eval', the argument 'callbacks' must be a Callback, a list of "
            "Callbacks or None, but got int 5.",
        ),
    ],
)
def test_bad_arguments(make: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        make()
    assert str(raised.value) == message


def test_bad_callbacks_are_refused_before_any_step_runs() -> None:
    steps: list[Any] = []
    with pytest.raises(CollectorTypeError):
        TrainLoop(steps.append).train(1, dataset(), callbacks=5)  # type: ignore[arg-type]
    assert steps == []
