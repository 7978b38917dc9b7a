"""Summary operators: values recorded from inside model code join the next train step."""

from __future__ import annotations

import contextlib
import logging
import threading

import numpy as np
import pytest

from rankscribe.writer import (
    SummaryRecord,
    deferred,
    events,
    histogram_summary,
    image_summary,
    operators,
    scalar_summary,
    tensor_summary,
)


def _values_by_step(directory):
    return {
        event.step: {(value.plugin, value.tag): value for value in event.values}
        for event in events.load_dir(directory)
        if event.values
    }


def test_operator_values_join_the_next_recorded_step(tmp_path):
    with SummaryRecord(tmp_path) as record:
        scalar_summary("grad_norm", 3.5)
        histogram_summary("fc/grad", np.arange(10.0))
        tensor_summary("fc/bias", np.array([1, 2, 3], dtype=np.int64))
        image_summary("input", np.zeros((1, 3, 2, 2), dtype=np.float32))
        record.add_value("scalar", "loss", 0.25)
        record.record(1)
        record.add_value("scalar", "loss", 0.125)
        record.record(2)
    steps = _values_by_step(tmp_path)
    assert set(steps[1]) == {
        ("scalar", "grad_norm"),
        ("histogram", "fc/grad"),
        ("tensor", "fc/bias"),
        ("image", "input"),
        ("scalar", "loss"),
    }
    assert steps[1][("scalar", "grad_norm")].value == 3.5
    np.testing.assert_array_equal(steps[1][("tensor", "fc/bias")].value, [1, 2, 3])
    assert set(steps[2]) == {("scalar", "loss")}


def test_without_an_open_record_a_call_keeps_nothing(tmp_path):
    scalar_summary("ignored", 1.0)
    assert not operators.has_buffered()
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
    assert set(_values_by_step(tmp_path)[1]) == {("scalar", "loss")}


def test_duplicate_name_in_one_step_keeps_the_last_value_with_one_warning(tmp_path, caplog):
    with SummaryRecord(tmp_path) as record:
        with caplog.at_level(logging.WARNING, logger="rankscribe.writer.operators"):
            for value in (1.0, 2.0, 3.0):
                scalar_summary("lr", value)
        record.record(1)
    warnings = [r for r in caplog.records if "lr[:Scalar]" in r.getMessage()]
    assert len(warnings) == 1
    assert _values_by_step(tmp_path)[1][("scalar", "lr")].value == 3.0


def test_eval_mode_leaves_operator_values_for_the_next_train_step(tmp_path):
    with SummaryRecord(tmp_path) as record:
        record.set_mode("eval")
        scalar_summary("grad_norm", 1.5)
        record.add_value("scalar", "eval_loss", 0.5)
        record.record(1)
        record.set_mode("train")
        record.record(2)
    steps = _values_by_step(tmp_path)
    assert set(steps[1]) == {("scalar", "eval_loss")}
    assert set(steps[2]) == {("scalar", "grad_norm")}


def test_plugin_filter_applies_to_operator_values(tmp_path):
    with SummaryRecord(tmp_path) as record:
        tensor_summary("w", np.ones(3))
        scalar_summary("s", 1.0)
        record.record(1, plugin_filter=lambda plugin: plugin != "tensor")
    assert set(_values_by_step(tmp_path)[1]) == {("scalar", "s")}


def test_bad_operator_input_is_refused_where_it_is_called(tmp_path):
    with SummaryRecord(tmp_path):
        with pytest.raises(ValueError, match="4-D NCHW"):
            image_summary("bad", np.zeros((3, 2, 2)))
        with pytest.raises(ValueError, match="non-empty str"):
            scalar_summary("", 1.0)


def test_a_step_said_unrecorded_keeps_nothing_until_the_next_discard(tmp_path):
    """discard_pending(skip_next_step=True): the operators return at once, keeping
    nothing, until the next discard (or a record taking values) opens them again."""
    with SummaryRecord(tmp_path) as record:
        operators.discard_pending(skip_next_step=True)
        scalar_summary("skipped", 1.0)
        assert not operators.has_buffered()
        operators.discard_pending()
        scalar_summary("kept", 2.0)
        record.record(1)
    assert set(_values_by_step(tmp_path)[1]) == {("scalar", "kept")}


