"""The PyTorch adapter: modules, optimizers, data loaders and tensors as the collector reads them.

:mod:`rankscribe.collector.adapters` imports this module only when it meets an
object whose class comes from ``torch`` (install ``rankscribe-collector[torch]``
and pin torch yourself). What each function reads:

- :func:`network_view`, for an ``nn.Module``: the class name, the
  ``named_parameters()`` as detached CPU arrays, and the graph that
  ``torch.fx.symbolic_trace`` finds, traced once per module instance. A module
  fx cannot trace (data-dependent control flow, ...) has no graph: the first
  module of each class to fail says why in one warning, and the rest of the
  run is collected as usual. ``DataParallel``, ``DistributedDataParallel``
  and ``torch.compile``'s wrapper are read through to the module they wrap.
- :func:`optimizer_view`, for a ``torch.optim.Optimizer``: the class name, the
  parameters of every group with their names (see :class:`TorchOptimizer`),
  and ``param_groups[0]['lr']``.
- :func:`dataset_view`, for a ``DataLoader`` (or a bare ``Dataset`` iterated
  directly): batches per epoch, batch size, the dataset's ``root`` or ``path``,
  and a description of the pipeline for the lineage's dataset graph.
- :func:`to_numpy`, for tensors: detached, on the host, as NumPy arrays.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy.typing as npt
import torch
import torch.fx
from torch.utils.weak import WeakIdKeyDictionary

from rankscribe.collector.adapters import DatasetView
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.collector.graph import (
    GraphDescription,
    GraphNode,
    GraphParameter,
    build_graph_proto,
)
from rankscribe.writer.pb import anf_ir_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "TorchNetwork",
    "TorchOptimizer",
    "dataset_view",
    "network_view",
    "optimizer_view",
    "to_numpy",
]

# Root scope of every node, as MindSpore names the scope of a network's top cell.
ROOT_SCOPE = "Default"
# Dataset wrappers (Subset, ConcatDataset, user wrappers) are followed this deep at most.
_DATASET_DEPTH = 8

# Keyed by tensor/module identity and held weakly: torch tensors compare element-wise,
# so an ordinary dict or WeakKeyDictionary cannot hold them, and a finished run's model
# must not be kept alive by the collector.
_traced: Any = WeakIdKeyDictionary()  # nn.Module -> GraphProto, or None when tracing failed
_parameter_names: Any = WeakIdKeyDictionary()  # parameter -> its name in the last network read
_untraceable_classes: weakref.WeakSet[type] = weakref.WeakSet()
_substituted_dtypes: set[str] = set()


# ----------------------------------------------------------------------- tensors


def _host_array(tensor: Any) -> npt.NDArray[Any]:
    """``tensor`` detached, dense, on the host, in a dtype NumPy has."""
    tensor = tensor.detach()
    try:
        if tensor.layout != torch.strided:
            tensor = tensor.to_dense()
        if tensor.is_quantized:
            tensor = tensor.dequantize()
        substitute = _numpy_substitute(tensor.dtype)
        if substitute is not None:
            _note_substitute(tensor.dtype, substitute)
            tensor = tensor.to(substitute)
        # force=True also resolves the conjugate and negative views .numpy() refuses.
        array: npt.NDArray[Any] = tensor.numpy(force=True)
    except (TypeError, RuntimeError) as error:  # NotImplementedError is a RuntimeError
        raise CollectorTypeError(
            f"a {tensor.dtype} tensor cannot be read as a NumPy array: {error}"
        ) from error
    return array


def _note_substitute(dtype: Any, substitute: Any) -> None:
    lacking = str(dtype).removeprefix("torch.")
    if lacking not in _substituted_dtypes:
        _substituted_dtypes.add(lacking)
        logger.info("%s tensors are recorded as %s: NumPy has no %s.",
                    lacking, str(substitute).removeprefix("torch."), lacking)


def _numpy_substitute(dtype: Any) -> Any:
    """The dtype to convert to first, for dtypes NumPy lacks (bfloat16, float8, complex32)."""
    if dtype.is_floating_point and dtype not in (torch.float16, torch.float32, torch.float64):
        return torch.float32  # exact for bfloat16 and the float8 formats
    if dtype == torch.complex32:
        return torch.complex64
    return None


def to_numpy(value: object) -> npt.NDArray[Any] | None:
    """A tensor (or ``nn.Parameter``) as a host NumPy array; None for other torch objects.

    bfloat16 and the float8 formats become float32 (exactly: float32 holds every
    value they can), complex32 becomes complex64. A CPU tensor's array may share
    its memory: copy it to keep it past the current step.
    """
    if not isinstance(value, torch.Tensor):
        return None
    return _host_array(value)


# ---------------------------------------------------------------------- networks


def _unwrapped(module: Any) -> Any:
    """The module a parallel or compiled wrapper holds (names and graph come from it)."""
    parallel = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    for _ in range(4):
        if isinstance(module, parallel):
            module = module.module
        elif isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
            module = module._orig_mod  # torch.compile's OptimizedModule
        else:
            break
    return module


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
        held = [*module.get_submodule(node.target).parameters(),
                *module.get_submodule(node.target).buffers()]
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
    """The graph of ``module`` as ``torch.fx.symbolic_trace`` records one call of ``forward``.

    One node per fx node except ``output`` (whose inputs become the graph's
    outputs): placeholders are ``Input`` nodes, ``get_attr`` nodes are ``Load``
    nodes, calls are named after the module class (``Linear``) or the function
    or method (``relu``, ``flatten``). A node's scope is ``Default/`` and the
    path of the module it belongs to; a module call's inputs include the
    module's own parameters and buffers. Raises what tracing raises.
    """
    traced = torch.fx.symbolic_trace(module)
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


def _trace(module: Any) -> anf_ir_pb2.GraphProto | None:
    try:
        description = fx_graph_description(module)
    except Exception as error:
        # Tracing runs the user's forward on proxies: whatever it raises (TraceError for
        # data-dependent control flow, TypeError, NotImplementedError, ...) only means
        # "no graph", never a stopped run.
        kind = type(module)
        if kind not in _untraceable_classes:
            _untraceable_classes.add(kind)
            logger.warning(
                "The graph of %s cannot be recorded: torch.fx cannot trace its forward "
                "(%s: %s). Data-dependent control flow is the usual cause; the rest of the "
                "run is collected as usual.", kind.__name__, type(error).__name__, error,
            )
        return None
    return build_graph_proto(description)


def traced_graph(module: Any) -> anf_ir_pb2.GraphProto | None:
    """``module``'s graph, traced on the first call for this instance and kept."""
    if module in _traced:
        graph = _traced[module]
    else:
        graph = _trace(module)
        _traced[module] = graph
    if graph is None:
        return None
    copy = anf_ir_pb2.GraphProto()
    copy.CopyFrom(graph)  # callers may edit theirs; the kept one stays as traced
    return copy


