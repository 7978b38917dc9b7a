"""Which steps hold loss, histograms, images and tensors, read back from the files.

2 epochs x 30 steps with collect_freq=3, in step and in sink mode, with the
default and custom collect_tensor_freq. Every expected list below is worked
out by hand from the rules of docs/collector-schedule.md ("When a unit is
collected"); the collector's schedule code is not used to compute them:

- the first unit is always collected, nothing filtered;
- then a unit is collected when unit % collect_freq == 0;
- tensors follow range(0, total + 1, collect_tensor_freq), or by default
  range(0, total + 1, collect_freq) unless that has more than 20 entries, then
  range(0, total + 1, total // 19)[:20] (or range(0, total + 1)[:21] when
  total // 19 <= 1);
- a unit only in the tensor range records only tensors; a unit only on the
  frequency records everything but tensors.

In sink mode the unit is the epoch and the step written is cur_step_num
(30 per epoch here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import Callback, SummaryCollector, TrainLoop, TrainSession
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.writer import histogram_summary, tensor_summary

NO_LANDSCAPE = {"collect_landscape": None}
LOSS = ("scalar", "loss/auto")
IMAGES = ("image", "input_data/auto")
PARAMETER_HISTOGRAM = ("histogram", "fc.weight/auto")
OPERATOR_HISTOGRAM = ("histogram", "activations")
OPERATOR_TENSOR = ("tensor", "weights")


def train(
    model_factory: Any,
    directory: Path,
    *,
    epochs: int,
    batches: int,
    sink: bool,
    collect_freq: int,
    collect_tensor_freq: int | None = None,
    histograms: bool = True,
    **options: Any,
) -> None:
    model = model_factory(batches)
    counter = {"step": 0}

    def step(batch: tuple[np.ndarray, np.ndarray]) -> np.floating[Any]:
        counter["step"] += 1  # the number of the batch, counting from 1 across epochs
        number = float(counter["step"])
        if histograms:
            histogram_summary("activations", np.full(3, number))
        tensor_summary("weights", np.full(2, number))
        return np.float32(1.0 / number)

    arguments: dict[str, Any] = {
        "collect_specified_data": NO_LANDSCAPE,
        # The schedule alone: these steps take microseconds, so the collection costs
        # many times the step and the cost budget would shed the histograms from step
        # 41 (docs/collector-cost.md; tests/collector/test_cost_budget.py tests that).
        "cost_budget": "off",
    }
    collector = SummaryCollector(
        directory,
        collect_freq=collect_freq,
        collect_tensor_freq=collect_tensor_freq,
        **(arguments | options),
    )
    loop = TrainLoop(step, network=model.network, optimizer=model.optimizer)
    loop.train(epochs, model.dataset, callbacks=[collector], dataset_sink_mode=sink)


def multiples(step: int, last: int) -> list[int]:
    return list(range(step, last + 1, step))


# (mode, collect_freq, collect_tensor_freq, everything-but-tensor steps, tensor steps)
CASES = [
    pytest.param(
        False,
        3,
        None,
        # 1, then 3, 6, ..., 60
        [1, *multiples(3, 60)],
        # total 60: range(0, 61, 3) has 21 entries > 20, 60 // 19 = 3 > 1, so
        # range(0, 61, 3)[:20] = 0, 3, ..., 57; plus the first step
        [1, *multiples(3, 57)],
        id="step-default",
    ),
    pytest.param(
        False,
        3,
        4,
        [1, *multiples(3, 60)],
        # range(0, 61, 4) = 0, 4, ..., 60; steps 4, 8, 16, ... hold tensors only
        [1, *multiples(4, 60)],
        id="step-tensor-freq-4",
    ),
    pytest.param(
        False,
        3,
        25,
        [1, *multiples(3, 60)],
        [1, 25, 50],  # range(0, 61, 25)
        id="step-tensor-freq-25",
    ),
    pytest.param(
        False,
        1,
        None,
        list(range(1, 61)),
        # range(0, 61, 1) has 61 entries > 20, 60 // 19 = 3: range(0, 61, 3)[:20]
        [1, *multiples(3, 57)],
        id="step-freq-1",
    ),
    pytest.param(
        True,
        3,
        None,
        # epochs 1 and 2: epoch 1 is the first; 2 % 3 != 0
        [30],
        # total 2 epochs: range(0, 3, 3) = [0]; only the first epoch
        [30],
        id="sink-default",
    ),
    pytest.param(
        True,
        3,
        1,
        [30],
        # range(0, 3, 1) = 0, 1, 2: epoch 2 (step 60) holds tensors only
        [30, 60],
        id="sink-tensor-freq-1",
    ),
    pytest.param(
        True,
        1,
        None,
        [30, 60],
        [30, 60],  # range(0, 3, 1)
        id="sink-freq-1",
    ),
]


@pytest.mark.parametrize(("sink", "collect_freq", "tensor_freq", "collected", "tensors"), CASES)
def test_two_epochs_of_thirty_steps(
    model: Any,
    read_steps: Any,
    tmp_path: Path,
    sink: bool,
    collect_freq: int,
    tensor_freq: int | None,
    collected: list[int],
    tensors: list[int],
) -> None:
    train(
        model,
        tmp_path,
        epochs=2,
        batches=30,
        sink=sink,
        collect_freq=collect_freq,
        collect_tensor_freq=tensor_freq,
    )
    steps = read_steps(tmp_path)
    assert steps[LOSS] == collected
    assert steps[IMAGES] == collected
    assert steps[PARAMETER_HISTOGRAM] == collected
    assert steps[OPERATOR_HISTOGRAM] == collected
    assert steps[OPERATOR_TENSOR] == tensors
    # the first five parameters, nothing else, each at every collected step
    histograms = sorted(tag for plugin, tag in steps if plugin == "histogram")
    assert histograms == sorted(
        [
            "activations",
            "fc.weight/auto",
            "fc.bias/auto",
            "head.weight/auto",
            "head.bias/auto",
            "norm.gamma/auto",
        ]
    )


def test_short_run_where_total_over_19_is_one(model: Any, read_steps: Any, tmp_path: Path) -> None:
    """total 30, collect_freq 1: range(0, 31) has 31 > 20 entries, 30 // 19 = 1, so
    the tensor range is range(0, 31)[:21] = 0..20."""
    train(model, tmp_path, epochs=1, batches=30, sink=False, collect_freq=1)
    steps = read_steps(tmp_path)
    assert steps[LOSS] == list(range(1, 31))
    assert steps[OPERATOR_TENSOR] == list(range(1, 21))


def test_summary_operators_in_the_step_hold_that_steps_value(
    model: Any, read_values: Any, tmp_path: Path
) -> None:
    """histogram_summary inside the step lands at the collected steps with that step's
    value; tensor_summary only at the tensor-collection steps (the plugin filter)."""
    train(model, tmp_path, epochs=2, batches=30, sink=False, collect_freq=3, collect_tensor_freq=4)
    histograms = read_values(tmp_path, *OPERATOR_HISTOGRAM)
    assert sorted(histograms) == [1, *multiples(3, 60)]
    for step, histogram in histograms.items():
        assert (histogram.min, histogram.max, histogram.count) == (step, step, 3)
    tensors = read_values(tmp_path, *OPERATOR_TENSOR)
    assert sorted(tensors) == [1, *multiples(4, 60)]
    for step, array in tensors.items():
        np.testing.assert_array_equal(array, np.full(2, float(step)))
    losses = read_values(tmp_path, *LOSS)
    assert losses[6] == pytest.approx(1 / 6)


@pytest.mark.parametrize("loss_alone", [False, True], ids=["defaults", "loss-alone"])
def test_a_tensor_operator_at_every_step_leaves_tensors_and_losses_where_they_belong(
    model: Any, read_values: Any, tmp_path: Path, loss_alone: bool
) -> None:
    """tensor_summary alone inside the step (as the digits example, whose fingerprints and
    histograms the cost budget sheds): the collected steps whose record would drop the
    tensor (the tensor steps off the frequency their other operators' values; with the
    loss alone collected, the steps on the frequency off the tensor steps) take the short
    path; the tensor is in the file at the tensor steps only with that step's value, the
    loss at every collected step with its own, and every step has its time."""
    only_loss = {"keep_default_action": False, "collect_specified_data": {"collect_metric": True}}
    train(
        model,
        tmp_path,
        epochs=2,
        batches=30,
        sink=False,
        collect_freq=3,
        collect_tensor_freq=4,
        histograms=False,
        fingerprints=False,
        **(only_loss if loss_alone else {}),
    )
    tensors = read_values(tmp_path, *OPERATOR_TENSOR)
    assert sorted(tensors) == [1, *multiples(4, 60)]
    for step, array in tensors.items():
        np.testing.assert_array_equal(array, np.full(2, float(step)))
    losses = read_values(tmp_path, *LOSS)
    assert sorted(losses) == sorted({1, *multiples(3, 60)})
    for step, loss in losses.items():
        assert loss == pytest.approx(1 / step)
    assert sorted(read_values(tmp_path, "scalar", STEP_TIME_TAG)) == list(range(1, 61))


def train_two_epochs(loop: str, parts: Any, collector: SummaryCollector, step: Any) -> None:
    """Two epochs of ``parts.dataset`` under ``loop`` (``TrainLoop``, or a ``TrainSession``
    told its epoch's length), ``step`` called on each batch."""
    if loop == "TrainLoop":
        TrainLoop(step, network=parts.network, optimizer=parts.optimizer).train(
            2, parts.dataset, callbacks=[collector]
        )
        return
    with TrainSession(
        [collector],
        network=parts.network,
        optimizer=parts.optimizer,
        epochs=2,
        steps_per_epoch=len(parts.dataset),
    ) as session:
        for _ in session.epochs():
            for batch in parts.dataset:
                session.step(batch, step(batch))


class _CountedArray:
    """An array-like that counts how often a summary operator reads (copies) it."""

    def __init__(self) -> None:
        self.step = 0
        self.read_at: list[int] = []

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.read_at.append(self.step)
        return np.full(3, float(self.step), dtype=dtype)


@pytest.mark.parametrize("loop", ["TrainLoop", "TrainSession"])
def test_summary_operators_copy_their_values_at_the_recorded_steps_only(
    model: Any, read_values: Any, tmp_path: Path, loop: str
) -> None:
    """A network that calls an operator at every step: its value is read at the steps the
    collector records (every 5th and the first, across an epoch's end), not at the 48
    others, and each recorded step holds that step's value, as before."""
    counted = _CountedArray()
    parts = model(30)
    collector = SummaryCollector(
        tmp_path, collect_freq=5, collect_specified_data=NO_LANDSCAPE, cost_budget="off"
    )

    def step(batch: Any) -> np.floating[Any]:
        counted.step += 1
        histogram_summary("activations", counted)
        return np.float32(1.0 / counted.step)

    train_two_epochs(loop, parts, collector, step)
    recorded = [1, *multiples(5, 60)]
    assert counted.read_at == recorded
    histograms = read_values(tmp_path, *OPERATOR_HISTOGRAM)
    assert sorted(histograms) == recorded
    assert all(h.min == h.max == step for step, h in histograms.items())


@pytest.mark.parametrize("loop", ["TrainLoop", "TrainSession"])
def test_summary_operators_read_a_value_only_at_the_steps_that_keep_its_kind(
    model: Any, read_values: Any, tmp_path: Path, loop: str
) -> None:
    """An operator called at every step is read only at the steps whose record keeps its
    kind: a tensor at this rank's tensor steps, not at the collected steps on the
    frequency that drop tensors (a tensor on an accelerator would be copied to the host
    there for nothing); a histogram at the steps on the frequency, not at the tensor steps
    off it. Each step written holds that step's value, as before."""
    tensor, histogram = _CountedArray(), _CountedArray()
    parts = model(30)
    collector = SummaryCollector(
        tmp_path,
        collect_freq=5,
        collect_tensor_freq=4,
        collect_specified_data=NO_LANDSCAPE,
        cost_budget="off",
    )

    def step(batch: Any) -> np.floating[Any]:
        tensor.step += 1
        histogram.step = tensor.step
        tensor_summary("weights", tensor)
        histogram_summary("activations", histogram)
        return np.float32(1.0 / tensor.step)

    train_two_epochs(loop, parts, collector, step)  # (the tensor steps spread over 60)
    tensor_steps, histogram_steps = [1, *multiples(4, 60)], [1, *multiples(5, 60)]
    assert tensor.read_at == tensor_steps
    assert histogram.read_at == histogram_steps
    tensors = read_values(tmp_path, *OPERATOR_TENSOR)
    assert sorted(tensors) == tensor_steps
    for written, array in tensors.items():
        np.testing.assert_array_equal(array, np.full(3, float(written)))
    histograms = read_values(tmp_path, *OPERATOR_HISTOGRAM)
    assert sorted(histograms) == histogram_steps
    assert all(h.min == h.max == written for written, h in histograms.items())
    assert sorted(read_values(tmp_path, *LOSS)) == histogram_steps


def test_steps_that_only_save_landscape_parameters_read_no_operator_value(
    model: Any, read_values: Any, tmp_path: Path
) -> None:
    """At the collector's defaults the loss landscape saves parameters at steps 1-19: those
    steps are not on the short path, but record nothing, so an operator called there
    returns at once (its value is read at the collected steps alone); the histograms
    are written at those steps with their own values."""
    counted = _CountedArray()
    parts = model(30)
    collector = SummaryCollector(tmp_path, collect_freq=5, cost_budget="off")

    def step(batch: Any) -> np.floating[Any]:
        counted.step += 1
        histogram_summary("activations", counted)
        return np.float32(1.0 / counted.step)

    TrainLoop(step, network=parts.network, optimizer=parts.optimizer).train(
        1, parts.dataset, callbacks=[collector]
    )
    recorded = [1, *multiples(5, 30)]
    assert counted.read_at == recorded
    assert len(list((tmp_path / "ckpt_dir").iterdir())) >= 19  # the landscape was saved
    histograms = read_values(tmp_path, *OPERATOR_HISTOGRAM)
    assert sorted(histograms) == recorded
    assert all(h.min == h.max == written for written, h in histograms.items())


@pytest.mark.parametrize(
    ("collect_tensor_freq", "tensor_steps"),
    [(4, [1, *multiples(4, 60)]), (None, [1, 10, 20, 40])],
    ids=["collect_tensor_freq=4", "default"],
)
def test_a_session_that_cannot_tell_its_length_still_records_its_tensors(
    model: Any,
    read_values: Any,
    tmp_path: Path,
    collect_tensor_freq: int | None,
    tensor_steps: list[int],
) -> None:
    """A TrainSession over batches that have no length, given no steps_per_epoch: the
    tensor steps cannot be spread over the run's length, so they are open-ended (every
    collect_tensor_freq-th step, or by default the spacing doubling from collect_freq),
    each with that step's value; the loss keeps its frequency."""
    parts = model(30)
    collector = SummaryCollector(
        tmp_path,
        collect_freq=10,
        collect_tensor_freq=collect_tensor_freq,
        collect_specified_data=NO_LANDSCAPE,
        cost_budget="off",
    )
    counter = {"step": 0}
    with TrainSession(
        [collector], network=parts.network, optimizer=parts.optimizer, epochs=2
    ) as session:
        for _ in session.epochs():
            for batch in iter(parts.dataset):  # an iterator: no length to read
                counter["step"] += 1
                tensor_summary("weights", np.full(2, float(counter["step"])))
                session.step(batch, np.float32(1.0 / counter["step"]))
    tensors = read_values(tmp_path, *OPERATOR_TENSOR)
    assert sorted(tensors) == tensor_steps
    for written, array in tensors.items():
        np.testing.assert_array_equal(array, np.full(2, float(written)))
    assert sorted(read_values(tmp_path, *LOSS)) == [1, *multiples(10, 60)]


def test_summary_operators_in_sink_mode_keep_the_epochs_last_batch(
    model: Any, read_values: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train(model, tmp_path, epochs=2, batches=30, sink=True, collect_freq=1)
    histograms = read_values(tmp_path, *OPERATOR_HISTOGRAM)
    assert {step: h.max for step, h in histograms.items()} == {30: 30.0, 60: 60.0}
    assert "more than once in one step" not in caplog.text


def test_no_duplicate_warning_between_collected_steps(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Operators called at every step, recorded every third: no duplicate-name warning."""
    train(model, tmp_path, epochs=1, batches=10, sink=False, collect_freq=3)
    assert "more than once in one step" not in caplog.text


def test_epoch_end_does_not_record_the_last_step_twice(model: Any, tmp_path: Path) -> None:
    from rankscribe.writer.events import load_dir

    train(model, tmp_path, epochs=2, batches=30, sink=False, collect_freq=3)
    steps = [event.step for event in load_dir(tmp_path) if event.what == "summary"]
    assert steps.count(30) == 1 and steps.count(60) == 1


@pytest.mark.parametrize(
    ("epoch_seconds", "flushed_after"),
    [(0.3, [1, 5]), (2.0, [1, 2, 3, 4, 5, 6])],
    ids=["epochs-of-0.3s", "epochs-of-2s"],
)
def test_an_epoch_end_flushes_at_most_once_a_second(
    model: Any,
    read_steps: Any,
    tmp_path: Path,
    collector_clock: Any,
    monkeypatch: pytest.MonkeyPatch,
    epoch_seconds: float,
    flushed_after: list[int],
) -> None:
    """Epochs of milliseconds do not each wake the writer to encode and fsync: the first
    epoch's end flushes, then the first one a second or more after it (epoch 5 of 0.3 s
    epochs); epochs of seconds flush at each end, as the original. The end of training
    flushes and waits as always, and every step's time is in the file."""
    from rankscribe.writer import SummaryRecord

    flushes: list[int] = []
    epoch = {"number": 0}
    original = SummaryRecord.flush

    def flush(self: SummaryRecord, *args: Any, **kwargs: Any) -> bool:
        if kwargs.get("timeout") == 0:  # the collector's epoch end: no wait
            flushes.append(epoch["number"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SummaryRecord, "flush", flush)
    parts = model(3)

    def step(batch: Any) -> np.floating[Any]:
        collector_clock.advance(epoch_seconds / 3)
        return np.float32(0.5)

    class EpochNumber(Callback):
        def epoch_begin(self, run_context: Any) -> None:
            epoch["number"] = run_context.original_args().cur_epoch_num

    collector = SummaryCollector(tmp_path, collect_freq=4, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(step, network=parts.network, optimizer=parts.optimizer).train(
        6, parts.dataset, callbacks=[EpochNumber(), collector]
    )
    assert flushes == flushed_after
    steps = read_steps(tmp_path)
    assert steps[LOSS] == [1, 4, 8, 12, 16]
    assert steps[("scalar", "rankscribe/step_time")] == list(range(1, 19))
