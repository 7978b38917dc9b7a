"""One train lineage builder: TrainLineage in a TrainLoop and the collector name alike.

The names the lineage shows for the network, the optimizer and the loss function
follow one rule (``docs/collector-schedule.md``, "Names in the train lineage"):
an object's own ``name`` (a non-empty str) first, then a function's or a class's
name, then the class name of an instance; a bare container (a dict network) or a
nameless function shows no name at all rather than ``dict`` or ``function``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.lineage import TrainLineage, get_summary_lineage
from rankscribe.writer import SummaryRecord

NAMED_FIELDS = (
    ("hyper_parameters", "optimizer"),
    ("hyper_parameters", "loss_function"),
    ("algorithm", "network"),
)


def cross_entropy(outputs: Any, labels: Any) -> float:
    return 0.5


class SoftmaxCrossEntropy:
    def __call__(self, outputs: Any, labels: Any) -> float:
        return 0.5


def dataset() -> ArrayDataset:
    return ArrayDataset(np.arange(6, dtype=np.float32), batch_size=2)


def names(directory: Path) -> dict[str, Any]:
    lineage = get_summary_lineage(str(directory))
    return {field: lineage.get(section, {}).get(field) for section, field in NAMED_FIELDS}


def with_train_lineage(directory: Path, network: Any, optimizer: Any, loss_fn: Any) -> None:
    loop = TrainLoop(lambda batch: 0.5, network=network, optimizer=optimizer, loss_fn=loss_fn)
    with SummaryRecord(str(directory)) as record:
        # TrainLineage is duck-typed: a callback by its hooks, not by the base class.
        lineage_callback: Any = TrainLineage(record, raise_exception=True)
        loop.train(2, dataset(), callbacks=[lineage_callback])


def with_collector(directory: Path, network: Any, optimizer: Any, loss_fn: Any) -> None:
    loop = TrainLoop(lambda batch: 0.5, network=network, optimizer=optimizer, loss_fn=loss_fn)
    collector = SummaryCollector(directory, collect_specified_data={"collect_landscape": None})
    loop.train(2, dataset(), callbacks=[collector])


def named_network() -> tuple[Any, Any]:
    network = ArrayNetwork({"w": np.ones(2, np.float32)}, name="TinyNet")
    return network, ArrayOptimizer(network, learning_rate=0.01, name="Momentum")


def dict_network() -> tuple[Any, Any]:
    network = {"w": np.ones(2, np.float32)}
    return network, ArrayOptimizer(network, learning_rate=0.01, name="Momentum")


CASES: dict[str, tuple[Callable[[], tuple[Any, Any]], Any, dict[str, Any]]] = {
    # ArrayOptimizer's docstring: "name: the optimizer name the lineage shows".
    "named objects, a plain function loss": (
        named_network,
        cross_entropy,
        {"optimizer": "Momentum", "loss_function": "cross_entropy", "network": "TinyNet"},
    ),
    # A dict network has no name: the field is left out, never "dict".
    "a dict network": (
        dict_network,
        cross_entropy,
        {"optimizer": "Momentum", "loss_function": "cross_entropy", "network": None},
    ),
    "a loss object": (
        named_network,
        SoftmaxCrossEntropy(),
        {"optimizer": "Momentum", "loss_function": "SoftmaxCrossEntropy", "network": "TinyNet"},
    ),
    "a loss class": (
        named_network,
        SoftmaxCrossEntropy,
        {"optimizer": "Momentum", "loss_function": "SoftmaxCrossEntropy", "network": "TinyNet"},
    ),
    # functools.partial names the function it wraps, never "partial".
    "a partial loss": (
        named_network,
        functools.partial(cross_entropy, labels=None),
        {"optimizer": "Momentum", "loss_function": "cross_entropy", "network": "TinyNet"},
    ),
    # A lambda has no name worth showing: left out, never "function" or "<lambda>".
    "a lambda loss": (
        named_network,
        lambda outputs, labels: 0.5,
        {"optimizer": "Momentum", "loss_function": None, "network": "TinyNet"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_train_lineage_and_collector_show_the_same_names(case: str, tmp_path: Path) -> None:
    make, loss_fn, expected = CASES[case]
    with_train_lineage(tmp_path / "callback", *make(), loss_fn)
    with_collector(tmp_path / "collector", *make(), loss_fn)
    assert names(tmp_path / "callback") == expected
    assert names(tmp_path / "collector") == expected


def test_the_learning_rate_is_the_same_both_ways(tmp_path: Path) -> None:
    with_train_lineage(tmp_path / "callback", *named_network(), cross_entropy)
    with_collector(tmp_path / "collector", *named_network(), cross_entropy)
    rates = [
        get_summary_lineage(str(tmp_path / run))["hyper_parameters"]["learning_rate"]
        for run in ("callback", "collector")
    ]
    assert rates == [pytest.approx(0.01), pytest.approx(0.01)]
