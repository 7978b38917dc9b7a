"""A KeyboardInterrupt (Ctrl-C) that lands anywhere in recording leaves the record closable.

Python runs a signal's handler, which raises KeyboardInterrupt, where a function is
entered or a call returns. The child process below (this file run as a script) raises
KeyboardInterrupt at each such point of three steps' recording in turn, through a trace
function on the training thread (``call`` and ``return`` events), then closes the record:
each close must return, and every step recorded before the interrupt must be in the file.
A lock taken in Python code and left held (``threading.Event.set``, whose Condition's
``__enter__`` is a Python function) makes a close wait on itself forever: the child is
run with a timeout, and dumps its threads' stacks when it runs out.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir

CHILD_TIMEOUT = 120.0


def test_an_interrupt_at_any_call_of_recording_leaves_close_able_to_finish() -> None:
    # The child without coverage's tracer (the env passes its variables on): the test's
    # trace function takes the tracer's place on the training thread.
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("COVERAGE_")
    }
    environment["PYTHONFAULTHANDLER"] = "1"
    child = subprocess.Popen(
        [sys.executable, __file__],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        text=True,
    )
    try:
        output, _ = child.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)  # its stacks, then the failure
        output, _ = child.communicate(timeout=30)
        raise AssertionError(f"a close after an interrupt never returned:\n{output}") from None
    assert child.returncode == 0, output
    interrupts = int(output.split()[-1])
    assert interrupts > 50, output  # the points of three steps, every one tried


def _interrupt_at(point: int) -> tuple[Callable[[FrameType, str, Any], Any], list[int]]:
    """A trace function that raises KeyboardInterrupt at the ``point``-th call or return
    (0: never), and the count of the calls and returns it saw."""
    count = [0]

    def trace(frame: FrameType, event: str, argument: Any) -> Any:
        if event in ("call", "return"):
            count[0] += 1
            if count[0] == point:
                sys.settrace(None)
                raise KeyboardInterrupt
        return trace

    return trace, count


def _record_three_steps(point: int) -> int:
    """Record three steps, interrupted at the ``point``-th call or return, and close; the
    calls and returns seen. Every step recorded before the interrupt is in the file."""
    with tempfile.TemporaryDirectory() as directory:
        record = SummaryRecord(directory)
        trace, count = _interrupt_at(point)
        recorded = []
        # No garbage collection while traced: a KeyboardInterrupt raised in one of its
        # callbacks is printed and dropped, and the points would differ from run to run.
        gc.disable()
        try:
            sys.settrace(trace)
            for step in range(1, 4):
                record.add_value("scalar", "loss", float(step))
                if step == 2:  # a step of more than scalars: the scalar batch is sealed
                    record.add_value("histogram", "weights", np.arange(4.0))
                record.record(step)
                recorded.append(step)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
            gc.enable()
        record.close()
        written = {event.step for event in load_dir(directory) if event.values}
        assert set(recorded) <= written, (point, recorded, written)
        return count[0]


def _interrupted_runs() -> int:
    """Interrupt three steps' recording at each of their points in turn; how many."""
    points = _record_three_steps(0)
    for point in range(1, points + 1):
        _record_three_steps(point)
    return points


if __name__ == "__main__":
    print("interrupted at each of", _interrupted_runs())
