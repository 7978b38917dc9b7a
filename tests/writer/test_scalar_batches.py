"""Steps of scalars alone travel in batches; every step still lands once, in order."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir, read_events

# private: the scalar batching rule, no public door
from rankscribe.writer.record._scalar_batches import MAX_SCALAR_BATCH, ScalarBatches


def recorded(directory):
    return [
        (event.step, {value.tag: value.value for value in event.values})
        for event in load_dir(directory)
        if event.values
    ]


class BatchesTaken:
    """The last step of the scalar batches the writer thread has taken, to wait on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._changed = threading.Condition()
        self._last_step = -1
        encode = ScalarBatches._encode

        def encode_and_tell(batches, batch):
            encoded = encode(batches, batch)  # seals the batch first
            with self._changed:
                last = batch[-1]
                self._last_step = last[1] if type(last) is tuple else last.step
                self._changed.notify_all()
            return encoded

        monkeypatch.setattr(ScalarBatches, "_encode", encode_and_tell)

    def wait_for(self, step: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self._last_step >= step, timeout=30), (
                f"the writer never took the batch holding step {step}"
            )


def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The steps of each batch the writer thread encodes, in order (filled as it goes)."""
    sizes: list[int] = []
    encode = ScalarBatches._encode

    def encode_and_count(batches, batch):
        encoded = encode(batches, batch)
        # Runs of steps of scalars, and the small steps joined between them.
        sizes.append(sum(len(part) if type(part) is list else 1 for part in encoded.parts))
        return encoded

    monkeypatch.setattr(ScalarBatches, "_encode", encode_and_count)
    return sizes


@pytest.mark.parametrize("seed", range(5))
def test_mixed_steps_keep_their_order_whatever_the_writer_is_doing(tmp_path, seed, monkeypatch):
    taken = BatchesTaken(monkeypatch)
    rng = random.Random(seed)
    expected = []
    last_scalar_step = None  # the last step that went into a batch of scalar-only steps
    with SummaryRecord(tmp_path) as record:
        for step in range(3000):
            record.add_value("scalar", "loss", float(step))
            values = {"loss": float(step)}
            kind = rng.random()
            if kind < 0.02:  # a small step joins the open batch, a heavy one seals it
                record.add_value("histogram", "w", np.arange(5000.0 if kind < 0.01 else 5.0))
            if kind < 0.002:
                record.flush()
            if kind > 0.999 and last_scalar_step is not None:
                # The writer takes (and seals) the open batch mid-stream: the next
                # scalar step starts a new one.
                taken.wait_for(last_scalar_step)
            record.record(step)
            last_scalar_step = step if kind >= 0.01 else last_scalar_step
            expected.append((step, values))
    got = [
        (step, {tag: value for tag, value in values.items() if tag == "loss"})
        for step, values in recorded(tmp_path)
    ]
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
    steps = [
        event.step
        for event in read_events(summary, strict=True)
        if event.WhichOneof("what") == "summary"
    ]
    assert steps == list(range(10))
    record.close()


def test_steps_join_the_batch_the_writer_waits_on_until_a_flush_ends_the_wait(
    tmp_path, monkeypatch
):
    # The writer, woken by a batch, lets later steps join it (one wake-up for many
    # steps); a flush seals the batch, so it never waits out the coalescing time.
    monkeypatch.setattr(ScalarBatches, "coalesce_seconds", 5.0)
    sizes = batch_sizes(monkeypatch)
    with SummaryRecord(tmp_path) as record:
        for step in range(3):
            record.add_value("scalar", "x", float(step))
            record.record(step)
            time.sleep(0.05)  # the writer has taken the first batch, and waits on it
        started = time.monotonic()
        assert record.flush() is True
        assert time.monotonic() - started < 2.5  # ended by the flush, not by the 5 s
    assert sizes == [3]
    assert [step for step, _ in recorded(tmp_path)] == [0, 1, 2]


def test_columns_and_filtered_steps_join_one_batch_in_the_order_given(tmp_path, monkeypatch):
    # A collected step writes the timings kept since the last (as columns), then its own
    # values with a plugin filter: both join the open batch, so the writer thread is
    # woken once for many such steps, and the file keeps the steps in order.
    monkeypatch.setattr(ScalarBatches, "coalesce_seconds", 5.0)
    sizes = batch_sizes(monkeypatch)
    expected = []
    with SummaryRecord(tmp_path) as record:
        for collected in range(10, 60, 10):
            kept = list(range(collected - 9, collected))
            record.write_scalar_columns({"step_time": (kept, [step / 8 for step in kept])})
            expected += [(step, {"step_time": step / 8}) for step in kept]  # exact in float32
            record.add_value("scalar", "loss", float(collected))
            record.record(collected, plugin_filter=lambda plugin: plugin != "tensor")
            expected.append((collected, {"loss": float(collected)}))
        record.add_value("scalar", "loss", 99.0)
        record.record(60, plugin_filter=lambda plugin: plugin != "scalar")  # filtered out
        assert record.flush() is True
    assert sizes == [50]
    assert recorded(tmp_path) == expected


def test_columns_larger_than_a_batch_are_written_after_the_steps_before_them(tmp_path):
    many = list(range(1, 3000))
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 0.0)
        record.record(0)
        record.write_scalar_columns({"x": (many, [float(step) for step in many])})
        record.write_scalar_columns({"x": ([3000], [3000.0])})
        record.add_value("scalar", "loss", 3001.0)
        record.record(3001)
    steps = [step for step, _ in recorded(tmp_path)]
    assert steps == list(range(3002))


def test_a_step_whose_filter_leaves_only_scalars_joins_the_batch(tmp_path, monkeypatch):
    # The summary operators' tensors are taken at every recorded step and dropped by the
    # filter at most of them (the collector's tensor steps): what is left is scalars.
    monkeypatch.setattr(ScalarBatches, "coalesce_seconds", 5.0)
    sizes = batch_sizes(monkeypatch)
    with SummaryRecord(tmp_path) as record:
        for step in range(1, 6):
            record.add_value("scalar", "loss", float(step))
            record.add_value("tensor", "w", np.arange(4.0))
            record.record(step, plugin_filter=lambda plugin: plugin != "tensor")
        record.add_value("scalar", "loss", 6.0)
        record.add_value("tensor", "w", np.arange(4.0))
        record.record(6)  # kept whole: a small step, it joins the batch too
        assert record.flush() is True
    assert sizes == [6]
    found = {(event.step, value.tag) for event in load_dir(tmp_path) for value in event.values}
    assert found == {*((step, "loss") for step in range(1, 7)), (6, "w")}
    assert [step for step, _ in recorded(tmp_path)] == [1, 2, 3, 4, 5, 6]


def tensors(directory):
    """(step, tag, the tensor's values) of every tensor recorded, in file order."""
    return [
        (event.step, value.tag, np.asarray(value.value).tolist())
        for event in load_dir(directory)
        for value in event.values
        if value.plugin == "tensor"
    ]


def test_a_small_step_joins_the_open_batch_and_a_heavy_one_is_written_after_it(
    tmp_path, monkeypatch
):
    # A summary operator's tensor every so many quiet steps (the collector's tensor
    # steps): a small one is encoded in the batch's turn, the writer not woken for it;
    # one over 16 KB goes to the encoder threads, after the batch. The file keeps the
    # steps in order either way.
    monkeypatch.setattr(ScalarBatches, "coalesce_seconds", 5.0)
    sizes = batch_sizes(monkeypatch)
    small, heavy = np.arange(12.0).reshape(3, 4), np.arange(4096.0)  # 96 B and 32 KB
    with SummaryRecord(tmp_path) as record:
        record.write_scalar_columns({"step_time": ([1, 2, 3], [0.5, 0.25, 0.125])})
        record.add_value("tensor", "w", small)
        record.record(4)
        record.write_scalar_columns({"step_time": ([4, 5], [0.5, 0.25])})
        record.add_value("tensor", "w", heavy)
        record.record(6)
        record.write_scalar_columns({"step_time": ([6, 7], [0.5, 0.25])})
        assert record.flush() is True
    # Steps 1-3, the small step 4, steps 4-5 in one batch; the heavy step 6 alone;
    # steps 6-7 in a new batch.
    assert sizes == [6, 2]
    assert [step for step, _ in recorded(tmp_path)] == [1, 2, 3, 4, 4, 5, 6, 6, 7]
    assert tensors(tmp_path) == [(4, "w", small.tolist()), (6, "w", heavy.tolist())]


def test_a_small_step_the_open_batch_has_no_room_for_is_written_after_it(tmp_path, monkeypatch):
    # A step counts its bytes in points of 64 against the batch's MAX_SCALAR_BATCH: a
    # tensor of n float64 is a snapshot of 8 n + 128 bytes (32 values: 6 points, 40: 7).
    monkeypatch.setattr(ScalarBatches, "coalesce_seconds", 5.0)
    sizes = batch_sizes(monkeypatch)
    filled = list(range(1, MAX_SCALAR_BATCH - 12))  # 13 points of room left
    with SummaryRecord(tmp_path) as record:
        record.write_scalar_columns({"x": (filled, [float(step) for step in filled])})
        for step, count in ((2000, 32), (2001, 40), (2002, 32)):  # 6 + 7 fill it: 6 more do not
            record.add_value("tensor", "w", np.arange(float(count)))
            record.record(step)
        record.write_scalar_columns({"x": ([2003], [2003.0])})
        assert record.flush() is True
    assert sizes == [len(filled) + 2, 1]
    assert [(step, len(values)) for step, _, values in tensors(tmp_path)] == [
        (2000, 32),
        (2001, 40),
        (2002, 32),
    ]
    assert [step for step, _ in recorded(tmp_path)] == [*filled, 2000, 2001, 2002, 2003]
