"""Extraction rules: loss, histogram parameters, input images, graph.

Each test runs a ``SummaryCollector`` over training steps (``begin``, ``step_end``,
``end``) and looks at what it hands its ``SummaryRecord`` (``add_value``, in order) and
at what the files then hold.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import ArrayOptimizer, CallbackParams, RunContext, SummaryCollector
from rankscribe.writer.events import load_dir

NO_LANDSCAPE = {"collect_landscape": None}


def step_params(step: int, **values: Any) -> CallbackParams:
    return CallbackParams(
        mode="train", epoch_num=1, batch_num=10, cur_step_num=step, cur_epoch_num=1, **values
    )


def collect(
    directory: Path, monkeypatch: pytest.MonkeyPatch, steps: int = 1, **values: Any
) -> list[tuple[str, str, Any]]:
    """Train ``steps`` steps of ``values`` (the specified data under ``specified``), every
    step collected; the ``(plugin, tag, value)`` the collector added to its record (those
    the record accepted, in order)."""
    specified = {**NO_LANDSCAPE, **values.pop("specified", {})}
    collector = SummaryCollector(directory, collect_freq=1, collect_specified_data=specified)
    added: list[tuple[str, str, Any]] = []
    collector.begin(RunContext(step_params(1, **values)))
    record = collector.record
    assert record is not None
    add_value = record.add_value

    def spy(plugin: str, name: str, value: Any) -> Any:
        result = add_value(plugin, name, value)  # a value the record refuses is not added
        added.append((plugin, name, value))
        return result

    monkeypatch.setattr(record, "add_value", spy)
    for step in range(1, steps + 1):
        collector.step_end(RunContext(step_params(step, **values)))
    collector.end(RunContext(step_params(steps, **values)))
    return added


def loss_values(directory: Path) -> list[Any]:
    return [
        value.value
        for event in load_dir(directory)
        if event.what == "summary"
        for value in event.values
        if value.tag == "loss/auto"
    ]


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        (2.5, 2.5),
        (3, 3.0),
        (np.float32(0.25), 0.25),
        (np.array([[1.0, 2.0], [3.0, 6.0]]), 3.0),
        ((np.array([2.0, 4.0]), np.zeros(10)), 3.0),
        ([np.array(7.0), "ignored"], 7.0),
        # One number on the host, read at once: the same float as the mean of it.
        (np.array([[0.1]], np.float32), float(np.float32(0.1))),
        (np.int64(4), 4.0),
        (np.float16(0.1), float(np.float16(0.1))),
        (np.array(1 + 2j), 1.0),  # complex: the general path (its real part, as MindSpore)
    ],
)
def test_mean_loss(
    outputs: Any, expected: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collect(tmp_path, monkeypatch, net_outputs=outputs)
    assert loss_values(tmp_path) == [pytest.approx(expected)]


@pytest.mark.parametrize("outputs", [(), [], "loss", {"loss": 1.0}, np.array([])])
def test_unreadable_loss(
    outputs: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        collect(tmp_path, monkeypatch, steps=2, net_outputs=outputs)
    assert loss_values(tmp_path) == []
    # Said once: the loss is not looked for again.
    assert caplog.text.count("so no loss was recorded in SummaryCollector") == 1


def test_no_output_at_all_is_an_unreadable_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        collect(tmp_path, monkeypatch, net_outputs=None)
    assert loss_values(tmp_path) == []
    assert "Can not find any output by this network" in caplog.text


def test_mean_loss_reads_tensors_through_their_numpy_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tensor:
        def numpy(self) -> np.ndarray:
            return np.array([1.0, 3.0])

    collect(tmp_path, monkeypatch, net_outputs=Tensor())
    assert loss_values(tmp_path) == [2.0]


PARAMETERS = {f"layer{i}.weight": np.zeros(1) for i in range(7)} | {"conv1.bias": np.zeros(1)}


def histograms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, regular: str | None) -> list[str]:
    added = collect(
        tmp_path,
        monkeypatch,
        optimizer=ArrayOptimizer(PARAMETERS),
        specified={"histogram_regular": regular},
    )
    return [name.removesuffix("/auto") for plugin, name, _ in added if plugin == "histogram"]


def test_histograms_default_to_the_first_five(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert histograms(tmp_path, monkeypatch, None) == [f"layer{i}.weight" for i in range(5)]


@pytest.mark.parametrize(
    ("regular", "chosen"),
    [
        ("conv", ["conv1.bias"]),
        ("bias", []),  # re.match: from the start of the name
        ("layer", [f"layer{i}.weight" for i in range(7)]),  # no cap of five
    ],
)
def test_histograms_match_names_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, regular: str, chosen: list[str]
) -> None:
    assert histograms(tmp_path, monkeypatch, regular) == chosen


def test_values_come_in_the_originals_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = np.zeros((2, 3, 4, 4))
    added = collect(
        tmp_path,
        monkeypatch,
        net_outputs=1.0,
        train_dataset_element=(images, np.zeros(2)),
        optimizer=ArrayOptimizer({"w": np.ones(2)}),
        specified={"collect_graph": False},
    )
    step_values = [
        (plugin, name)
        for plugin, name, _ in added
        if plugin != "custom_lineage_data" and not name.startswith("rankscribe/system/")
    ]
    assert step_values[:3] == [
        ("image", "input_data/auto"),
        ("scalar", "loss/auto"),
        ("histogram", "w/auto"),
    ]
    image = next(value for plugin, _, value in added if plugin == "image")
    assert image is images  # handed over as it is, not copied


@pytest.mark.parametrize(
    ("element", "reason", "level"),
    [
        (None, "handed the collector no batch", logging.WARNING),
        ((), "is empty", logging.WARNING),
        # Data that never were images (a tabular job): said at INFO, not as a warning.
        ((np.zeros((2, 8)),), "are not image", logging.INFO),
        # The batch's structure is named: a dict of arrays, a list of arrays.
        (
            {"input_ids": np.zeros((16, 12)), "labels": np.zeros(16)},
            "not Tensor/list/tuple: the batch is dict(input_ids: ndarray(16, 12), "
            "labels: ndarray(16))",
            logging.INFO,  # a text job's batch (Hugging Face's): no images there either
        ),
        ("some text", "not Tensor/list/tuple: the batch is str", logging.WARNING),
        (
            [np.zeros((2, 8)), np.zeros(2)],
            "the batch is list[ndarray(2, 8), ndarray(2)]",
            logging.INFO,
        ),
        # 4-D, 4 channels: refused by the writer, a warning.
        (np.zeros((2, 4, 3, 3)), "are not image", logging.WARNING),
    ],
)
def test_input_data_is_disabled_once(
    element: Any,
    reason: str,
    level: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        added = collect(
            tmp_path,
            monkeypatch,
            steps=2,
            train_dataset_element=element,
            specified={"collect_metric": False, "histogram_regular": None},
        )
    assert [name for plugin, name, _ in added if plugin == "image"] == []
    assert not any(
        value.plugin == "image" for event in load_dir(tmp_path) for value in event.values
    )
    [said] = [r for r in caplog.records if "will not collect input data" in r.getMessage()]
    assert reason in said.getMessage()
    assert said.levelno == level


def graphs(directory: Path) -> list[Any]:
    return [event.graph for event in load_dir(directory) if event.graph is not None]


def test_graph_is_asked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Network:
        def describe_graph(self) -> dict[str, Any]:
            calls.append(1)
            return {"nodes": [{"name": "a", "op_type": "Relu"}]}

    collect(tmp_path, monkeypatch, steps=3, train_network=Network())
    [graph] = graphs(tmp_path)
    assert [node.op_type for node in graph.nodes] == ["Relu"]
    assert calls == [1]


def test_a_graph_that_cannot_be_built_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class Network:
        def describe_graph(self) -> dict[str, Any]:
            return {"nodes": [{"name": "a", "op_type": "Relu", "inputs": ["missing"]}]}

    collect(tmp_path, monkeypatch, network=Network())
    assert graphs(tmp_path) == []
    assert "cannot be built" in caplog.text and "'missing'" in caplog.text


def test_collect_graph_false_asks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Network:
        def describe_graph(self) -> None:
            raise AssertionError("not asked")

    collect(tmp_path, monkeypatch, network=Network(), specified={"collect_graph": False})
    assert graphs(tmp_path) == []
