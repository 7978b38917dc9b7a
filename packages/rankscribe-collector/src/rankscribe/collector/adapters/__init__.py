"""What the collector reads from a training script's objects, whatever the framework.

The collector never touches a network, optimizer or dataset directly: it asks
this package for a *view*:

- :class:`NetworkView`: the class name, the current ``(name, array)``
  parameters, and the graph when the network can describe one;
- :class:`OptimizerView`: the class name, the parameters it updates, the
  learning rate (for the lineage only);
- :class:`DatasetView`: batches per epoch, batch size, an optional path and an
  optional description (the dataset graph of the lineage).

Views come from *adapter modules*, one per framework. An adapter module
defines four functions, each returning ``None`` for objects it does not handle::

    def network_view(obj: Any) -> NetworkView | None: ...
    def optimizer_view(obj: Any) -> OptimizerView | None: ...
    def dataset_view(obj: Any) -> DatasetView | None: ...
    def to_numpy(value: Any) -> numpy.ndarray | None: ...

The adapter is chosen by the *top-level module of the object's type* (or of a
base class, for user subclasses of ``torch.nn.Module``): an object whose class
comes from ``torch`` is handed to ``rankscribe.collector.adapters.torch``,
imported only then, so the collector never imports a framework a script does
not use. :func:`register_adapter` adds another framework. Whatever no adapter
claims goes to the built-in NumPy adapter (:mod:`.numpy`), which also reads
duck-typed objects (``named_parameters()``, ``get_dataset_size()``, ...).
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rankscribe.writer.pb import anf_ir_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "ADAPTER_MODULES",
    "DatasetView",
    "NetworkView",
    "OptimizerView",
    "adapter_for",
    "dataset_view",
    "network_view",
    "optimizer_view",
    "register_adapter",
    "to_numpy",
]

#: Top-level module of an object's class -> the adapter module that reads it.
ADAPTER_MODULES: dict[str, str] = {"torch": "rankscribe.collector.adapters.torch"}

_lock = threading.Lock()
_by_type: dict[type, ModuleType | None] = {}
_failed: set[str] = set()


class NetworkView(Protocol):
    """A network as the collector sees it."""

    @property
    def name(self) -> str:
        """The class name the lineage shows (``algorithm.network``)."""

    def parameters(self) -> list[tuple[str, Any]]:
        """The current ``(name, value)`` of every parameter, in the network's order.

        Values are anything :func:`to_numpy` reads; the collector copies what it keeps.
        """

    def graph(self) -> anf_ir_pb2.GraphProto | None:
        """The network's graph, or None when it cannot describe one."""


class OptimizerView(Protocol):
    """An optimizer as the collector sees it."""

    @property
    def name(self) -> str:
        """The class name the lineage shows (``hyper_parameters.optimizer``)."""

    def parameters(self) -> list[tuple[str, Any]]:
        """The ``(name, value)`` of every parameter it updates (histograms come from these)."""

    def learning_rate(self) -> float | None:
        """The current learning rate (the first element if it is a vector), or None."""


@dataclass(frozen=True)
class DatasetView:
    """A dataset as the collector sees it; any field may be None when unknown.

    The ``get_*`` methods and ``dataset_path`` / ``dataset_graph`` are the names
    :mod:`rankscribe.lineage`'s lineage builders read.
    """

    batches: int | None = None
    batch_size: int | None = None
    path: str | None = None
    graph: dict[str, Any] | None = None
    #: Rows (samples) per epoch when the dataset knows them; the lineage's dataset
    #: size then counts them exactly, instead of batches x batch size.
    samples: int | None = None

    @property
    def num_samples(self) -> int | None:
        return self.samples

    def get_dataset_size(self) -> int | None:
        return self.batches

    def get_batch_size(self) -> int | None:
        return self.batch_size

    @property
    def dataset_path(self) -> str | None:
        return self.path

    @property
    def dataset_graph(self) -> dict[str, Any] | None:
        return self.graph


def register_adapter(framework: str, module: str) -> None:
    """Read objects whose class comes from top-level module ``framework`` with ``module``."""
    with _lock:
        ADAPTER_MODULES[framework] = module
        _by_type.clear()
        _failed.discard(module)


def _load(module_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        if module_name not in _failed:
            _failed.add(module_name)
            logger.warning("The adapter %s cannot be imported (%s); such objects are read "
                           "as plain Python objects.", module_name, error)
        return None


def adapter_for(obj: object) -> ModuleType | None:
    """The adapter module for ``obj``'s framework, or None (the NumPy adapter then)."""
    kind = type(obj)
    try:
        return _by_type[kind]
    except KeyError:
        pass
    chosen: ModuleType | None = None
    for cls in kind.__mro__:
        framework = cls.__module__.partition(".")[0]
        module_name = ADAPTER_MODULES.get(framework)
        if module_name is not None:
            chosen = _load(module_name)
            break
    with _lock:
        _by_type[kind] = chosen
    return chosen


def _builtin() -> ModuleType:
    from rankscribe.collector.adapters import numpy as builtin  # noqa: PLC0415 - cycle

    return builtin


def network_view(obj: object) -> NetworkView | None:
    """The view of a network, or None when ``obj`` is None or offers nothing readable."""
    if obj is None:
        return None
    adapter = adapter_for(obj)
    view = adapter.network_view(obj) if adapter is not None else None
    result: NetworkView | None = view if view is not None else _builtin().network_view(obj)
    return result


def optimizer_view(obj: object) -> OptimizerView | None:
    """The view of an optimizer, or None."""
    if obj is None:
        return None
    adapter = adapter_for(obj)
    view = adapter.optimizer_view(obj) if adapter is not None else None
    result: OptimizerView | None = view if view is not None else _builtin().optimizer_view(obj)
    return result


def dataset_view(obj: object) -> DatasetView | None:
    """The view of a dataset, or None."""
    if obj is None:
        return None
    adapter = adapter_for(obj)
    view = adapter.dataset_view(obj) if adapter is not None else None
    result: DatasetView | None = view if view is not None else _builtin().dataset_view(obj)
    return result


def to_numpy(value: object) -> npt.NDArray[Any]:
    """``value`` as a NumPy array (framework tensors are moved to the host).

    Raises TypeError (a :class:`~rankscribe.collector.errors.CollectorTypeError`)
    when ``value`` holds no numbers.
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return np.asarray(value)
    adapter = adapter_for(value)
    if adapter is not None:
        converted = adapter.to_numpy(value)
        if converted is not None:
            return np.asarray(converted)
    array: npt.NDArray[Any] = _builtin().to_numpy(value)
    return array