def test_a_second_open_record_keeps_the_operators_values_at_every_step(tmp_path):
    """With the user's own record open beside the caller's, the caller cannot know
    that a step is unrecorded: nothing is skipped, and the user's record gets them."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    with SummaryRecord(mine), SummaryRecord(theirs) as record:
        operators.discard_pending(skip_next_step=True)
        scalar_summary("grad_norm", 3.0)
        record.record(1)
    assert _values_by_step(theirs)[1][("scalar", "grad_norm")].value == 3.0


def test_a_record_opened_after_the_skip_is_said_gets_the_operators_values(tmp_path):
    with SummaryRecord(tmp_path / "first"):
        operators.discard_pending(skip_next_step=True)
        with SummaryRecord(tmp_path / "second") as record:
            scalar_summary("grad_norm", 4.0)
            record.record(1)
    assert _values_by_step(tmp_path / "second")[1][("scalar", "grad_norm")].value == 4.0


def test_discard_dropped_forgets_the_values_only_when_the_filter_drops_every_one(tmp_path):
    """The collector's light steps: values the step's plugin filter would drop are
    forgotten (True); one it keeps keeps them all (False), and the record writes them."""

    def all_but_tensor(plugin: str) -> bool:
        return plugin != "tensor"

    with SummaryRecord(tmp_path) as record:
        assert operators.discard_dropped(all_but_tensor)  # nothing buffered
        tensor_summary("weights", np.ones(2))
        assert operators.discard_dropped(all_but_tensor)
        assert not operators.has_buffered()
        record.record(1)  # nothing of step 1 left to write
        tensor_summary("weights", np.full(2, 2.0))
        scalar_summary("grad_norm", 5.0)
        assert not operators.discard_dropped(all_but_tensor)
        assert operators.has_buffered()
        record.record(2)
    by_step = _values_by_step(tmp_path)
    assert 1 not in by_step
    assert set(by_step[2]) == {("tensor", "weights"), ("scalar", "grad_norm")}
    assert by_step[2][("scalar", "grad_norm")].value == 5.0


class _Read:
    """An array-like that counts how often an operator reads (copies) it."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.reads = 0

    def __array__(self, dtype=None, copy=None):
        self.reads += 1
        return np.full(2, self.value, dtype=dtype)


def _all_but_tensor(plugin: str) -> bool:
    return plugin != "tensor"


def test_a_kind_the_next_step_drops_is_not_read_until_a_record_takes_the_values(tmp_path):
    """discard_pending(keep_next=...): the operators of the plugins the next step's filter
    drops return at once, without reading their value; the others keep theirs as before;
    the record of the step opens every kind again."""
    tensor = _Read(1.0)
    with SummaryRecord(tmp_path) as record:
        operators.discard_pending(keep_next=_all_but_tensor)
        tensor_summary("weights", tensor)
        scalar_summary("grad_norm", 1.0)
        assert tensor.reads == 0
        record.record(1)
        tensor.value = 2.0
        tensor_summary("weights", tensor)
        assert tensor.reads == 1
        record.record(2)
    by_step = _values_by_step(tmp_path)
    assert set(by_step[1]) == {("scalar", "grad_norm")}
    assert set(by_step[2]) == {("tensor", "weights")}
    np.testing.assert_array_equal(by_step[2][("tensor", "weights")].value, [2.0, 2.0])


def test_keep_next_none_and_a_second_record_read_every_kind(tmp_path):
    """keep_next(None) opens every kind again without forgetting what is buffered; with
    the user's own record open too, the caller cannot know what a step keeps: nothing is
    dropped (as with skip_next_step)."""
    tensor = _Read(3.0)
    with SummaryRecord(tmp_path / "mine") as record:
        scalar_summary("grad_norm", 4.0)
        operators.keep_next(_all_but_tensor)
        tensor_summary("weights", tensor)
        assert tensor.reads == 0
        operators.keep_next(None)
        tensor_summary("weights", tensor)
        assert tensor.reads == 1
        record.record(1)
        with SummaryRecord(tmp_path / "theirs") as theirs:
            operators.discard_pending(keep_next=_all_but_tensor)
            tensor_summary("weights", tensor)
            assert tensor.reads == 2
            operators.keep_next(_all_but_tensor)
            tensor_summary("weights", tensor)
            assert tensor.reads == 3
            theirs.record(2)
    by_step = _values_by_step(tmp_path / "mine")
    assert set(by_step[1]) == {("scalar", "grad_norm"), ("tensor", "weights")}
    assert ("tensor", "weights") in _values_by_step(tmp_path / "theirs")[2]


