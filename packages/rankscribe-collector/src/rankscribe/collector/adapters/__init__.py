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
defines four functions (or a ``create_adapter()`` returning an object with
these methods, one per :class:`AdapterRegistry`, for an adapter that remembers
what it read), each returning ``None`` for objects it does not handle::

    def network_view(obj: Any) -> NetworkView | None: ...
    def optimizer_view(obj: Any) -> OptimizerView | None: ...
    def dataset_view(obj: Any) -> DatasetView | None: ...
    def to_numpy(value: Any) -> numpy.ndarray | None: ...

The adapter is chosen by the *top-level module of the object's type* (or of a
base class, for user subclasses of ``torch.nn.Module``): an object whose class
comes from ``torch`` is handed to the PyTorch adapter,
imported only then, so the collector never imports a framework a script does
not use. :func:`rankscribe.collector.register_adapter` adds another framework. Whatever no adapter
claims goes to the built-in adapter, which reads the NumPy containers and
duck-typed objects (``named_parameters()``, ``get_dataset_size()``, ...).

A network that describes its own graph gives a ``GraphDescription``
(``_graph``, re-exported by :mod:`rankscribe.collector`), which the adapters
turn into the ``GraphProto`` MindInsight draws.

``graph_builder`` (in ``_graph_builder``) gives ``SummaryRecord(network=...)`` the graph
of a network the collector knows (the writer finds it through the
``rankscribe.graph_builders`` entry point, which names it here).

An :class:`AdapterRegistry` does the choosing and holds what the adapters
remember; each ``SummaryCollector`` and ``TrainLoop`` owns one, and an adapter's
author can ask one for the views of an object. ``network_parameters`` (in
``_parameters``) reads the parameters a checkpoint or a landscape file stores, with
their dtypes exact.

May import: ``rankscribe.collector.errors``, ``rankscribe.collector._checks``,
the ranks and writer packages, and a framework only inside its own adapter
module. Nothing else of the collector (the rest of it imports this package).
"""

from __future__ import annotations

# The target of the rankscribe.graph_builders entry point (pyproject.toml): the writer
# loads it by that name; not part of the API.
from rankscribe.collector.adapters._graph_builder import graph_builder  # noqa: F401
from rankscribe.collector.adapters._registry import (
    ADAPTER_MODULES,  # noqa: F401 - the table behind register_adapter; not public
    Adapter,
    AdapterRegistry,
)
from rankscribe.collector.adapters._views import DatasetView, NetworkView, OptimizerView

__all__ = [
    "Adapter",
    "AdapterRegistry",
    "DatasetView",
    "NetworkView",
    "OptimizerView",
]
