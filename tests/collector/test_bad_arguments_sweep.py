"""Every public class and function of the collector, every argument in an obvious wrong form.

For each name of ``rankscribe.collector.__all__`` that takes arguments, a call
that works is given below; the sweep replaces one argument at a time with
wrong values chosen from its annotation (None or an int where a path belongs,
a str, a bool or a float where an int belongs, a str where a flag belongs, an
int where a str, a mapping or a function belongs). Each must be refused with
the package's error (:class:`CollectorError`) naming the argument, not with a
raw ``TypeError``/``AttributeError`` from deep inside, and not accepted.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe import collector
from rankscribe.collector import ArrayNetwork
from rankscribe.collector.errors import CollectorError

Arguments = tuple[tuple[Any, ...], dict[str, Any]]
PARAMETERS = {"w": np.ones((2, 2), dtype=np.float32)}


def _step(batch: Any) -> float:
    return 0.0


def _saved(tmp_path: Path) -> str:
    return collector.save_checkpoint(ArrayNetwork(PARAMETERS), tmp_path / "net.ckpt")


# name -> a call that works: (positional, keyword) arguments made in tmp_path
VALID: dict[str, Callable[[Path], Arguments]] = {
    "ArrayDataset": lambda t: ((np.zeros((4, 2)),), {"batch_size": 2}),
    "ArrayNetwork": lambda t: ((PARAMETERS,), {}),
    "ArrayOptimizer": lambda t: ((PARAMETERS,), {}),
    "CheckpointConfig": lambda t: ((), {}),
    "CheckpointManager": lambda t: ((), {}),
    "ModelCheckpoint": lambda t: ((), {"directory": t}),
    "Progress": lambda t: ((), {}),
    "SummaryCollector": lambda t: ((t / "summary",), {}),
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


def _public() -> dict[str, Callable[..., Any]]:
    return {
        name: getattr(collector, name)
        for name in collector.__all__
        if callable(getattr(collector, name))
        and not (
            isinstance(getattr(collector, name), type)
            and issubclass(getattr(collector, name), Exception)
        )
    }


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
    return []


def _cases() -> list[Any]:
    cases = []
    for function_name, function in sorted(_public().items()):
        if function_name not in VALID:
            continue
        for parameter in inspect.signature(function).parameters.values():
            for wrong in _wrong_values(parameter.name, str(parameter.annotation)):
                cases.append(
                    pytest.param(
                        function_name,
                        parameter.name,
                        wrong,
                        id=f"{function_name}({parameter.name}={wrong!r})",
                    )
                )
    return cases


def test_every_public_name_is_swept_or_left_out_with_a_reason() -> None:
    assert set(_public()) == set(VALID) | LEFT_OUT
    assert not set(VALID) & LEFT_OUT


@pytest.mark.parametrize(("function_name", "argument", "wrong"), _cases())
def test_a_wrong_argument_is_refused_by_name(
    tmp_path: Path, function_name: str, argument: str, wrong: Any
) -> None:
    function = _public()[function_name]
    positional, keywords = VALID[function_name](tmp_path)
    bound = inspect.signature(function).bind_partial(*positional, **keywords)
    bound.arguments[argument] = wrong
    with pytest.raises(CollectorError) as caught:
        function(*bound.args, **bound.kwargs)
    assert argument in str(caught.value), str(caught.value)
    assert isinstance(caught.value, (TypeError, ValueError, OSError))


@pytest.mark.parametrize("function_name", sorted(VALID))
def test_the_valid_call_of_the_sweep_works(tmp_path: Path, function_name: str) -> None:
    positional, keywords = VALID[function_name](tmp_path)
    _public()[function_name](*positional, **keywords)