class _OnDevice:
    """A value of a fake accelerator: the device reader below starts its copy."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class _Copy(deferred.DeferredArray):
    def __init__(self, value: _OnDevice, resolved: list[str]) -> None:
        self._value, self._resolved = value, resolved
        self.shape, self.dtype = value.array.shape, value.array.dtype

    def resolve(self):
        self._resolved.append(threading.current_thread().name)
        return self._value.array


@contextlib.contextmanager
def _device_reader():
    """A device reader of ``_OnDevice`` values installed; yields the names of the threads
    that resolved each copy."""
    resolved: list[str] = []

    def reader(value):
        return _Copy(value, resolved) if isinstance(value, _OnDevice) else None

    previous = deferred.set_device_reader(reader)
    try:
        yield resolved
    finally:
        deferred.set_device_reader(previous)


def test_a_value_on_a_device_is_checked_at_the_call_and_read_off_the_callers_thread(
    tmp_path,
):
    """With a device reader installed (the collector's torch adapter installs one), an
    operator's value that the reader claims is kept as its deferred copy: a value the
    plugin cannot hold is refused at the call from its shape and dtype, and the rest are
    resolved by the writer's threads and written as a host array would be."""
    with _device_reader() as resolved, SummaryRecord(tmp_path) as record:
        with pytest.raises(ValueError, match="4-D NCHW"):
            image_summary("bad", _OnDevice(np.zeros((3, 2, 2))))
        with pytest.raises(ValueError, match="exactly one element"):
            scalar_summary("bad", _OnDevice(np.zeros(2)))
        with pytest.raises(TypeError, match="dtype"):
            tensor_summary("bad", _OnDevice(np.zeros(2, dtype=np.complex64)))
        tensor_summary("weights", _OnDevice(np.arange(4, dtype=np.int32)))
        histogram_summary("activations", _OnDevice(np.arange(10.0)))
        scalar_summary("peak", _OnDevice(np.array([2.5])))
        scalar_summary("host", 1.5)  # a number: not the reader's
        assert operators.has_deferred()
        record.record(1)
    assert len(resolved) == 3  # each read once, by the writer's threads
    assert threading.current_thread().name not in resolved
    values = _values_by_step(tmp_path)[1]
    np.testing.assert_array_equal(values[("tensor", "weights")].value, [0, 1, 2, 3])
    assert values[("histogram", "activations")].value.count == 10
    assert values[("scalar", "peak")].value == 2.5
    assert values[("scalar", "host")].value == 1.5


def test_add_value_reads_a_value_on_a_device_through_the_reader_too(tmp_path):
    """SummaryRecord.add_value (MindSpore's callbacks add their values this way) takes the
    same path as the operators: a scalar or tensor the reader claims is resolved by the
    writer's threads; a bad one is refused at the call."""
    with _device_reader() as resolved, SummaryRecord(tmp_path) as record:
        with pytest.raises(ValueError, match="exactly one element"):
            record.add_value("scalar", "loss", _OnDevice(np.zeros(3)))
        record.add_value("scalar", "loss", _OnDevice(np.array([0.25], dtype=np.float32)))
        record.add_value("tensor", "weights", _OnDevice(np.eye(2)))
        record.add_value("scalar", "lr", 0.1)
        record.record(1)
    assert len(resolved) == 2
    assert threading.current_thread().name not in resolved
    values = _values_by_step(tmp_path)[1]
    assert values[("scalar", "loss")].value == 0.25
    np.testing.assert_array_equal(values[("tensor", "weights")].value, np.eye(2))
    assert values[("scalar", "lr")].value == pytest.approx(0.1)


class _NoNumpyDtype:
    """A tensor-style value whose dtype NumPy lacks (torch's bfloat16): __array__ refuses,
    ``float()`` gives float32."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Got unsupported ScalarType BFloat16")

    def float(self):
        return np.array(self.values, dtype=np.float32)


def test_a_tensor_of_a_dtype_numpy_lacks_is_recorded_as_float32(tmp_path):
    with SummaryRecord(tmp_path) as record:
        tensor_summary("weights", _NoNumpyDtype([0.5, 1.5]))
        record.record(1)
    recorded = _values_by_step(tmp_path)[1][("tensor", "weights")].value
    assert recorded.dtype == np.float32
    np.testing.assert_array_equal(recorded, [0.5, 1.5])
