"""The adapter layer: lazy dispatch by the object's framework, and the NumPy adapter."""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    adapters,
    register_adapter,
)
from rankscribe.collector.adapters import AdapterRegistry, DatasetView
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from tests._support.launchers import clean_environment, run_bounded


@pytest.fixture
def adapter_modules() -> Iterator[None]:
    saved = dict(adapters.ADAPTER_MODULES)
    yield
    adapters.ADAPTER_MODULES.clear()
    adapters.ADAPTER_MODULES.update(saved)


def fake_framework(monkeypatch: pytest.MonkeyPatch) -> tuple[type, list[str]]:
    """A framework 'fakefw' with a Module class, and an adapter module that logs its calls."""
    calls: list[str] = []
    adapter = types.ModuleType("fake_adapter")

    class View:
        name = "FakeNet"

        def parameters(self) -> list[tuple[str, Any]]:
            return [("p", np.ones(2))]

        def graph(self) -> None:
            return None

    def network_view(obj: Any) -> Any:
        calls.append("network")
        return View()

    def none(obj: Any) -> None:
        calls.append("none")

    adapter.network_view = network_view  # type: ignore[attr-defined]
    adapter.optimizer_view = none  # type: ignore[attr-defined]
    adapter.dataset_view = none  # type: ignore[attr-defined]
    adapter.to_numpy = lambda value: np.array([42.0])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_adapter", adapter)

    class Module:
        def __len__(self) -> int:
            return 7

    Module.__module__ = "fakefw.nn.modules"
    register_adapter("fakefw", "fake_adapter")
    return Module, calls


def test_objects_go_to_their_frameworks_adapter(
    adapter_modules: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = AdapterRegistry()
    module_class, calls = fake_framework(monkeypatch)

    class UserNet(module_class):  # type: ignore[misc, valid-type]
        """Defined in a script: the framework is found through the base class."""

    view = views.network_view(UserNet())
    assert view is not None and view.name == "FakeNet"
    assert views.to_numpy(UserNet()).tolist() == [42.0]
    assert calls == ["network"]


def test_an_adapter_that_declines_hands_over_to_the_numpy_adapter(
    adapter_modules: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = AdapterRegistry()
    module_class, calls = fake_framework(monkeypatch)
    view = views.dataset_view(module_class())
    assert calls == ["none"]
    assert view == DatasetView(batches=7)


def test_a_missing_adapter_warns_once_and_reads_plainly(
    adapter_modules: None, caplog: pytest.LogCaptureFixture
) -> None:
    views = AdapterRegistry()
    register_adapter("ghostfw", "rankscribe.collector.adapters.ghost_does_not_exist")
    kind = type(
        "Loader", (), {"__module__": "ghostfw.data", "batch_size": 4, "__len__": lambda self: 3}
    )
    assert views.dataset_view(kind()) == DatasetView(batches=3, batch_size=4)
    assert views.dataset_view(kind()) == DatasetView(batches=3, batch_size=4)
    assert caplog.text.count("cannot be imported") == 1


def test_torch_is_not_imported_for_numpy_runs(tmp_path: Path) -> None:
    """A fake 'torch' on the path records being imported; a NumPy run must not import it."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    marker = tmp_path / "imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from rankscribe.collector import (
            ArrayDataset, ArrayNetwork, ArrayOptimizer, SummaryCollector, TrainLoop,
        )

        net = ArrayNetwork({{"w": np.ones((2, 2))}})
        data = ArrayDataset(np.zeros((4, 1, 2, 2)), batch_size=2)
        loop = TrainLoop(lambda batch: 1.0, network=net, optimizer=ArrayOptimizer(net))
        loop.train(1, data, callbacks=[SummaryCollector({str(tmp_path / "run")!r})])
        assert "torch" not in sys.modules, "torch was imported"
        import torch  # the control: the fake is importable and leaves its marker
    """)
    environment = clean_environment(PYTHONPATH=str(tmp_path / "fake"))
    run_bounded([sys.executable, "-c", script], timeout=60, env=environment)
    assert marker.exists()


# ----------------------------------------------------------------- containers


def test_array_dataset_batches() -> None:
    views = AdapterRegistry()
    images, labels = np.arange(10 * 4).reshape(10, 1, 2, 2), np.arange(10)
    dataset = ArrayDataset(
        images, labels, batch_size=4, path="/data/x", description={"op_type": "Demo"}
    )
    batches = list(dataset)
    assert len(dataset) == 3 and dataset.get_dataset_size() == 3
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(ArrayDataset(labels, batch_size=4, drop_remainder=True)) == 2
    view = views.dataset_view(dataset)
    # every row of the columns is served: "whole", with the rows' digest for the merge
    assert view == DatasetView(
        batches=3,
        batch_size=4,
        path="/data/x",
        graph={"op_type": "Demo"},
        samples=10,
        sharding="whole",
        digest=dataset.content_digest,
    )
    dropping = views.dataset_view(ArrayDataset(labels, batch_size=4, drop_remainder=True))
    assert dropping is not None and dropping.samples == 8  # the 2 dropped rows are not served


def test_array_dataset_shards() -> None:
    dataset = ArrayDataset(np.arange(11), batch_size=2)
    shards = [dataset.shard(3, rank) for rank in range(3)]
    assert [shard.columns[0].tolist() for shard in shards] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10],
    ]
    assert all(shard.batch_size == 2 for shard in shards)


