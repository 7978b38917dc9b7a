"""Steps of scalars alone travel in batches; every step still lands once, in order."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, load_dir, read_events


def recorded(directory):
    return [(event.step, {value.tag: value.value for value in event.values})
            for event in load_dir(directory) if event.values]


@pytest.mark.parametrize("seed", range(5))
def test_mixed_steps_keep_their_order_whatever_the_writer_is_doing(tmp_path, seed):
    rng = random.Random(seed)
    expected = []
    with SummaryRecord(tmp_path) as record:
        for step in range(3000):
            record.add_value("scalar", "loss", float(step))
            values = {"loss": float(step)}
            kind = rng.random()
            if kind < 0.02:  # a general step seals the open batch
                record.add_value("histogram", "w", np.arange(5.0))
            if kind < 0.002:
                record.flush()
            if kind > 0.999:
                time.sleep(0.01)  # let the writer take (and seal) the batch mid-stream
            record.record(step)
            expected.append((step, values))
    got = [(step, {tag: value for tag, value in values.items() if tag == "loss"})
           for step, values in recorded(tmp_path)]
    assert got == expected


def test_more_steps_than_one_batch_holds(tmp_path):
    with SummaryRecord(tmp_path) as record:
        for step in range(5000):  # the writer never takes a batch before it is full
            record.add_value("scalar", "x", step)
            record.record(step)
    assert [step for step, _ in recorded(tmp_path)] == list(range(5000))


def test_flush_covers_steps_still_in_an_open_batch(tmp_path):
    record = SummaryRecord(tmp_path)
    for step in range(10):
        record.add_value("scalar", "x", step)
        record.record(step)
    assert record.flush() is True
    [summary] = tmp_path.glob("*_MS")
    steps = [event.step for event in read_events(summary, strict=True)
             if event.WhichOneof("what") == "summary"]
    assert steps == list(range(10))
    record.close()
