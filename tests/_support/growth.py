"""Whether a parser's time grows linearly with the size of a hostile input.

A parser of what a file or a message holds must not be made slow by what another user
writes there: its time on inputs of 1, 4 and 16 times a base size of a hostile shape
grows by at most ``GROWTH_LIMIT`` for each fourfold step (16 for a quadratic parser):
from 4 to 16 times, and on average over both steps (:func:`_linear` says why).
The times are the process's CPU seconds (what other processes of a shared machine do
counts little), each size's least over up to ``ATTEMPTS`` measurements, one of each size in
turn (a busy machine's caches slow the largest input most). Every size is measured as
many times as the others: the least of more draws is lower, so a smaller input measured
more often than the largest made the largest look slower than it is. The growth env sets
``GLIBC_TUNABLES`` so that the memory a parse allocates comes from the heap whatever its
size: by default glibc maps a 16 MB buffer afresh at each parse (thousands of page faults,
counted as CPU) and reuses the smaller sizes' memory, which makes the largest input look
slower than it is.
A parser that spends more than ``BUDGET_SECONDS`` of CPU in all is interrupted and
fails, so that a quadratic one fails in seconds rather than running for an hour.
Imports only the standard library and pytest at import time.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests._support.untraced import untraced

Input = TypeVar("Input")

SCALES = (1, 4, 16)
# Measurements of every size before a failure is reported, each size's least time kept
# across them (the same count for every size). A linear parser returns after the first
# that reads linear (most after one); the rest are for a busy machine: CI's once read the
# rank-dirs note's 16 MB 39 % slower than this machine in each of five, its 4 MB no slower
# (6.4x where 4.2-4.6x is usual). A quadratic one fails on its CPU budget first.
ATTEMPTS = 9
GROWTH_LIMIT = 6.0
BUDGET_SECONDS = 30.0
# Below this a time is mostly noise (the clock, the interpreter, a busy machine's caches):
# ratios start here. A quadratic parser takes seconds at 16 MB, far above it.
FLOOR_SECONDS = 0.02
MEGABYTE = 1 << 20
#: The base size of an input whose parse is a Python loop over many small items (a query's
#: clauses, a partial's tags, an index's metric keys, a checkpoint's tensors: 0.3-0.8 us a
#: byte, 3-13 CPU seconds at 16 MB): 256 KB to 4 MB. The smallest still takes 0.05 s or more
#: (above ``FLOOR_SECONDS``), each step still grows ~4x, and a quadratic parser still grows
#: 16x a step; at ``MEGABYTE`` those four tests took 55 of the growth env's 130 s.
SLOW_PARSE_BASE = MEGABYTE // 4
# Set to 0 in every tox env but `growth`, which runs them alone: beside another env the
# caches they share slow the largest input most (and the minimums env's purpose is the
# dependencies' versions, which the numbers do not depend on).
GROWTH_ENV = "RANKSCRIBE_GROWTH_TESTS"
#: The mark every test that times growth carries: the growth env runs the marked tests
#: (``pytest -m growth``) of the files its command names and nothing else, and a test that
#: times growth without it fails in every env (:func:`_check_marked`), else no env would
#: time it.
MARK = "growth"
# The ids of the collected tests that carry the mark (tests/conftest.py notes them).
_MARKED: set[str] = set()


def note_marked(items: list[pytest.Item]) -> None:
    """Note which of the collected ``items`` carry :data:`MARK` (tests/conftest.py's
    ``pytest_collection_modifyitems``)."""
    _MARKED.update(item.nodeid for item in items if item.get_closest_marker(MARK) is not None)


def _check_marked() -> None:
    """Fail the running test unless it carries :data:`MARK`."""
    running = os.environ.get("PYTEST_CURRENT_TEST")
    if running is None:
        return  # not under pytest
    nodeid = running.rsplit(" (", 1)[0]
    if nodeid not in _MARKED:
        pytest.fail(
            f"{nodeid} times growth without @pytest.mark.{MARK}: the growth env runs "
            f"only the tests so marked, and every other env skips the timing"
        )


class _OverBudgetError(Exception):
    pass


@contextlib.contextmanager
def _budget(seconds: float) -> Iterator[None]:
    def interrupt(*_: Any) -> None:
        raise _OverBudgetError

    previous = signal.signal(signal.SIGPROF, interrupt)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _seconds(parse: Callable[[Input], object], given: Input) -> float:
    """CPU seconds of one ``parse(given)``, the cyclic garbage collector paused.

    Paused, because its full collections come when the objects made since the last one
    reach a quarter of all the process holds: whether one lands inside a parse depends on
    what earlier tests left alive, not on the parser, and one costs as much as the whole
    heap. Its cost is linear in the objects made; with it the same 16 MB checkpoint took
    4.3 to 5.1 s, without it 3.0 to 3.5 s.
    """
    gc.collect()
    paused = gc.isenabled()
    gc.disable()
    try:
        started = time.process_time()
        parse(given)
        return time.process_time() - started
    finally:
        if paused:
            gc.enable()


def skip_unless_timed(what: str) -> None:
    """Skip the running test (which must carry :data:`MARK`) outside the growth env."""
    _check_marked()
    if os.environ.get(GROWTH_ENV) == "0":  # every env but growth
        pytest.skip(f"{GROWTH_ENV}=0: {what} is timed by the growth env, alone on the machine")


def growth(parse: Callable[[Input], object], inputs: list[Input]) -> list[float]:
    """The CPU seconds ``parse`` takes on each of ``inputs``, once each (from a test that
    carries :data:`MARK`)."""
    _check_marked()
    return _growth(parse, inputs)


def _growth(parse: Callable[[Input], object], inputs: list[Input]) -> list[float]:
    return [_seconds(parse, given) for given in inputs]


def assert_linear(
    parse: Callable[[Input], object],
    build: Callable[[int], Input],
    *,
    base: int = MEGABYTE,
    budget: float = BUDGET_SECONDS,
    unit: str = "bytes",
) -> list[float]:
    """Fail unless ``parse`` of ``build(base * scale)`` grows linearly over ``SCALES``.

    ``build(size)`` makes an input of about ``size`` bytes (or of ``size`` of another
    ``unit``: a partial's tags); ``parse`` reads it (raising a package error is as good
    as returning: refusing is parsing). Returns the times. The calling test carries
    :data:`MARK`.
    """
    skip_unless_timed("parsers' growth")
    # The package envs run under coverage: timed under its tracer, a parser's growth
    # would be the tracer's. Paused, the inputs and times are what a plain run has.
    with untraced("a parser's growth"):
        return _assert_linear(parse, build, base=base, budget=budget, unit=unit)


def _assert_linear(
    parse: Callable[[Input], object],
    build: Callable[[int], Input],
    *,
    base: int,
    budget: float,
    unit: str = "bytes",
) -> list[float]:
    inputs = [build(base * scale) for scale in SCALES]
    seconds = [float("inf")] * len(SCALES)
    for _ in range(ATTEMPTS):
        try:
            with _budget(budget):
                measured = _growth(parse, inputs)
        except _OverBudgetError:
            pytest.fail(
                f"parsing inputs of {base} to {base * SCALES[-1]} {unit} took "
                f"more than {budget:.0f} CPU seconds"
            )
        seconds = [min(pair) for pair in zip(seconds, measured, strict=True)]
        if _linear(seconds):
            return seconds
    pytest.fail(
        f"time grows faster than linearly: {', '.join(f'{s:.4f}' for s in seconds)} s "
        f"for {', '.join(str(base * scale) for scale in SCALES)} {unit}"
    )


def _linear(seconds: list[float]) -> bool:
    """Whether ``seconds`` grow within ``GROWTH_LIMIT`` a step over the last steps, and
    within its power over all of them.

    The first step alone may grow faster: an input of 1 MB and what is made of it may
    still fit in the processor's cache, one of 4 MB does not (json.loads alone grows 8x
    there, and 4x from 4 to 16 MB). A quadratic parser grows 16x at every step.
    """
    floored = [max(value, FLOOR_SECONDS) for value in seconds]
    ratios = [later / earlier for earlier, later in itertools.pairwise(floored)]
    overall = floored[-1] / floored[0]
    return all(ratio <= GROWTH_LIMIT for ratio in ratios[1:]) and overall <= GROWTH_LIMIT ** (
        len(ratios)
    )