@pytest.mark.parametrize(
    ("columns", "arguments", "error", "message"),
    [
        ((), {}, CollectorValueError, "ArrayDataset needs at least one column."),
        (
            (np.zeros(3), np.zeros(4)),
            {},
            CollectorValueError,
            "ArrayDataset columns must have the same first dimension, but got shapes [(3,), (4,)].",
        ),
        (
            (np.zeros(3),),
            {"batch_size": 0},
            CollectorValueError,
            "batch_size must be an int > 0, but got 0.",
        ),
        (
            (np.zeros(3),),
            {"description": "x"},
            CollectorTypeError,
            "description must be a dict, but got str.",
        ),
    ],
)
def test_array_dataset_errors(
    columns: tuple[Any, ...], arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        ArrayDataset(*columns, **arguments)
    assert str(raised.value) == message


def test_array_network_and_optimizer_share_arrays() -> None:
    views = AdapterRegistry()
    weight = np.ones(3, np.float32)
    network = ArrayNetwork({"w": weight}, name="Net")
    optimizer = ArrayOptimizer(network, learning_rate=0.5, name="SGD")
    optimizer.step({"w": np.full(3, 2.0)})
    np.testing.assert_array_equal(weight, np.zeros(3))
    view = views.network_view(network)
    assert view is not None and view.name == "Net"
    assert [name for name, _ in view.parameters()] == ["w"]
    optimizer_view = views.optimizer_view(optimizer)
    assert optimizer_view is not None
    assert (optimizer_view.name, optimizer_view.learning_rate()) == ("SGD", 0.5)
    with pytest.raises(CollectorValueError, match="gradient for 'v'"):
        optimizer.step({"v": np.ones(3)})


def test_containers_refuse_bad_input() -> None:
    with pytest.raises(CollectorTypeError, match=r"parameters\[0\] must be a \(name, array\)"):
        ArrayNetwork([(1, np.ones(2))])  # type: ignore[list-item]
    with pytest.raises(CollectorValueError, match="has the name 'w' twice"):
        ArrayNetwork([("w", np.ones(2)), ("w", np.ones(2))])
    with pytest.raises(CollectorValueError, match="neither a node nor a parameter"):
        ArrayNetwork(
            {"w": np.ones(2)}, graph={"nodes": [{"name": "a", "op_type": "X", "inputs": ["q"]}]}
        )
    with pytest.raises(CollectorTypeError, match="learning_rate must be a number"):
        ArrayOptimizer({"w": np.ones(2)}, learning_rate="fast")  # type: ignore[arg-type]


# ------------------------------------------------------------- duck typing


def test_duck_typed_network_and_dataset(tmp_path: Path) -> None:
    views = AdapterRegistry()
    data_file = tmp_path / "train.mindrecord"
    data_file.write_text("")

    class Cell:
        def parameters_and_names(self) -> Iterator[tuple[str, np.ndarray]]:
            yield "conv.weight", np.ones(2)

    class MindDataset:
        def __init__(self) -> None:
            self.dataset_file = [str(data_file)]

        def get_dataset_size(self) -> int:
            return 5

        def get_batch_size(self) -> int:
            return 32

        def to_json(self) -> str:
            return '{"op_type": "MindDataset", "children": []}'

    view = views.network_view(Cell())
    assert view is not None and [n for n, _ in view.parameters()] == ["conv.weight"]
    # the original records the directory of a dataset file
    assert views.dataset_view(MindDataset()) == DatasetView(
        batches=5,
        batch_size=32,
        path=str(tmp_path),
        graph={"op_type": "MindDataset", "children": []},
    )


def test_an_object_with_nothing_readable_has_no_network_view() -> None:
    views = AdapterRegistry()
    assert views.network_view(object()) is None
    assert views.network_view(None) is None


class Parameter:
    """MindSpore-style: a name and the data."""

    def __init__(self, name: str, data: Any) -> None:
        self.name, self.data = name, data


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (0.1, 0.1),
        (np.array([0.2, 0.1]), 0.2),
        (lambda step: 0.1, None),
        (None, None),
        (Parameter("lr", np.array([0.3])), 0.3),
    ],
)
def test_learning_rate(rate: Any, expected: float | None) -> None:
    views = AdapterRegistry()
    optimizer = types.SimpleNamespace(learning_rate=rate, parameters=[Parameter("w", np.ones(1))])
    view = views.optimizer_view(optimizer)
    assert view is not None
    learning_rate = view.learning_rate()
    assert learning_rate == (pytest.approx(expected) if expected is not None else None)
    assert [name for name, _ in view.parameters()] == ["w"]


def test_to_numpy() -> None:
    views = AdapterRegistry()

    class Tensor:
        def __init__(self) -> None:
            self.steps: list[str] = []

        def detach(self) -> Tensor:
            self.steps.append("detach")
            return self

        def cpu(self) -> Tensor:
            self.steps.append("cpu")
            return self

        def numpy(self) -> np.ndarray:
            self.steps.append("numpy")
            return np.array([1.0, 2.0])

    tensor = Tensor()
    assert views.to_numpy(tensor).tolist() == [1.0, 2.0]
    assert tensor.steps == ["detach", "cpu", "numpy"]
    assert views.to_numpy(3).tolist() == 3
    for bad in ("text", None, {"a": 1}):
        with pytest.raises(CollectorTypeError, match="expected numbers"):
            views.to_numpy(bad)
