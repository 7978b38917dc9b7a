"""Deferred values: ``add_value`` takes a value before it exists; the writer resolves it.

A scalar or histogram handed as a ``DeferredValue`` (what the collector does for values
read from an accelerator) is written with the step it was added to, whatever was
recorded after it, and ``resolve`` runs on the writer's threads, never on the caller's.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import pytest

from rankscribe.writer.deferred import DeferredValue
from rankscribe.writer.histograms import compute_histogram

DEADLINE = 30.0


class Gated(DeferredValue):
    """A value that exists once the test opens the gate; remembers the threads asking."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.gate = threading.Event()
        self.asked_from: list[int] = []

    def resolve(self) -> Any:
        self.asked_from.append(threading.get_ident())
        assert self.gate.wait(DEADLINE), "the test never opened the gate"
        return self.value


class Broken(DeferredValue):
    def resolve(self) -> Any:
        raise RuntimeError("the device went away")


def test_a_deferred_scalar_and_histogram_land_at_their_step(make_record, log_dir, disk):
    record = make_record()
    loss = Gated(0.25)
    weights = np.linspace(-1.0, 1.0, 50, dtype=np.float32)
    histogram = Gated(weights)
    record.add_value("scalar", "loss", loss)
    record.add_value("scalar", "lr", 0.5)
    record.add_value("histogram", "w", histogram)
    assert record.record(3) is True
    record.add_value("scalar", "lr", 0.25)
    assert record.record(4) is True  # queued behind step 3, which waits for its values
    assert loss.gate.is_set() is False
    loss.gate.set()
    histogram.gate.set()
    record.close()
    caller = threading.get_ident()
    assert loss.asked_from and caller not in loss.asked_from
    assert histogram.asked_from and caller not in histogram.asked_from
    [path] = disk.summary_files(log_dir)
    steps = [event for event in disk.read_events(path) if event.WhichOneof("what") == "summary"]
    assert [event.step for event in steps] == [3, 4]
    assert disk.scalars_of(steps[0]) == {"loss": 0.25, "lr": 0.5}
    assert disk.scalars_of(steps[1]) == {"lr": 0.25}
    [written] = [value for value in steps[0].summary.value if value.tag == "w"]
    expected = compute_histogram(weights).to_proto()
    # The buckets the writer counts for the same array added at once.
    assert written.histogram == expected


def test_a_value_that_cannot_be_resolved_is_left_out_alone(
    make_record, log_dir, disk, caplog: pytest.LogCaptureFixture
):
    record = make_record()
    record.add_value("scalar", "loss", Broken())
    record.add_value("scalar", "lr", 0.5)
    with caplog.at_level(logging.ERROR):
        assert record.record(1) is True
        record.close()
    [path] = disk.summary_files(log_dir)
    [step] = [event for event in disk.read_events(path) if event.WhichOneof("what") == "summary"]
    assert disk.scalars_of(step) == {"lr": 0.5}
    assert "could not encode scalar 'loss' at step 1: the device went away" in caplog.text