def _remember_parameter_names(module: Any) -> None:
    for name, parameter in module.named_parameters():
        _parameter_names[parameter] = name


class TorchNetwork:
    """The :class:`~rankscribe.collector.adapters.NetworkView` of an ``nn.Module``."""

    def __init__(self, module: Any) -> None:
        self.module = _unwrapped(module)
        self.name: str = type(self.module).__name__
        _remember_parameter_names(self.module)

    def parameters(self) -> list[tuple[str, Any]]:
        """``named_parameters()``, detached, on the host (bfloat16 as float32)."""
        return [(name, _host_array(value)) for name, value in self.module.named_parameters()]

    def graph(self) -> anf_ir_pb2.GraphProto | None:
        """The fx graph, or None (with one warning per class) when fx cannot trace it."""
        return traced_graph(self.module)


def network_view(obj: object) -> TorchNetwork | None:
    return TorchNetwork(obj) if isinstance(obj, torch.nn.Module) else None


# -------------------------------------------------------------------- optimizers


class TorchOptimizer:
    """The :class:`~rankscribe.collector.adapters.OptimizerView` of a ``torch.optim.Optimizer``.

    Parameters are those of every param group, in order. Each one's name is,
    first found:

    1. the name the optimizer was given: ``Optimizer(model.named_parameters())``
       keeps them in the group's ``param_names`` (torch >= 2.6);
    2. its name in the last ``nn.Module`` this adapter read (the collector reads
       the training network for its graph before the first histograms);
    3. otherwise ``param_groups.<g>.params.<i>``, where it sits in the optimizer,
       with one warning saying how to get real names.

    A name is fixed when the parameter is first seen, so a tag does not change
    in the middle of a run.
    """

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.name: str = type(optimizer).__name__
        self._names: Any = WeakIdKeyDictionary()  # parameter -> name, fixed at first sight
        self._warned = False

    def _name(self, parameter: Any, group: int, index: int, given: object) -> str:
        if isinstance(given, (list, tuple)) and index < len(given):
            name = given[index]
            if isinstance(name, str):
                return name
        known = _parameter_names.get(parameter)
        if isinstance(known, str):
            return known
        if not self._warned:
            self._warned = True
            logger.warning(
                "%s does not know the names of its parameters and no network read so far holds "
                "them, so they are named param_groups.<group>.params.<index>. Build the "
                "optimizer from model.named_parameters() to record the parameter names.",
                self.name,
            )
        return f"param_groups.{group}.params.{index}"

    def parameters(self) -> list[tuple[str, Any]]:
        """``(name, host array)`` of every parameter the optimizer updates."""
        pairs: list[tuple[str, Any]] = []
        for group_index, group in enumerate(self.optimizer.param_groups):
            given = group.get("param_names")
            for index, parameter in enumerate(group["params"]):
                if parameter in self._names:
                    name = self._names[parameter]
                else:
                    name = self._name(parameter, group_index, index, given)
                    self._names[parameter] = name
                pairs.append((name, _host_array(parameter)))
        return pairs

    def learning_rate(self) -> float | None:
        """``param_groups[0]['lr']`` (a float or a tensor), or None."""
        groups = self.optimizer.param_groups
        rate = groups[0].get("lr") if groups else None
        if isinstance(rate, torch.Tensor):
            flat = rate.detach().reshape(-1)
            return float(flat[0]) if flat.numel() else None
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return float(rate)
        return None


