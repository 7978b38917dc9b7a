"""The graph of an ``nn.Module`` as ``torch.fx`` traces it, in the collector's graph form."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.utils.weak import WeakIdKeyDictionary

from rankscribe.collector.adapters._graph import (
    GraphDescription,
    GraphNode,
    GraphParameter,
    build_graph_proto,
)
from rankscribe.ranks import RanksError, detect
from rankscribe.writer import histogram_summary, image_summary, scalar_summary, tensor_summary
from rankscribe.writer.pb import anf_ir_pb2

# One logger name for the whole PyTorch adapter, whichever private module speaks.
logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = ["ROOT_SCOPE", "GraphTracer", "fx_graph_description", "untraceable_cause"]

# Root scope of every node, as MindSpore names the scope of a network's top cell.
ROOT_SCOPE = "Default"
# Classes already warned about, once per process as the warnings module does: this only
# keeps the log short and changes nothing any run records.
_untraceable_classes: weakref.WeakSet[type] = weakref.WeakSet()


#: The summary operators a ``forward`` may call (``docs/collector-schedule.md``, "Summary
#: operators in a network"), by the names MindSpore's graphs give those operators. The
#: tracer steps over them: each becomes one node of that type, never run on the tracer's
#: proxies (running one would read a proxy's values, which tracing cannot give).
_SUMMARY_OPERATORS = {
    scalar_summary: "ScalarSummary",
    tensor_summary: "TensorSummary",
    image_summary: "ImageSummary",
    histogram_summary: "HistogramSummary",
}


def _trace(module: Any) -> Any:
    """``torch.fx.symbolic_trace(module)``, with the summary operators as leaf calls."""
    tracer = torch.fx.Tracer(autowrap_functions=tuple(_SUMMARY_OPERATORS))
    graph = tracer.trace(module)
    name = module.__class__.__name__ if isinstance(module, torch.nn.Module) else "traced"
    return torch.fx.GraphModule(tracer.root, graph, name)


def _named_tensors(module: Any) -> dict[str, Any]:
    """Parameters, then buffers (BatchNorm statistics are weights of the graph too)."""
    tensors: dict[str, Any] = {}
    seen: set[int] = set()
    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        if id(tensor) not in seen:  # a tied weight keeps its first name
            seen.add(id(tensor))
            tensors[name] = tensor
    return tensors


def _graph_parameter(name: str, tensor: Any) -> GraphParameter:
    if torch.nn.parameter.is_lazy(tensor):
        return GraphParameter(name)  # shape unknown until the first forward
    dtype = str(tensor.dtype).removeprefix("torch.")
    return GraphParameter(name, tuple(int(size) for size in tensor.shape), dtype)


def _op_type(module: Any, node: Any) -> str:
    if node.op == "placeholder":
        return "Input"
    if node.op == "get_attr":
        return "Load"  # MindSpore's name for reading a parameter inside a graph
    if node.op == "call_module":
        return type(module.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return str(node.target)
    operator = _SUMMARY_OPERATORS.get(node.target) if node.op == "call_function" else None
    if operator is not None:
        return operator
    name = getattr(node.target, "__name__", None)
    return name if isinstance(name, str) and name else str(node.target)


def _module_path(node: Any) -> str:
    """The dotted path of the module whose ``forward`` made ``node`` ("" at the top)."""
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path, last = next(reversed(stack.items()))
    # Values are (path, class) in recent torch; older ones keyed the stack by path.
    if isinstance(last, tuple) and last and isinstance(last[0], str):
        path = last[0]
    return path if isinstance(path, str) else ""


def _scope(node: Any) -> str:
    path = _module_path(node)
    return "/".join([ROOT_SCOPE, *path.split(".")]) if path else ROOT_SCOPE


def _attribute(module: Any, target: str) -> Any:
    value = module
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def _weights(module: Any, node: Any, names_by_id: dict[int, str]) -> list[str]:
    """The parameters and buffers a node reads, by their names in ``module``."""
    if node.op == "call_module":
        held = [
            *module.get_submodule(node.target).parameters(),
            *module.get_submodule(node.target).buffers(),
        ]
    elif node.op == "get_attr":
        held = [_attribute(module, node.target)]
    else:
        return []
    return [names_by_id[id(tensor)] for tensor in held if id(tensor) in names_by_id]


def _node_names(nodes: Sequence[Any], tensor_names: set[str]) -> dict[Any, str]:
    """fx node names, renamed where a top-level parameter has the same name."""
    used = tensor_names | {node.name for node in nodes}
    names: dict[Any, str] = {}
    for node in nodes:
        name = node.name
        if name in tensor_names:  # e.g. get_attr of `self.weight` is a node named "weight"
            name, count = f"{node.name}_node", 1
            while name in used:
                name, count = f"{node.name}_node{count}", count + 1
            used.add(name)
        names[node] = name
    return names


def fx_graph_description(module: Any) -> GraphDescription:
    """The graph of ``module`` as ``torch.fx`` records one call of ``forward``.

    One node per fx node except ``output`` (whose inputs become the graph's
    outputs): placeholders are ``Input`` nodes, ``get_attr`` nodes are ``Load``
    nodes, calls are named after the module class (``Linear``) or the function
    or method (``relu``, ``flatten``), a summary operator after MindSpore's
    operator (``ScalarSummary``). A node's scope is ``Default/`` and the
    path of the module it belongs to; a module call's inputs include the
    module's own parameters and buffers. Raises what tracing raises.
    """
    traced = _trace(module)
    tensors = _named_tensors(module)
    names_by_id = {id(tensor): name for name, tensor in tensors.items()}
    fx_nodes = list(traced.graph.nodes)
    names = _node_names(fx_nodes, set(tensors))
    nodes: list[GraphNode] = []
    outputs: tuple[str, ...] = ()
    for node in fx_nodes:
        sources = [names[source] for source in node.all_input_nodes]
        if node.op == "output":
            outputs = tuple(sources)
            continue
        inputs = dict.fromkeys([*sources, *_weights(module, node, names_by_id)])
        nodes.append(GraphNode(names[node], _op_type(module, node), _scope(node), tuple(inputs)))
    return GraphDescription(
        nodes=tuple(nodes),
        parameters=tuple(_graph_parameter(name, tensor) for name, tensor in tensors.items()),
        outputs=outputs,
        name=type(module).__name__,
    )


class GraphTracer:
    """Graphs traced once per module instance (one warning per class fx cannot trace)."""

    def __init__(self) -> None:
        # Keyed by module identity and held weakly: a finished run's model must not be
        # kept alive by the collector.
        self._traced: Any = WeakIdKeyDictionary()  # nn.Module -> GraphProto, or None

    def _trace(self, module: Any) -> anf_ir_pb2.GraphProto | None:
        try:
            description = fx_graph_description(module)
        except Exception as error:
            # Tracing runs the user's forward on proxies: whatever it raises (TraceError for
            # data-dependent control flow, TypeError, NotImplementedError, ...) only means
            # "no graph", never a stopped run.
            kind = type(module)
            if kind not in _untraceable_classes:
                _untraceable_classes.add(kind)
                # The same script runs on every rank: rank 0 says it, the others at DEBUG.
                logger.log(
                    logging.WARNING if _launcher_rank() == 0 else logging.DEBUG,
                    "The graph of %s cannot be recorded: %s (%s: %s); the rest of the run is "
                    "collected as usual.",
                    kind.__name__,
                    untraceable_cause(module, error),
                    type(error).__name__,
                    error,
                )
            return None
        return build_graph_proto(description)

    def failed(self, module: Any) -> bool:
        """Whether ``module`` was traced and has no graph (its class's warning said why)."""
        return module in self._traced and self._traced[module] is None

    def graph(self, module: Any) -> anf_ir_pb2.GraphProto | None:
        """``module``'s graph, traced on the first call for this instance and kept."""
        if module in self._traced:
            graph = self._traced[module]
        else:
            graph = self._trace(module)
            self._traced[module] = graph
        if graph is None:
            return None
        copy = anf_ir_pb2.GraphProto()
        copy.CopyFrom(graph)  # callers may edit theirs; the kept one stays as traced
        return copy


#: Packages whose modules' ``forward`` is a stand-in, not the network's: a LightningModule
#: whose training step calls its layers itself keeps Lightning's ``forward(*args, **kwargs)``,
#: on which fx fails with a TraceError about iterating a Proxy ("control flow" in its text).
_STAND_IN_FORWARDS = frozenset({"torch", "lightning", "pytorch_lightning"})


def untraceable_cause(module: Any, error: BaseException) -> str:
    """Why ``torch.fx`` could not trace ``module``, in the words a user can act on."""
    owner = next((kind for kind in type(module).__mro__ if "forward" in vars(kind)), None)
    if owner is None or owner.__module__.partition(".")[0] in _STAND_IN_FORWARDS:
        return (
            f"{type(module).__name__} defines no forward of its own (its training step calls "
            "its layers itself), so there is no forward to trace"
        )
    if isinstance(error, torch.fx.proxy.TraceError) and "control flow" in str(error):
        return (
            "its forward branches on the value of a tensor (data-dependent control flow), "
            "which torch.fx.symbolic_trace cannot follow"
        )
    forward = getattr(type(module), "forward", None)
    wrapped = getattr(forward, "__wrapped__", None)
    if wrapped is not None:
        return (
            f"the forward of {type(module).__name__} is wrapped by a decorator, which "
            "torch.fx.symbolic_trace cannot trace through (a Hugging Face model's forward "
            "is one)"
        )
    return "torch.fx.symbolic_trace cannot trace its forward"


def _launcher_rank() -> int:
    try:
        return detect().rank
    except (RanksError, ValueError):
        return 0
