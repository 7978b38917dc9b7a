"""Fixtures of the collector tests: a tiny NumPy model and readers of what a run wrote."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import ArrayDataset, ArrayNetwork, ArrayOptimizer
from rankscribe.writer.events import load_dir
from tests._support.clocks import collector_clock, ranks_clock  # noqa: F401 - fixtures
from tests._support.launchers import drop_launcher_variables

GRAPH = {
    "name": "tiny",
    "parameters": [{"name": "fc.weight", "shape": [4, 3], "dtype": "float32"}, "fc.bias"],
    "nodes": [
        {"name": "x", "op_type": "Input"},
        {"name": "fc", "op_type": "MatMul", "scope": "Default/fc", "inputs": ["x", "fc.weight"]},
        {"name": "add", "op_type": "Add", "scope": "Default/fc", "inputs": ["fc", "fc.bias"]},
    ],
    "outputs": ["add"],
}
DATASET_GRAPH = {"op_type": "ArrayDataset", "batch_size": 2, "shuffle": False, "children": []}


class Model:
    """A network, its optimizer and a dataset of ``batches`` image batches of 2."""

    def __init__(self, batches: int, *, graph: bool = True, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.network = ArrayNetwork(
            {
                "fc.weight": rng.normal(size=(4, 3)).astype(np.float32),
                "fc.bias": np.zeros(3, np.float32),
                "head.weight": rng.normal(size=(3, 2)).astype(np.float32),
                "head.bias": np.zeros(2, np.float32),
                "norm.gamma": np.ones(2, np.float32),
                "norm.beta": np.zeros(2, np.float32),
            },
            graph=GRAPH if graph else None,
            name="TinyNet",
        )
        self.optimizer = ArrayOptimizer(self.network, learning_rate=0.01, name="Momentum")
        self.dataset = ArrayDataset(
            rng.random((2 * batches, 1, 4, 4)).astype(np.float32),
            rng.integers(0, 2, 2 * batches),
            batch_size=2,
            path="/data/tiny",
            description=DATASET_GRAPH,
        )


@pytest.fixture
def model() -> Callable[..., Model]:
    return Model


def steps_by_tag(directory: str | os.PathLike[str]) -> dict[tuple[str, str], list[int]]:
    """``{(plugin, tag): [step, ...]}`` of every summary value in ``directory``'s files."""
    found: dict[tuple[str, str], list[int]] = {}
    for event in load_dir(directory):
        if event.what != "summary":
            continue
        for value in event.values:
            assert event.step is not None and value.plugin is not None
            found.setdefault((value.plugin, value.tag), []).append(event.step)
    return found


def values_by_tag(directory: str | os.PathLike[str], plugin: str, tag: str) -> dict[int, Any]:
    """``{step: decoded value}`` of one tag."""
    return {
        event.step: value.value
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
        for value in event.values
        if value.plugin == plugin and value.tag == tag
    }


@pytest.fixture
def read_steps() -> Callable[[str | os.PathLike[str]], dict[tuple[str, str], list[int]]]:
    return steps_by_tag


@pytest.fixture
def read_values() -> Callable[[str | os.PathLike[str], str, str], dict[int, Any]]:
    return values_by_tag


@pytest.fixture(autouse=True)
def _no_hyper_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests do not inherit a MINDINSIGHT_HYPER_CONFIG or a launcher's rank variables."""
    monkeypatch.delenv("MINDINSIGHT_HYPER_CONFIG", raising=False)
    drop_launcher_variables(monkeypatch)


@pytest.fixture
def summary_dir(tmp_path: Path) -> Path:
    return tmp_path / "summary"
