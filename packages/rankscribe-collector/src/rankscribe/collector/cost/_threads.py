"""CPU time of the collector's background threads, read from outside them.

Each thread's CPU-time clock (``time.pthread_getcpuclockid`` of its ident, read by
``time.clock_gettime``: nanoseconds on the CPU, one system call); where the platform
has no such clock, on Linux ``/proc/self/task/<tid>/schedstat`` (its first field, the
same nanoseconds), and where that file is missing, ``stat``'s user and system ticks
(10 ms steps). The clock is read at a cost window's close on the training thread: five
threads' files took about 220 us there after a ~1 ms training step (an open, a read
and a close each), their clocks a few. Reading them takes no call inside the threads,
so the writer's, the sampler's and the job view's loops stay as they are. Elsewhere
(neither) nothing is read and the threads count as 0 (docs/collector-cost.md, "The
cost budget").
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["ThreadKind", "collector_threads_cpu", "cpu_since"]

#: Which optional work a thread's CPU counts towards.
ThreadKind = str
WRITER, ENCODER, LANDSCAPE, OTHER = "writer", "encoder", "landscape", "other"

_PREFIX = "rankscribe-"
#: ModelCheckpoint's save thread is another callback's cost, not the collector's.
_NOT_THE_COLLECTORS = ("rankscribe-checkpoint",)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# stat's fields after the command name (which ends with ") "): utime and stime are 14, 15.
_UTIME_AFTER_NAME = 11


def _kind(name: str) -> ThreadKind:
    if name.startswith("rankscribe-landscape"):
        return LANDSCAPE
    rest = name[len(_PREFIX) :]
    # A SummaryRecord's threads: rankscribe-<timestamp>-writer, -encoder-<n> (which encode
    # the steps holding histograms, images or large tensors: the writer's pool).
    if rest[:1].isdigit():
        return ENCODER if "-encoder-" in rest else WRITER
    return OTHER


#: A thread's CPU-time clock id from its ident (Unix but macOS; None elsewhere).
_cpu_clock_of = getattr(time, "pthread_getcpuclockid", None)


def _clock_cpu(ident: int | None) -> float | None:
    """CPU seconds of the thread whose ``threading`` ident is ``ident``, from its CPU-time
    clock, or None where there is none (or the thread has just ended)."""
    if ident is None or _cpu_clock_of is None:
        return None
    try:
        return time.clock_gettime(_cpu_clock_of(ident))
    except (OSError, OverflowError, ValueError):
        return None


def _thread_cpu(native_id: int) -> float | None:
    """CPU seconds of thread ``native_id`` of this process from ``/proc``, or None when
    not readable."""
    base = f"/proc/self/task/{native_id}/"
    try:
        with open(base + "schedstat", "rb") as file:
            return int(file.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(base + "stat", "rb") as file:
            fields = file.read().rsplit(b") ", 1)[1].split()
        return (int(fields[_UTIME_AFTER_NAME]) + int(fields[_UTIME_AFTER_NAME + 1])) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


def collector_threads_cpu() -> dict[int, tuple[ThreadKind, float]]:
    """``native id -> (kind, CPU seconds)`` of the process's RankScribe threads now.

    Every thread named ``rankscribe-*`` but ModelCheckpoint's: the summary record's
    writer and encoders (kind ``writer``), the landscape's file writer (``landscape``),
    the system sampler and the job view's threads (``other``). A record the script
    opened itself has such threads too, and counts.
    """
    found: dict[int, tuple[ThreadKind, float]] = {}
    for thread in threading.enumerate():
        name, native_id = thread.name, thread.native_id
        if (
            native_id is None
            or not name.startswith(_PREFIX)
            or name.startswith(_NOT_THE_COLLECTORS)
        ):
            continue
        seconds = _clock_cpu(thread.ident)
        if seconds is None:
            seconds = _thread_cpu(native_id)
        if seconds is not None:
            found[native_id] = (_kind(name), seconds)
    return found


def cpu_since(
    before: dict[int, tuple[ThreadKind, float]], now: dict[int, tuple[ThreadKind, float]]
) -> dict[ThreadKind, float]:
    """CPU seconds per kind between two readings (a thread started since: all of its own)."""
    spent = {WRITER: 0.0, ENCODER: 0.0, LANDSCAPE: 0.0, OTHER: 0.0}
    for native_id, (kind, seconds) in now.items():
        earlier = before.get(native_id)
        spent[kind] += max(0.0, seconds - (earlier[1] if earlier is not None else 0.0))
    return spent
