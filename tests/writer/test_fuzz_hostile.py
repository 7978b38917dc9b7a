"""The fuzz targets' time limit, and the hostile generators of the writer's formats.

``tools/fuzz/targets.py`` fails an input that takes more than its time limit of CPU
time; ``tools/fuzz/hostile.py`` makes structure-aware hostile inputs (valid framing and
CRCs, hostile content) and runs them through the targets. Here: the limit trips on a
slow input whichever way it is slow, and a few hundred inputs of each generator of
the summary and TensorBoard formats are read or refused with the project's errors.
The cases come from ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tests._support.untraced import untraced


@pytest.fixture
def no_tracer() -> Iterator[None]:
    """Under a tracer the targets take no time limit (tools/fuzz/targets.py): the tests of
    the limit itself run with coverage's tracer paused (the writer env runs under it)."""
    with untraced("the fuzz targets' time limit"):
        yield


def _spin(seconds: float) -> None:
    """Use ``seconds`` of CPU time (the limit's alarm stops it sooner)."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


@pytest.mark.usefixtures("no_tracer")
def test_an_input_past_the_time_limit_fails_and_is_stopped_there(
    fuzz_targets_module: ModuleType,
) -> None:
    spent: list[float] = []

    def slow(data: bytes) -> None:
        start = time.process_time()
        try:
            _spin(30.0)
        finally:
            spent.append(time.process_time() - start)

    limited = fuzz_targets_module.time_limited(slow, limit=0.05)
    with pytest.raises(fuzz_targets_module.FuzzFailureError, match=r"more than 0\.05 s of CPU"):
        limited(b"x")
    assert spent and spent[0] < 30.0  # stopped by the alarm, not run to its end


@pytest.mark.usefixtures("no_tracer")
def test_a_reader_catching_every_exception_does_not_hide_a_slow_input(
    fuzz_targets_module: ModuleType,
) -> None:
    def swallows(data: bytes) -> None:
        for _ in range(3):
            with contextlib.suppress(Exception):  # what a careless reader does
                _spin(30.0)

    limited = fuzz_targets_module.time_limited(swallows, limit=0.05)
    with pytest.raises(fuzz_targets_module.FuzzFailureError, match=r"more than 0\.05 s of CPU"):
        limited(b"x")


@pytest.mark.usefixtures("no_tracer")
def test_without_an_alarm_the_time_is_checked_after_the_input(
    fuzz_targets_module: ModuleType,
) -> None:
    # Off the main thread no timer signal can be used: the input runs to its end, then fails.
    limited = fuzz_targets_module.time_limited(lambda data: _spin(0.2), limit=0.05)
    raised: list[BaseException] = []

    def call() -> None:
        try:
            limited(b"x")
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(timeout=60)
    assert len(raised) == 1
    assert isinstance(raised[0], fuzz_targets_module.FuzzFailureError)
    assert "CPU time, more than the limit of 0.05 s" in str(raised[0])


def test_a_fast_input_passes_and_the_targets_failures_pass_through(
    fuzz_targets_module: ModuleType,
) -> None:
    seen: list[bytes] = []
    fuzz_targets_module.time_limited(seen.append, limit=5.0)(b"abc")
    assert seen == [b"abc"]

    def fails(data: bytes) -> None:
        raise fuzz_targets_module.FuzzFailureError("read_events raised MemoryError")

    with pytest.raises(fuzz_targets_module.FuzzFailureError, match="MemoryError"):
        fuzz_targets_module.time_limited(fails)(b"")


def test_every_target_the_fuzzers_and_the_corpus_run_has_the_time_limit(
    fuzz_targets_module: ModuleType,
) -> None:
    assert fuzz_targets_module.TIME_LIMIT == 1.0
    for name, target in fuzz_targets_module.TARGETS.items():
        assert getattr(target, "__wrapped__", None) is not None, name


def test_hostile_inputs_are_read_or_refused_with_the_projects_errors(
    writer_hostile_generator: tuple[str, Callable[..., Any]],
) -> None:
    name, run = writer_hostile_generator
    campaign, kinds = run(200, seed=1, report=lambda line: None)
    assert campaign.inputs == 200
    assert kinds == {}, f"{name}: {campaign.failures} inputs failed"
