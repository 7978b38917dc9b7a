"""Every public class and function of the collector, every argument in an obvious wrong form.

For each name of ``rankscribe.collector.__all__`` that takes arguments, a call
that works is given below; the sweep replaces one argument at a time with
wrong values chosen from its annotation (None or an int where a path belongs,
a str, a bool or a float where an int belongs, a str where a flag belongs, an
int where a str, a mapping or a function belongs, a word outside a choice's
words or an int where a choice belongs). Each must be refused with
the package's error (:class:`CollectorError`) naming the argument, not with a
raw ``TypeError``/``AttributeError`` from deep inside, and not accepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe import collector
from rankscribe.collector import ArrayNetwork
from rankscribe.collector.errors import CollectorError
from tests._support.sweeps import (
    ValidCalls,
    assert_swept_or_left_out,
    public_callables,
    refusal,
    sweep_cases,
)

PARAMETERS = {"w": np.ones((2, 2), dtype=np.float32)}


def _step(batch: Any) -> float:
    return 0.0


class _Summary:
    """What SummaryStep records through: a SummaryRecord's record and flush."""

    def record(self, step: int, train_network: Any = None) -> None:
        pass

    def flush(self) -> None:
        pass


def _saved(tmp_path: Path) -> str:
    return collector.save_checkpoint(ArrayNetwork(PARAMETERS), tmp_path / "net.ckpt")


# name -> a call that works: (positional, keyword) arguments made in tmp_path
VALID: ValidCalls = {
    "ArrayDataset": lambda t: ((np.zeros((4, 2)),), {"batch_size": 2}),
    "ArrayNetwork": lambda t: ((PARAMETERS,), {}),
    "ArrayOptimizer": lambda t: ((PARAMETERS,), {}),
    "CheckpointConfig": lambda t: ((), {}),
    "CheckpointManager": lambda t: ((), {}),
    "ModelCheckpoint": lambda t: ((), {"directory": t}),
    "Progress": lambda t: ((), {}),
    "SummaryCollector": lambda t: ((t / "summary",), {}),
    "SummaryStep": lambda t: ((_Summary(),), {"flush_step": 2}),
    "TrainLoop": lambda t: ((_step,), {}),
    "TrainSession": lambda t: (([],), {}),
    "load_checkpoint": lambda t: ((_saved(t),), {}),
    "save_checkpoint": lambda t: ((ArrayNetwork(PARAMETERS), t / "out.ckpt"), {}),
}
# Public names without a row above, and why the sweep leaves them out.
LEFT_OUT = {
    # Base classes and state holders a framework fills: they take any attribute.
    "Callback",
    "CallbackParams",
    "RunContext",
    # Data: frozen descriptions and a loaded result.
    "GraphDescription",
    "GraphNode",
    "GraphParameter",
    "LoadedCheckpoint",
    # Registers a framework's adapter module: tests/collector/test_adapters.py checks it.
    "register_adapter",
    # The collection schedule and its decision (what SummaryCollector.schedule holds):
    # tests/collector/test_schedule.py checks their arguments.
    "Collect",
    "CollectionSchedule",
}


PUBLIC = public_callables(collector)


def _wrong_values(name: str, annotation: str) -> list[Any]:  # noqa: PLR0911 - one per form
    """Obvious wrong values for an argument annotated ``annotation``."""
    optional = "None" in annotation
    if "PathLike" in annotation:
        return [5] + ([] if optional else [None])
    if annotation.startswith("Callable"):
        return [5] + ([] if optional else [None])
    if annotation.startswith(("Mapping", "dict")):
        return [5, "text"] + ([] if optional else [None])
    if annotation.startswith("bool"):
        return ["yes", 1] + ([] if optional else [None])
    if annotation.startswith("int"):
        return ["1", True, 1.5] + ([] if optional else [None])
    if annotation in {"float", "float | None"}:
        return ["1", True] + ([] if optional else [None])
    if annotation.startswith("str"):
        return [5] + ([] if optional else [None])
    if annotation == "OnExists":  # one of the words "new", "error", "append"
        return ["sometimes", 5]
    return []


def test_every_public_name_is_swept_or_left_out_with_a_reason() -> None:
    assert_swept_or_left_out(PUBLIC, VALID, LEFT_OUT)


@pytest.mark.parametrize(
    ("function_name", "argument", "wrong"), sweep_cases(PUBLIC, VALID, _wrong_values)
)
def test_a_wrong_argument_is_refused_by_name(
    tmp_path: Path, function_name: str, argument: str, wrong: Any
) -> None:
    refusal(PUBLIC[function_name], VALID[function_name](tmp_path), argument, wrong, CollectorError)


@pytest.mark.parametrize("function_name", sorted(VALID))
def test_the_valid_call_of_the_sweep_works(tmp_path: Path, function_name: str) -> None:
    positional, keywords = VALID[function_name](tmp_path)
    PUBLIC[function_name](*positional, **keywords)
