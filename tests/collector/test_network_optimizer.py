"""A loop given no optimizer records the one its network holds, as if it had been given it.

MindSpore's SummaryCollector and MindInsight's TrainLineage look for the optimizer
among the network's cells (docs/collector-schedule.md, "The optimizer").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.lineage import TrainLineage, get_summary_lineage
from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir

NO_LANDSCAPE = {"collect_landscape": None}


class TrainOneStep:
    """A train-one-step wrapper: the network and the optimizer that updates it."""

    def __init__(self, network: ArrayNetwork, optimizer: ArrayOptimizer) -> None:
        self.network = network
        self.optimizer = optimizer
        self.name = network.name


def histograms(directory: Path) -> dict[tuple[str, int], list[float]]:
    return {
        (value.tag, event.step): np.asarray(value.value).tolist()
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
        for value in event.values
        if value.plugin == "histogram"
    }


def lineage(directory: Path) -> dict[str, Any]:
    found = get_summary_lineage(str(directory.resolve()))
    found.pop("summary_dir")
    return found


def train(model: Any, directory: Path, holder: str, optimizer: bool) -> None:
    data = model(3)
    network: Any = data.network
    if holder == "held":
        network.optimizer = data.optimizer
    elif holder == "wrapper":
        network = TrainOneStep(data.network, data.optimizer)
    loop = TrainLoop(
        lambda batch: np.float32(0.25),
        network=network,
        optimizer=data.optimizer if optimizer else None,
    )
    loop.train(
        2,
        data.dataset,
        callbacks=[
            SummaryCollector(directory, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
        ],
    )


def test_an_optimizer_the_network_holds_is_recorded_as_if_given(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path / "given", "plain", optimizer=True)
    train(model, tmp_path / "held", "held", optimizer=False)
    given = histograms(tmp_path / "given")
    assert sorted({tag for tag, _ in given}) == [
        "fc.bias/auto",
        "fc.weight/auto",
        "head.bias/auto",
        "head.weight/auto",
        "norm.gamma/auto",
    ]
    assert histograms(tmp_path / "held") == given
    expected = lineage(tmp_path / "given")
    assert expected["hyper_parameters"]["optimizer"] == "Momentum"
    assert expected["hyper_parameters"]["learning_rate"] == 0.01
    assert lineage(tmp_path / "held") == expected


def test_a_wrapper_holding_network_and_optimizer_gives_it(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path / "given", "plain", optimizer=True)
    train(model, tmp_path / "wrapped", "wrapper", optimizer=False)
    assert histograms(tmp_path / "wrapped") == histograms(tmp_path / "given")
    hyper = lineage(tmp_path / "wrapped")["hyper_parameters"]
    assert hyper == lineage(tmp_path / "given")["hyper_parameters"]


def test_train_lineage_in_a_loop_without_an_optimizer(model: Any, tmp_path: Path) -> None:
    def run(directory: Path, given: bool) -> dict[str, Any]:
        data = model(2)
        network = data.network if given else TrainOneStep(data.network, data.optimizer)
        loop = TrainLoop(
            lambda batch: 0.5,
            network=network,
            optimizer=data.optimizer if given else None,
        )
        with SummaryRecord(str(directory)) as record:
            # TrainLineage is duck-typed: a callback by its hooks, not by the base class.
            lineage_callback: Any = TrainLineage(record, raise_exception=True)
            loop.train(1, data.dataset, callbacks=[lineage_callback])
        return lineage(directory)

    found = run(tmp_path / "wrapped", given=False)
    assert found["hyper_parameters"]["optimizer"] == "Momentum"
    assert found == run(tmp_path / "given", given=True)


def test_a_network_without_an_optimizer_still_records_none(model: Any, tmp_path: Path) -> None:
    train(model, tmp_path / "none", "plain", optimizer=False)
    assert histograms(tmp_path / "none") == {}
    hyper = lineage(tmp_path / "none")["hyper_parameters"]
    assert "optimizer" not in hyper and "learning_rate" not in hyper


class Optimizer:
    """Stands for a framework's optimizer base class (MindSpore's ``nn.Optimizer``)."""

    def __init__(self, learning_rate: float) -> None:
        self.learning_rate = learning_rate


class Momentum(Optimizer):
    pass


class Cell:
    """A MindSpore-like cell: its sub-cells through ``cells_and_names()``."""

    def __init__(self, *cells: object) -> None:
        self.cells = cells

    def cells_and_names(self) -> list[tuple[str, object]]:
        return [("", self), *((f"cell{index}", cell) for index, cell in enumerate(self.cells))]


def lineage_of(directory: Path, network: object) -> dict[str, Any]:
    dataset = ArrayDataset(np.zeros((4, 2), np.float32), batch_size=2)
    with SummaryRecord(str(directory)) as record:
        lineage_callback: Any = TrainLineage(record, raise_exception=True)
        TrainLoop(lambda batch: 0.5, network=network).train(
            1, dataset, callbacks=[lineage_callback]
        )
    return lineage(directory)


def test_an_optimizer_among_the_cells_is_found(tmp_path: Path) -> None:
    network = Cell(Cell(), Momentum(0.125))
    hyper = lineage_of(tmp_path / "run", network)["hyper_parameters"]
    assert (hyper["optimizer"], hyper["learning_rate"]) == ("Momentum", 0.125)


def test_a_network_that_holds_itself_or_fails_to_answer_has_no_optimizer(
    tmp_path: Path,
) -> None:
    class Failing:
        @property
        def optimizer(self) -> object:
            raise RuntimeError("not built yet")

    first, second = Failing(), Failing()
    first.network = second  # type: ignore[attr-defined]
    second.network = first  # type: ignore[attr-defined]
    hyper = lineage_of(tmp_path / "run", first)["hyper_parameters"]
    assert "optimizer" not in hyper and "learning_rate" not in hyper
