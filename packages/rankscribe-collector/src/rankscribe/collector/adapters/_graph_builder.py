"""The graph of a network for ``SummaryRecord(network=...)``, without the writer importing us.

The collector declares :func:`graph_builder` in the ``rankscribe.graph_builders``
entry-point group; the writer looks that group up when a network has no
``graph_proto()`` method. The protocol: ``graph_builder(network)`` returns
``None`` when it does not know ``network``, and otherwise a function of no
arguments that returns the graph (a ``GraphProto``), or ``None`` when the
network cannot describe one. The graph is built only when that function is
called, at the writer's first ``record``, so a ``SummaryRecord`` made before
the first forward pass sees the network as it is then.
"""

from __future__ import annotations

from collections.abc import Callable

from rankscribe.collector.adapters._registry import AdapterRegistry
from rankscribe.writer.pb import anf_ir_pb2

__all__ = ["graph_builder"]


def graph_builder(network: object) -> Callable[[], anf_ir_pb2.GraphProto | None] | None:
    """A function giving ``network``'s graph, or None when the collector does not know it.

    Known networks: a framework's network that an adapter reads (a
    ``torch.nn.Module``, traced with ``torch.fx``), and any object that
    describes its graph itself (:class:`~rankscribe.collector.ArrayNetwork`,
    an object with ``describe_graph()``).
    """
    registry = AdapterRegistry()
    if registry.adapter_for(network) is None and not callable(
        getattr(network, "describe_graph", None)
    ):
        # Parameters alone (a dict of arrays, say) make no network whose graph can be drawn.
        return None
    view = registry.network_view(network)
    return view.graph if view is not None else None
