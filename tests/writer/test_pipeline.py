"""Pipeline: ordered, bounded, failure-aware hand-off to the writer thread.

No test may hang: every call that could block runs through ``run_with_timeout``
(a thread joined with a timeout), so a deadlock fails the test instead.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time

import pytest

from rankscribe.writer.errors import WriterFailedError

# private: the writer pipeline's queue/thread rule, no public door
from rankscribe.writer.record import _pipeline as pipeline_module


@pytest.fixture
def pipelines():
    made: list[pipeline_module.Pipeline] = []

    def make(
        consume, idle=None, *, workers=2, max_pending_bytes=1 << 20
    ) -> pipeline_module.Pipeline:
        pipeline = pipeline_module.Pipeline(
            consume,
            idle or (lambda sync: None),
            workers=workers,
            max_pending_bytes=max_pending_bytes,
            name="test-pipeline",
        )
        made.append(pipeline)
        return pipeline

    yield make
    for pipeline in made:
        with contextlib.suppress(Exception):
            pipeline.close()


def signalling(call, event):
    """``call``, which sets ``event`` as it starts: the writer may go on from there."""

    def run():
        event.set()
        return call()

    return run


def work(value, delay=0.0):
    def run():
        if delay:
            time.sleep(delay)
        return value

    return run


# -------------------------------------------------------------------- order


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_results_are_consumed_in_submission_order(pipelines, disk, workers):
    consumed = []
    pipeline = pipelines(consumed.append, workers=workers)
    rng = random.Random(7)
    for index in range(150):
        heavy = rng.random() < 0.6
        # Early heavy items take longest, so the pool finishes them out of order.
        delay = rng.random() * 0.004 if heavy else 0.0
        pipeline.put(work(index, delay), 10, heavy=heavy)
    assert disk.run_with_timeout(pipeline.flush) is True
    assert consumed == list(range(150))


def test_flush_waits_for_consumption_and_syncs(pipelines, disk):
    log = []
    flushing = threading.Event()

    def consume(value):
        flushing.wait(5)  # nothing is consumed before the caller is in flush
        log.append(("consume", value))

    pipeline = pipelines(consume, lambda sync: log.append(("idle", sync)))
    for index in range(3):
        pipeline.put(work(index), 1)
    assert disk.run_with_timeout(signalling(pipeline.flush, flushing)) is True
    consumed = [entry for entry in log if entry[0] == "consume"]
    assert consumed == [("consume", 0), ("consume", 1), ("consume", 2)]
    # The sync for this flush came after the last item.
    last_consume = max(i for i, entry in enumerate(log) if entry[0] == "consume")
    assert ("idle", True) in log[last_consume + 1 :]


def test_flush_without_sync_does_not_sync(pipelines, disk):
    syncs = []
    pipeline = pipelines(lambda value: None, syncs.append)
    pipeline.put(work(1), 1)
    assert disk.run_with_timeout(lambda: pipeline.flush(sync=False)) is True
    assert True not in syncs


def test_flush_timeout_returns_false_while_the_consumer_is_busy(pipelines, disk):
    gate = threading.Event()
    pipeline = pipelines(lambda value: gate.wait(10))
    pipeline.put(work(1), 1)
    assert disk.run_with_timeout(lambda: pipeline.flush(timeout=0.3)) is False
    gate.set()
    assert disk.run_with_timeout(pipeline.flush) is True


def test_consumed_work_reaches_idle_without_a_flush(pipelines):
    # Bytes are handed to the OS shortly after they are consumed, flush or not.
    handed = threading.Event()
    pipeline = pipelines(lambda value: None, lambda sync: sync or handed.set())
    pipeline.put(work(1), 1)
    assert handed.wait(5), "idle(False) never ran after the work was consumed"


def test_close_consumes_everything_and_is_idempotent(pipelines, disk):
    consumed, syncs = [], []
    pipeline = pipelines(consumed.append, syncs.append)
    for index in range(20):
        pipeline.put(work(index, 0.001), 1, heavy=True)
    disk.run_with_timeout(pipeline.close)
    assert consumed == list(range(20))
    assert syncs[-1] is True
    disk.run_with_timeout(pipeline.close)
    assert consumed == list(range(20))


def test_close_waits_on_a_slow_writer_and_gives_up_on_one_that_consumes_nothing(
    pipelines, disk, monkeypatch
):
    monkeypatch.setattr(pipeline_module, "CLOSE_STALL_SECONDS", 1.0)
    consumed = []
    # Slow but consuming: 30 items of 0.1 s, three times the stall limit in all, are written.
    pipeline = pipelines(lambda value: (time.sleep(0.1), consumed.append(value)))
    for index in range(30):
        pipeline.put(work(index), 1)
    disk.run_with_timeout(pipeline.close, timeout=30)
    assert consumed == list(range(30))
    # A write that never returns: close says so instead of holding the process forever.
    gate = threading.Event()
    stuck = pipelines(lambda value: gate.wait(30))
    stuck.put(work(0), 1)
    stuck.put(work(1), 7)
    started = time.monotonic()
    with pytest.raises(WriterFailedError, match=r"wrote nothing for 1 s while closing.*8 bytes"):
        disk.run_with_timeout(stuck.close, timeout=10)
    assert time.monotonic() - started < 5
    gate.set()


# ------------------------------------------------------------------ failures


def test_a_failing_consume_surfaces_on_the_next_put_and_flush(pipelines, disk):
    failure = OSError("consume broke")

    def consume(value):
        if value == 2:
            raise failure

    pipeline = pipelines(consume)
    for index in range(3):
        pipeline.put(work(index), 1)
    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(pipeline.flush, timeout=10)
    assert raised.value.__cause__ is failure
    assert "consume broke" in str(raised.value)
    # The failure is permanent: every later call raises it, none hangs.
    for _ in range(2):
        with pytest.raises(WriterFailedError) as again:
            disk.run_with_timeout(lambda: pipeline.put(work(9), 1), timeout=10)
        assert again.value.__cause__ is failure
        with pytest.raises(WriterFailedError):
            disk.run_with_timeout(pipeline.flush, timeout=10)
    with pytest.raises(WriterFailedError):
        disk.run_with_timeout(pipeline.close, timeout=10)


def test_put_raises_the_failure_without_a_flush(pipelines, disk):
    consumed = threading.Event()

    def consume(value):
        consumed.set()
        raise RuntimeError("first item broke")

    pipeline = pipelines(consume)
    pipeline.put(work(0), 1)
    assert consumed.wait(5)

    def keep_putting():
        # Ends either way: a put raises the failure once the writer thread has
        # stored it, or, should the bound fill first, the blocked put finds the
        # thread dead and raises.
        while True:
            pipeline.put(work(1), 1)

    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(keep_putting, timeout=10)
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_failing_heavy_work_on_the_pool_surfaces_too(pipelines, disk):
    def explode():
        raise ValueError("encoding broke")

    consumed = []
    pipeline = pipelines(consumed.append, workers=2)
    pipeline.put(work(0), 1, heavy=True)
    pipeline.put(explode, 1, heavy=True)
    pipeline.put(work(2), 1, heavy=True)
    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(pipeline.flush, timeout=10)
    assert isinstance(raised.value.__cause__, ValueError)
    assert consumed == [0]  # nothing after the failure is written out of order


def test_a_failing_idle_surfaces_on_flush(pipelines, disk):
    def idle(sync):
        if sync:
            raise OSError("fsync failed")

    pipeline = pipelines(lambda value: None, idle)
    pipeline.put(work(0), 1)
    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(pipeline.flush, timeout=10)
    assert isinstance(raised.value.__cause__, OSError)


def test_flush_waiting_when_the_writer_dies_does_not_hang(pipelines, disk):
    started, flushing = threading.Event(), threading.Event()

    def consume(value):
        started.set()
        flushing.wait(10)
        raise RuntimeError("died while the caller waited")

    pipeline = pipelines(consume)
    pipeline.put(work(0), 1)
    assert started.wait(5)
    with pytest.raises(WriterFailedError):
        disk.run_with_timeout(signalling(pipeline.flush, flushing), timeout=10)


def test_a_caller_blocked_on_the_bound_is_released_by_a_failure(pipelines, disk):
    started, putting = threading.Event(), threading.Event()

    def consume(value):
        started.set()
        putting.wait(10)
        raise RuntimeError("died while the caller was blocked")

    pipeline = pipelines(consume, max_pending_bytes=100)
    pipeline.put(work(0), 100)
    assert started.wait(5)
    # The bound is full: this put waits for space that never comes.
    with pytest.raises(WriterFailedError):
        disk.run_with_timeout(signalling(lambda: pipeline.put(work(1), 100), putting), timeout=10)


def test_report_raises_once_on_the_caller(pipelines, disk):
    first, second = OSError("disk full"), ValueError("too large")
    consumed = []

    def consume(value):
        consumed.append(value)
        if value == 1:
            pipeline.report(first)
            pipeline.report(second)

    pipeline = pipelines(consume)
    pipeline.put(work(0), 1)
    pipeline.put(work(1), 1)
    with pytest.raises(OSError) as raised:
        disk.run_with_timeout(pipeline.flush)
    assert raised.value is first
    with pytest.raises(ValueError) as raised:
        disk.run_with_timeout(lambda: pipeline.put(work(2), 1))
    assert raised.value is second
    # Each reported error was raised once; they are not failures: the writer goes on.
    assert disk.run_with_timeout(pipeline.flush) is True
    pipeline.put(work(3), 1)
    assert disk.run_with_timeout(pipeline.flush) is True
    assert consumed == [0, 1, 2, 3]  # the put that raised had queued its work first


# ------------------------------------------------------------------- bounds


def test_pending_bytes_stay_under_the_bound_with_a_slow_consumer(pipelines, disk):
    bound = 1000
    seen = []
    consumed = []
    started = threading.Event()  # the consumer holds its first item until the bound is full

    def consume(value):
        seen.append(pipeline.pending_bytes)
        started.wait(10)
        time.sleep(0.002)
        consumed.append(value)

    pipeline = pipelines(consume, max_pending_bytes=bound)

    def produce():
        for index in range(100):
            pipeline.put(work(index), 100)
            seen.append(pipeline.pending_bytes)
            # The caller is held back: it is never more than the bound ahead.
            assert index + 1 - len(consumed) <= bound // 100
            if index == 9:
                assert pipeline.pending_bytes == bound  # full, and the caller got here
                started.set()
        return pipeline.flush()

    assert disk.run_with_timeout(produce, timeout=30) is True
    assert consumed == list(range(100))
    assert max(seen) == bound
    assert pipeline.pending_bytes == 0


def test_an_item_larger_than_the_bound_goes_through_alone(pipelines, disk):
    bound = 1000
    seen = []  # (item, pending bytes while it was consumed)

    def consume(value):
        seen.append((value, pipeline.pending_bytes))
        time.sleep(0.002)

    pipeline = pipelines(consume, max_pending_bytes=bound)
    sizes = [100] * 12 + [5000] + [100] * 12 + [5000, 5000] + [100] * 3

    def produce():
        for index, size in enumerate(sizes):
            pipeline.put(work(index), size)
            pending = pipeline.pending_bytes
            assert pending <= bound or pending == size == 5000, (index, pending)
        return pipeline.flush()

    assert disk.run_with_timeout(produce, timeout=30) is True
    assert [value for value, _ in seen] == list(range(len(sizes)))
    for value, pending in seen:
        if sizes[value] == 5000:
            assert pending == 5000, "the oversized item was not alone"
        else:
            assert pending <= bound
