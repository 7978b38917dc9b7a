"""Extraction rules: loss, histogram parameters, input images, graph."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import CallbackParams

# private: the loss/histogram extraction rules, no public door
from rankscribe.collector.collection._extractor import (
    Extractor,
    UnreadableLossError,
    histogram_parameters,
    mean_loss,
)

# private: the collect_specified_data normalisation rule, no public door
from rankscribe.collector.collection._options import process_specified_data


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        (2.5, 2.5),
        (3, 3.0),
        (np.float32(0.25), 0.25),
        (np.array([[1.0, 2.0], [3.0, 6.0]]), 3.0),
        ((np.array([2.0, 4.0]), np.zeros(10)), 3.0),
        ([np.array(7.0), "ignored"], 7.0),
    ],
)
def test_mean_loss(outputs: Any, expected: float) -> None:
    assert mean_loss(outputs) == pytest.approx(expected)


@pytest.mark.parametrize("outputs", [None, (), [], "loss", {"loss": 1.0}, np.array([])])
def test_unreadable_loss(outputs: Any) -> None:
    with pytest.raises(UnreadableLossError):
        mean_loss(outputs)


def test_mean_loss_reads_tensors_through_their_numpy_method() -> None:
    class Tensor:
        def numpy(self) -> np.ndarray:
            return np.array([1.0, 3.0])

    assert mean_loss(Tensor()) == 2.0


PARAMETERS = [(f"layer{i}.weight", np.zeros(1)) for i in range(7)] + [("conv1.bias", np.zeros(1))]


def test_histograms_default_to_the_first_five() -> None:
    chosen = [name for name, _ in histogram_parameters(PARAMETERS, None)]
    assert chosen == [f"layer{i}.weight" for i in range(5)]


def test_histograms_match_names_from_the_start() -> None:
    assert [name for name, _ in histogram_parameters(PARAMETERS, "conv")] == ["conv1.bias"]
    assert [name for name, _ in histogram_parameters(PARAMETERS, "bias")] == []  # re.match
    assert len(histogram_parameters(PARAMETERS, "layer")) == 7  # no cap of five


class Sink:
    def __init__(self) -> None:
        self.values: list[tuple[str, str, Any]] = []

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        if plugin == "image" and np.asarray(value).shape[1] not in (1, 3):
            raise ValueError("C must be 1 or 3")
        self.values.append((plugin, name, value))


def extractor(**specified: Any) -> Extractor:
    return Extractor(process_specified_data({"collect_landscape": None, **specified}, True))


def test_values_come_in_the_originals_order() -> None:
    from rankscribe.collector import ArrayOptimizer

    sink = Sink()
    images = np.zeros((2, 3, 4, 4))
    params = CallbackParams(
        net_outputs=1.0,
        train_dataset_element=(images, np.zeros(2)),
        optimizer=ArrayOptimizer({"w": np.ones(2)}),
    )
    extractor().add_step_values(sink, params)
    assert [(plugin, name) for plugin, name, _ in sink.values] == [
        ("image", "input_data/auto"),
        ("scalar", "loss/auto"),
        ("histogram", "w/auto"),
    ]
    assert sink.values[0][2] is images


@pytest.mark.parametrize(
    ("element", "reason"),
    [
        (None, "handed the collector no batch"),
        ((), "is empty"),
        ((np.zeros((2, 8)),), "are not image"),
        # The batch's structure is named: a dict of arrays, a list of arrays.
        (
            {"input_ids": np.zeros((16, 12)), "labels": np.zeros(16)},
            "not Tensor/list/tuple: the batch is dict(input_ids: ndarray(16, 12), "
            "labels: ndarray(16))",
        ),
        ([np.zeros((2, 8)), np.zeros(2)], "the batch is list[ndarray(2, 8), ndarray(2)]"),
        (np.zeros((2, 4, 3, 3)), "are not image"),  # 4 channels: refused by the writer
    ],
)
def test_input_data_is_disabled_once(
    element: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    sink = Sink()
    instance = extractor(collect_metric=False, histogram_regular=None)
    params = CallbackParams(train_dataset_element=element)
    with caplog.at_level(logging.WARNING):
        instance.add_step_values(sink, params)
        instance.add_step_values(sink, params)
    assert sink.values == []
    assert caplog.text.count("will not collect input data") == 1
    assert reason in caplog.text
    assert not instance.collect_input_data


def test_graph_is_asked_once() -> None:
    calls = []

    class Network:
        def describe_graph(self) -> dict[str, Any]:
            calls.append(1)
            return {"nodes": [{"name": "a", "op_type": "Relu"}]}

    instance = extractor()
    params = CallbackParams(train_network=Network())
    graph = instance.graph(params)
    assert graph is not None and [node.op_type for node in graph.node] == ["Relu"]
    assert instance.graph(params) is None
    assert calls == [1]


def test_a_graph_that_cannot_be_built_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    class Network:
        def describe_graph(self) -> dict[str, Any]:
            return {"nodes": [{"name": "a", "op_type": "Relu", "inputs": ["missing"]}]}

    assert extractor().graph(CallbackParams(network=Network())) is None
    assert "cannot be built" in caplog.text and "'missing'" in caplog.text


def test_collect_graph_false_asks_nothing() -> None:
    class Network:
        def describe_graph(self) -> None:
            raise AssertionError("not asked")

    assert extractor(collect_graph=False).graph(CallbackParams(network=Network())) is None