def optimizer_view(obj: object) -> TorchOptimizer | None:
    return TorchOptimizer(obj) if isinstance(obj, torch.optim.Optimizer) else None


# -------------------------------------------------------------------------- data


def _wrapped_datasets(dataset: Any) -> list[Any]:
    """The datasets ``dataset`` reads from: ConcatDataset's ``datasets``, Subset's ``dataset``."""
    inner = getattr(dataset, "datasets", None)
    if isinstance(inner, (list, tuple)):
        return [item for item in inner if isinstance(item, torch.utils.data.Dataset)]
    inner = getattr(dataset, "dataset", None)
    return [inner] if isinstance(inner, torch.utils.data.Dataset) else []


def _datasets(dataset: Any, depth: int = 0) -> Iterator[Any]:
    """``dataset`` and those it wraps, depth first."""
    yield dataset
    if depth < _DATASET_DEPTH:
        for inner in _wrapped_datasets(dataset):
            yield from _datasets(inner, depth + 1)


def _own_path(dataset: Any) -> str | None:
    for attribute in ("root", "path"):
        value = getattr(dataset, attribute, None)
        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
    return None


def _dataset_path(dataset: Any) -> str | None:
    """The first ``root``/``path`` of the dataset or of one it wraps."""
    for item in _datasets(dataset):
        path = _own_path(item)
        if path is not None:
            # The original records the directory of a dataset file.
            return os.path.dirname(path) if os.path.isfile(path) else path
    return None


def _length(sized: Any) -> int | None:
    try:
        return len(sized)
    except TypeError:  # an IterableDataset without __len__
        return None


def _dataset_node(dataset: Any, depth: int = 0) -> dict[str, Any]:
    """One dataset as a node of the lineage's dataset graph (MindInsight's form)."""
    kind = type(dataset)
    node: dict[str, Any] = {"op_type": kind.__name__, "op_module": kind.__module__}
    size = _length(dataset)
    if size is not None:
        node["num_samples"] = size
    path = _own_path(dataset)
    if path is not None:
        node["dataset_dir"] = path
    inner = _wrapped_datasets(dataset) if depth < _DATASET_DEPTH else []
    node["children"] = [_dataset_node(item, depth + 1) for item in inner]
    return node


def _shuffles(sampler: Any) -> bool:
    flag = getattr(sampler, "shuffle", None)  # DistributedSampler says it itself
    if isinstance(flag, bool):
        return flag
    return isinstance(sampler, torch.utils.data.RandomSampler)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _loader_batch_size(loader: Any) -> int | None:
    batch_size = _int_or_none(loader.batch_size)
    if batch_size is None:  # a batch_sampler given by the user
        batch_size = _int_or_none(getattr(loader.batch_sampler, "batch_size", None))
    return batch_size


def _loader_view(loader: Any) -> DatasetView:
    kind, sampler = type(loader), loader.sampler
    batch_size = _loader_batch_size(loader)
    graph = {
        "op_type": kind.__name__,
        "op_module": kind.__module__,
        "batch_size": batch_size,
        "shuffle": _shuffles(sampler),
        "drop_last": bool(loader.drop_last),
        "num_workers": int(loader.num_workers),
        "sampler": {"sampler_name": type(sampler).__name__,
                    "sampler_module": type(sampler).__module__},
        "children": [_dataset_node(loader.dataset)],
    }
    batches = _length(loader)
    # Samples per epoch: what the sampler draws (a DistributedSampler's is this
    # rank's share), less what drop_last leaves out.
    samples = _length(sampler)
    if loader.drop_last and batches is not None and batch_size is not None:
        samples = batches * batch_size
    return DatasetView(batches, batch_size, _dataset_path(loader.dataset), graph, samples)


def dataset_view(obj: object) -> DatasetView | None:
    """A ``DataLoader``; or a ``Dataset`` iterated directly (one item per step, size unknown)."""
    if isinstance(obj, torch.utils.data.DataLoader):
        return _loader_view(obj)
    if isinstance(obj, torch.utils.data.Dataset):
        return DatasetView(_length(obj), None, _dataset_path(obj), _dataset_node(obj))
    return None
