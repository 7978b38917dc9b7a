"""The built-in adapter: objects read by what they offer (duck typing).

Parameters from ``named_parameters()``, ``parameters_and_names()``, a
``parameters`` mapping or a mapping of arrays; a graph from ``graph_proto()``
or ``describe_graph()``; sizes from ``get_dataset_size()`` / ``len()`` and
``get_batch_size()`` / ``batch_size``; a path from ``dataset_dir`` /
``dataset_file`` / ``dataset_path``; a description from ``dataset_graph`` or
``to_json()``. The NumPy containers of :mod:`._arrays` are read this way too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.collector._checks import is_int
from rankscribe.collector.adapters._arrays import ArrayNetwork, ArrayOptimizer
from rankscribe.collector.adapters._graph import build_graph_proto
from rankscribe.collector.adapters._views import DatasetView, content_digest
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.writer.pb import anf_ir_pb2

# The adapters' public name: where the log lines come from is not a private module.
logger = logging.getLogger("rankscribe.collector.adapters")

__all__ = ["dataset_view", "network_view", "optimizer_view", "to_numpy"]


def _pairs(source: object) -> list[tuple[str, Any]] | None:
    """(name, value) pairs from a mapping, a list of pairs, or objects with name and data."""
    if isinstance(source, Mapping):
        return [(str(name), value) for name, value in source.items()]
    if not isinstance(source, Sequence) or isinstance(source, (str, bytes)):
        return None
    pairs: list[tuple[str, Any]] = []
    for item in source:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs.append(item)
        elif isinstance(getattr(item, "name", None), str) and hasattr(item, "data"):
            pairs.append((item.name, item.data))  # MindSpore-style Parameter
        else:
            return None
    return pairs


def _call(obj: object, method: str) -> Any:
    function = getattr(obj, method, None)
    return function() if callable(function) else None


def _parameters_of(obj: object) -> list[tuple[str, Any]] | None:
    for method in ("named_parameters", "parameters_and_names"):
        produced = _call(obj, method)
        if produced is not None:
            return _pairs(list(produced))
    attribute = getattr(obj, "parameters", None)
    if callable(attribute) and not isinstance(attribute, Mapping):
        return None
    if attribute is not None:
        return _pairs(attribute)
    return _pairs(obj) if isinstance(obj, Mapping) else None


def _graph_of(obj: object) -> anf_ir_pb2.GraphProto | None:
    produce = getattr(obj, "graph_proto", None)
    if callable(produce):
        value = produce()
        if value is None:
            return None
        if isinstance(value, anf_ir_pb2.GraphProto):
            return value
        if isinstance(value, anf_ir_pb2.ModelProto):
            return value.graph
        if isinstance(value, (bytes, bytearray)):
            return anf_ir_pb2.ModelProto.FromString(bytes(value)).graph
        raise CollectorTypeError(
            f"{type(obj).__name__}.graph_proto() must return a GraphProto, a ModelProto or its "
            f"bytes, but returned {type(value).__name__}."
        )
    description = _call(obj, "describe_graph")
    return build_graph_proto(description) if description is not None else None


def _display_name(obj: object) -> str:
    name = getattr(obj, "name", None)
    if isinstance(obj, (ArrayNetwork, ArrayOptimizer)) and isinstance(name, str):
        return name
    return type(obj).__name__


class _Network:
    def __init__(self, obj: object) -> None:
        self._obj = obj
        self.name = _display_name(obj)

    def parameters(self) -> list[tuple[str, Any]]:
        return _parameters_of(self._obj) or []

    def graph(self) -> anf_ir_pb2.GraphProto | None:
        return _graph_of(self._obj)


class _Optimizer:
    def __init__(self, obj: object) -> None:
        self._obj = obj
        self.name = _display_name(obj)

    def parameters(self) -> list[tuple[str, Any]]:
        return _parameters_of(self._obj) or []

    def learning_rate(self) -> float | None:
        return _first_number(getattr(self._obj, "learning_rate", None))


def _first_number(value: object) -> float | None:
    """The first element of a number, array or tensor; None for schedules and the rest."""
    if value is None or isinstance(value, bool):
        return None
    if callable(value) and not hasattr(value, "shape"):
        return None  # a learning-rate schedule: the original leaves it unset too
    if isinstance(value, (int, float)):
        return float(value)
    data = getattr(value, "data", None)  # a Parameter-like wrapper
    if data is not None and not isinstance(value, np.ndarray) and not hasattr(value, "shape"):
        value = data
    try:
        array = to_numpy(value)
    except TypeError:
        return None
    flat = array.reshape(-1)
    return float(flat[0]) if flat.size and array.dtype.kind in "biuf" else None


def _int_or_none(value: object) -> int | None:
    return value if is_int(value) else None


def _dataset_graph(obj: object) -> dict[str, Any] | None:
    graph = getattr(obj, "dataset_graph", None)
    if graph is None:
        graph = _call(obj, "to_json")
    if isinstance(graph, str):
        try:
            graph = json.loads(graph)
        except json.JSONDecodeError:
            logger.warning(
                "%s.to_json() is not JSON; no dataset graph is recorded.", type(obj).__name__
            )
            return None
    return dict(graph) if isinstance(graph, Mapping) else None


def _dataset_path(obj: object) -> str | None:
    for attribute in ("dataset_dir", "dataset_file", "dataset_path"):
        value = getattr(obj, attribute, None)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, (str, os.PathLike)):
            path = os.fspath(value)
            # The original records the directory of a dataset file.
            return os.path.dirname(path) if os.path.isfile(path) else path
    return None


def network_view(obj: object) -> _Network | None:
    readable = (
        _parameters_of(obj) is not None
        or callable(getattr(obj, "graph_proto", None))
        or callable(getattr(obj, "describe_graph", None))
    )
    return _Network(obj) if readable else None


def optimizer_view(obj: object) -> _Optimizer | None:
    return _Optimizer(obj)


def dataset_view(obj: object) -> DatasetView:
    batches = _int_or_none(_call(obj, "get_dataset_size"))
    if batches is None and callable(getattr(obj, "__len__", None)):
        batches = len(obj)  # type: ignore[arg-type]
    batch_size = _int_or_none(_call(obj, "get_batch_size"))
    if batch_size is None:
        batch_size = _int_or_none(getattr(obj, "batch_size", None))
    samples = _int_or_none(getattr(obj, "num_samples", None))
    if samples is None:
        samples = _samples_in_batches(obj)
    sharding = getattr(obj, "sharding", None)
    sharding = sharding if sharding in ("shards", "whole") else None
    digest = getattr(obj, "content_digest", None) if sharding == "whole" else None
    if sharding is None and samples is not None and isinstance(obj, (list, tuple)):
        # A list of batches says nothing of how it was split: each rank reads all of its
        # own list, and the digest tells the merge the same list on every rank (counted
        # once) from a share per rank (summed). docs/layout.md, "Merge at rank 0".
        digest = _batches_digest(obj, samples)
        sharding = "whole" if digest is not None else None
    return DatasetView(
        batches,
        batch_size,
        _dataset_path(obj),
        _dataset_graph(obj),
        samples,
        sharding,
        digest if isinstance(digest, str) else None,
    )


def _batches_digest(batches: Sequence[Any], samples: int) -> str | None:
    """The digest of a list of batches: its sample count, the first and last batch's ends.

    Their first array's first and last rows (a few bytes however large the batches);
    None when one cannot be read as an array.
    """
    ends = []
    for batch in (batches[0], batches[-1]) if batches else ():
        first = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
        try:
            rows = to_numpy(first)
            ends += [
                np.ascontiguousarray(rows[0]).tobytes(),
                np.ascontiguousarray(rows[-1]).tobytes(),
            ]
        except Exception:  # a batch of the user's own type: no digest, the sizes are summed
            return None
    return content_digest(samples, ends)


def _samples_in_batches(obj: object) -> int | None:
    """Rows in a list or tuple of batches (the first dimension of each batch's first array).

    The lineage's dataset size counts samples (docs/collector-schedule.md, "Lineage");
    a plain list of batches says how many only through its arrays. None when a batch
    holds no array (its rows are unknown) or ``obj`` is no list or tuple.
    """
    if not isinstance(obj, (list, tuple)):
        return None
    total = 0
    for batch in obj:
        first = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
        shape = getattr(first, "shape", None)
        if not isinstance(shape, tuple) or not shape or not isinstance(shape[0], int):
            return None
        total += shape[0]
    return total


def to_numpy(value: object) -> npt.NDArray[Any]:
    """Arrays, numbers, and tensors offering ``asnumpy()``, ``detach()`` or ``numpy()``."""
    if isinstance(value, np.ndarray):
        return value
    converted: Any = value
    if callable(getattr(converted, "detach", None)):
        converted = converted.detach()
        if callable(getattr(converted, "cpu", None)):
            converted = converted.cpu()
    for method in ("asnumpy", "numpy"):
        convert: Callable[[], Any] | None = getattr(converted, method, None)
        if callable(convert):
            converted = convert()
            break
    if isinstance(converted, (str, bytes)) or converted is None:
        raise CollectorTypeError(f"expected numbers, but got {type(value).__name__}.")
    try:
        array = np.asarray(converted)
    except (TypeError, ValueError) as error:
        raise CollectorTypeError(
            f"expected numbers, but got {type(value).__name__}: {error}"
        ) from error
    if array.dtype.kind not in "biuf":
        raise CollectorTypeError(
            f"expected numbers, but got {type(value).__name__} of dtype {array.dtype}."
        )
    return array
