"""Where ``SummaryRecord(network=...)`` gets a network's graph.

A network with a ``graph_proto()`` method gives its graph itself. Any other
network is offered to the *graph builders* installed in the
``rankscribe.graph_builders`` entry-point group (rankscribe-collector declares
one that knows ``torch.nn.Module`` and its ``ArrayNetwork``), so the writer
never imports the packages that know frameworks. A builder is called with the
network and returns ``None`` when it does not know it, or a function of no
arguments returning the graph (a ``GraphProto``, a ``ModelProto``, their bytes,
or ``None`` when the network cannot describe one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points

from rankscribe.writer.errors import WriterTypeError

logger = logging.getLogger(__name__)

__all__ = ["GROUP", "RecordGraph", "graph_source"]

GROUP = "rankscribe.graph_builders"

GraphFunction = Callable[[], object]


def _installed_builders() -> list[tuple[str, Callable[[object], GraphFunction | None]]]:
    builders = []
    for point in entry_points(group=GROUP):
        try:
            builders.append((point.name, point.load()))
        except Exception as error:  # a broken plugin must not break the writer
            logger.warning(
                "The graph builder %r (%s) cannot be loaded: %s", point.name, point.value, error
            )
    return builders


def graph_source(network: object, argument: str = "network") -> GraphFunction:
    """The function giving ``network``'s graph; raises WriterTypeError when none knows it."""
    produce = getattr(network, "graph_proto", None)
    if callable(produce):
        return produce  # type: ignore[no-any-return]
    builders = _installed_builders()
    for _, builder in builders:
        found = builder(network)
        if found is not None:
            return found
    installed = ", ".join(name for name, _ in builders) or "none"
    raise WriterTypeError(
        f"For 'SummaryRecord', the argument '{argument}' must be a network whose graph can "
        "be written: an object with a graph_proto() method returning a GraphProto, a "
        "ModelProto or its bytes, or a network a graph builder knows (with "
        "rankscribe-collector installed: a torch.nn.Module or a "
        "rankscribe.collector.ArrayNetwork), but got "
        f"{type(network).__name__} (graph builders installed: {installed})."
    )


class RecordGraph:
    """The graph a record writes once: its network's, else record()'s train_network's."""

    def __init__(self, network: object) -> None:
        # Checked here, in the constructor: a network nothing knows is refused at once.
        self._network = graph_source(network) if network is not None else None
        self._train: tuple[object, GraphFunction | None] | None = None

    def produce(self, train_network: object) -> object:
        """The graph (any form ``graph_bytes`` reads), or None when there is none to write."""
        function = self._network
        if function is None and train_network is not None:
            if self._train is None or self._train[0] is not train_network:
                # A train_network nothing knows is skipped, as one without graph_proto() was.
                try:
                    found: GraphFunction | None = graph_source(train_network, "train_network")
                except WriterTypeError:
                    found = None
                self._train = (train_network, found)
            function = self._train[1]
        return function() if function is not None else None
