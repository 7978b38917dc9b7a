"""Hand-off from the training thread to one background writer thread.

Three plain pieces: a queue that keeps submission order, a small pool of
encoder threads for heavy values (histograms, PNGs, big tensors: NumPy, zlib
and file writes release the GIL), and one writer thread that takes results in
submission order and writes them. The caller only enqueues; it blocks only when
the bytes not yet written exceed ``max_pending_bytes``, so memory stays bounded
when the disk is slow. A failure of the writer thread is carried back to the
caller on its next call; no wait can outlive the thread it waits for.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from rankscribe.writer.errors import WriterFailedError

logger = logging.getLogger(__name__)

Work = Callable[[], Any]

# How often a waiting caller re-checks that the writer thread is still alive.
_LIVENESS_INTERVAL = 0.2
# close() gives up on a writer thread that consumed nothing for this long (a write that
# blocks forever: a hung network filesystem), rather than hold the process forever.
CLOSE_STALL_SECONDS = 120.0
# Consumed records reach the OS at most this long after they were consumed:
# one write per batch under load, without a record idling in memory for long.
_WRITE_DELAY = 0.02


class Wakeup:
    """One thread wakes another, through calls into C only (a ``queue.SimpleQueue``).

    The training thread must never take a lock in Python code: ``threading.Event.set``
    does (its Condition's ``__enter__`` is a Python function), and a KeyboardInterrupt
    that lands as that function returns leaves the lock held, the ``with`` block never
    entered; the same thread's next ``set`` (closing the record on the way out of a
    Ctrl-C) then waits on itself forever. A SimpleQueue's ``put`` and ``get`` hold no
    lock that a Python frame could leave held.
    """

    __slots__ = ("_tokens",)

    def __init__(self) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()

    def wake(self) -> None:
        """Wake the waiting thread, or the next ``wait`` (wake-ups do not pile up)."""
        if self._tokens.empty():
            self._tokens.put(None)

    def drain(self) -> None:
        """Forget the wake-ups so far (the waiting thread, before it waits anew)."""
        while not self._tokens.empty():
            try:
                self._tokens.get_nowait()
            except queue.Empty:
                return

    def wait(self, timeout: float) -> bool:
        """Whether a wake-up came within ``timeout`` seconds (it is used up)."""
        try:
            self._tokens.get(timeout=timeout)
        except queue.Empty:
            return False
        return True


class _Flush:
    def __init__(self, sync: bool) -> None:
        self.sync = sync
        self.done = Wakeup()  # the caller waits on it: no lock of Python code (Wakeup)


_STOP = object()


class EncoderPool:
    """Daemon threads that run encoding work and hand results back through Futures.

    Daemon threads (rather than concurrent.futures' executor) so that an
    interpreter exiting without ``close()`` is never held up by idle encoders.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Work] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-encoder-{index}", daemon=True)
            for index in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, work: Work) -> Future[Any]:
        future: Future[Any] = Future()
        self._tasks.put((future, work))
        return future

    def shutdown(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)

    def _run(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, work = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(work())
                except BaseException as error:  # handed to the writer thread
                    future.set_exception(error)


class Pipeline:
    """Ordered, bounded, failure-aware hand-off to a writer thread.

    ``consume(result)`` runs on the writer thread for every submitted piece of
    work, in submission order. ``idle(sync)`` runs at most ``_WRITE_DELAY``
    after work was consumed (``sync=False``: hand buffered bytes to the OS) and
    for every flush (``sync=True``: make them durable).
    """

    def __init__(
        self,
        consume: Callable[[Any], None],
        idle: Callable[[bool], None],
        *,
        workers: int,
        max_pending_bytes: int,
        name: str,
    ) -> None:
        self._consume = consume
        self._idle = idle
        self._max_pending = max_pending_bytes
        self._queue: queue.SimpleQueue[tuple[object, int]] = queue.SimpleQueue()
        self._queued_bytes = 0  # written by callers only
        self._written_bytes = 0  # written by the writer thread only
        self._space = threading.Condition()
        self._callers_waiting = False
        self._reported: deque[BaseException] = deque()
        self.failure: BaseException | None = None
        self._pool: EncoderPool | None = EncoderPool(workers, name) if workers > 1 else None
        self._thread = threading.Thread(target=self._run, name=f"{name}-writer", daemon=True)
        self._thread.start()

    @property
    def has_error(self) -> bool:
        """Whether the next call would raise (a reported error, or the thread's failure)."""
        return bool(self._reported) or self.failure is not None

    @property
    def pending_bytes(self) -> int:
        """Bytes recorded but not yet written."""
        return self._queued_bytes - self._written_bytes

    def put(self, work: Work, nbytes: int, *, heavy: bool = False) -> None:
        """Queue ``work``, then raise what an earlier piece of work reported.

        Heavy work starts encoding at once on the pool. The work is queued
        before an earlier error is raised, so that error never costs this step.
        """
        if self.failure is not None:
            self.raise_pending()
        if self._queued_bytes - self._written_bytes + nbytes > self._max_pending:
            self._wait_for_space(nbytes)
        item: object = self._pool.submit(work) if heavy and self._pool is not None else work
        self._queued_bytes += nbytes
        self._queue.put((item, nbytes))
        if self._reported:
            self.raise_pending()

    def flush(self, sync: bool = True, timeout: float | None = None) -> bool:
        """Return once everything queued before this call was consumed (and synced).

        Returns False if ``timeout`` seconds passed first.
        """
        self.raise_pending()
        self._check_alive()
        marker = _Flush(sync)
        self._queue.put((marker, 0))
        deadline = None if timeout is None else time.monotonic() + timeout
        wait = _LIVENESS_INTERVAL
        # Never past the deadline: flush(timeout=0) queues the sync and returns at once.
        while not marker.done.wait(
            wait if deadline is None else max(0.0, min(wait, deadline - time.monotonic()))
        ):
            self._check_alive()
            if deadline is not None and time.monotonic() >= deadline:
                return False
        self.raise_pending()
        return True

    def close(self) -> None:
        """Write everything queued, then stop the threads. Idempotent.

        Raises :class:`WriterFailedError` when the writer thread consumes nothing for
        :data:`CLOSE_STALL_SECONDS` (what it had not written is named; the thread is
        left, a daemon, to the process's exit).
        """
        if self._thread.is_alive():
            self._queue.put((_STOP, 0))
            self._join()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.raise_pending()

    def _join(self) -> None:
        """Wait for the writer thread to end, as long as it keeps consuming."""
        written, since = self._written_bytes, time.monotonic()
        while True:
            self._thread.join(_LIVENESS_INTERVAL)
            if not self._thread.is_alive():
                return
            now = time.monotonic()
            if self._written_bytes != written:
                written, since = self._written_bytes, now
            elif now - since >= CLOSE_STALL_SECONDS:
                raise WriterFailedError(
                    f"the background summary writer wrote nothing for {now - since:.0f} s "
                    f"while closing (a write that does not return?); "
                    f"{self.pending_bytes} bytes recorded are not written"
                )

    def report(self, error: BaseException) -> None:
        """From the writer thread: raise ``error`` on the caller's next call."""
        self._reported.append(error)

    def raise_pending(self) -> None:
        """Raise a reported error (once), or the writer thread's failure (always)."""
        if self._reported:
            raise self._reported.popleft()
        if self.failure is not None:
            raise WriterFailedError(
                f"the background summary writer failed: {self.failure!r}"
            ) from self.failure

    def _check_alive(self) -> None:
        if not self._thread.is_alive():
            self.raise_pending()
            raise WriterFailedError("the background summary writer is not running")

    def _wait_for_space(self, nbytes: int) -> None:
        with self._space:
            self._callers_waiting = True
            try:
                # An item larger than the whole bound still goes through alone.
                while (pending := self._queued_bytes - self._written_bytes) > 0 and (
                    pending + nbytes > self._max_pending
                ):
                    self._check_alive()
                    self._space.wait(_LIVENESS_INTERVAL)
            finally:
                self._callers_waiting = False

    def _run(self) -> None:
        dirty_since: float | None = None  # when consumed bytes started waiting for the OS
        try:
            while True:
                try:
                    timeout = None if dirty_since is None else _WRITE_DELAY
                    item, nbytes = self._queue.get(timeout=timeout)
                except queue.Empty:
                    self._idle(False)
                    dirty_since = None
                    continue
                if item is _STOP:
                    self._idle(True)
                    return
                if isinstance(item, _Flush):
                    self._idle(item.sync)
                    dirty_since = None
                    item.done.wake()
                    continue
                result = item.result() if isinstance(item, Future) else item()  # type: ignore[operator]
                self._consume(result)
                self._written_bytes += nbytes
                if self._callers_waiting:
                    with self._space:
                        self._space.notify_all()
                now = time.monotonic()
                if dirty_since is None:
                    dirty_since = now
                elif now - dirty_since >= _WRITE_DELAY:
                    self._idle(False)
                    dirty_since = None
        except BaseException as error:
            logger.error("the background summary writer failed", exc_info=True)
            self.failure = error
