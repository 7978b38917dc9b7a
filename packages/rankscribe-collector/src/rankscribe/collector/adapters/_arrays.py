"""NumPy containers a training script without a framework hands to TrainLoop and the collector.

- :class:`ArrayNetwork`: named arrays (the weights, updated in place) and an
  optional graph description;
- :class:`ArrayOptimizer`: the parameters it updates and a learning rate
  (:meth:`ArrayOptimizer.step` applies plain SGD);
- :class:`ArrayDataset`: columns of equal length served in batches, with a
  batch size, an optional path and an optional description (its lineage
  dataset graph); :meth:`ArrayDataset.shard` gives one rank's share.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.collector._checks import (
    check_bool,
    check_optional_path,
    check_optional_text,
    is_int,
)
from rankscribe.collector.adapters._graph import GraphDescription, build_graph_proto
from rankscribe.collector.adapters._views import content_digest
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import split_evenly

__all__ = ["ArrayDataset", "ArrayNetwork", "ArrayOptimizer"]


def _named_arrays(argument: str, values: object) -> dict[str, npt.NDArray[Any]]:
    pairs = values.items() if isinstance(values, Mapping) else values
    if not isinstance(pairs, Iterable) or isinstance(pairs, (str, bytes)):
        raise CollectorTypeError(
            f"{argument} must be a dict of name to array or a list of (name, array) pairs, "
            f"but got {type(values).__name__}."
        )
    arrays: dict[str, npt.NDArray[Any]] = {}
    for index, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], str):
            raise CollectorTypeError(
                f"{argument}[{index}] must be a (name, array) pair with a str name, but got "
                f"{pair!r:.80}."
            )
        name, value = pair
        if name in arrays:
            raise CollectorValueError(f"{argument} has the name {name!r} twice.")
        arrays[name] = value if isinstance(value, np.ndarray) else np.asarray(value)
    return arrays


class ArrayNetwork:
    """A network made of named NumPy arrays.

    Args:
        parameters: name -> array (or (name, array) pairs). The arrays are kept
            as given, not copied, so updating them in place updates the network.
        graph: an optional :class:`~rankscribe.collector.adapters._graph.GraphDescription`
            (or its dict form); the collector then records the graph.
        name: the network name the lineage shows (default: the class name).
    """

    def __init__(
        self,
        parameters: Mapping[str, npt.ArrayLike] | Iterable[tuple[str, npt.ArrayLike]],
        graph: GraphDescription | Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        check_optional_text("name", name, owner="ArrayNetwork")
        self._parameters = _named_arrays("parameters", parameters)
        if graph is not None:
            build_graph_proto(graph)  # refuse a graph that cannot be drawn now, not later
        self._graph = graph
        self.name = name or type(self).__name__

    def named_parameters(self) -> list[tuple[str, npt.NDArray[Any]]]:
        return list(self._parameters.items())

    @property
    def parameters(self) -> dict[str, npt.NDArray[Any]]:
        return self._parameters

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        return self._parameters[name]

    def describe_graph(self) -> GraphDescription | Mapping[str, Any] | None:
        return self._graph

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self._parameters)} parameters)"


class ArrayOptimizer:
    """The parameters a training step updates, and its learning rate.

    Args:
        parameters: name -> array, (name, array) pairs, or an
            :class:`ArrayNetwork` (all of its parameters). Arrays are shared.
        learning_rate: a number (or a 1-element array); the lineage records it.
        name: the optimizer name the lineage shows (default: the class name).
    """

    def __init__(
        self,
        parameters: (
            Mapping[str, npt.ArrayLike] | Iterable[tuple[str, npt.ArrayLike]] | ArrayNetwork
        ),
        learning_rate: float | npt.ArrayLike = 0.01,
        name: str | None = None,
    ) -> None:
        check_optional_text("name", name, owner="ArrayOptimizer")
        source = parameters.parameters if isinstance(parameters, ArrayNetwork) else parameters
        self._parameters = _named_arrays("parameters", source)
        if isinstance(learning_rate, bool) or not np.issubdtype(
            np.asarray(learning_rate).dtype, np.number
        ):
            raise CollectorTypeError(
                f"learning_rate must be a number, but got {type(learning_rate).__name__} "
                f"{learning_rate!r:.80}."
            )
        self.learning_rate = learning_rate
        self.name = name or type(self).__name__

    @property
    def parameters(self) -> list[tuple[str, npt.NDArray[Any]]]:
        return list(self._parameters.items())

    def step(self, gradients: Mapping[str, npt.ArrayLike]) -> None:
        """Plain SGD, in place: ``parameter -= learning_rate * gradient`` for each given name."""
        rate = float(np.asarray(self.learning_rate).reshape(-1)[0])
        for name, gradient in gradients.items():
            if name not in self._parameters:
                raise CollectorValueError(
                    f"gradient for {name!r}, which is not a parameter of this optimizer "
                    f"({sorted(self._parameters)[:5]}...)."
                )
            self._parameters[name] -= rate * np.asarray(gradient)


class ArrayDataset:
    """Columns of equal length, served as batches (tuples with one slice per column).

    Args:
        columns: arrays with the same first dimension (e.g. images, labels).
        batch_size: rows per batch.
        drop_remainder: leave out a last, shorter batch.
        path: where the data came from (the lineage's ``*_dataset_path``).
        description: a dict describing the pipeline, recorded as the
            lineage's dataset graph (MindInsight's ``organize_graph`` form:
            keys with str/int/float/bool/list values, ``children``, ...).
    """

    def __init__(
        self,
        *columns: npt.ArrayLike,
        batch_size: int = 1,
        drop_remainder: bool = False,
        path: str | os.PathLike[str] | None = None,
        description: Mapping[str, Any] | None = None,
    ) -> None:
        if not columns:
            raise CollectorValueError("ArrayDataset needs at least one column.")
        arrays = [
            column if isinstance(column, np.ndarray) else np.asarray(column) for column in columns
        ]
        lengths = {len(array) if array.ndim else -1 for array in arrays}
        if len(lengths) != 1 or -1 in lengths:
            raise CollectorValueError(
                f"ArrayDataset columns must have the same first dimension, but got shapes "
                f"{[array.shape for array in arrays]}."
            )
        if not is_int(batch_size) or batch_size <= 0:
            raise CollectorValueError(f"batch_size must be an int > 0, but got {batch_size!r}.")
        if description is not None and not isinstance(description, Mapping):
            raise CollectorTypeError(
                f"description must be a dict, but got {type(description).__name__}."
            )
        self.columns = arrays
        self.batch_size = batch_size
        self.drop_remainder = check_bool("drop_remainder", drop_remainder, owner="ArrayDataset")
        self.dataset_path = check_optional_path("path", path, owner="ArrayDataset")
        self.dataset_graph = dict(description) if description is not None else None
        #: ``"shards"`` for one rank's share made by :meth:`shard`; ``"whole"`` for
        #: columns given directly (every row is served; :attr:`content_digest` tells
        #: the job's merge whether the ranks were given the same rows).
        self.sharding: str | None = "whole"

    @property
    def rows(self) -> int:
        return len(self.columns[0])

    @property
    def num_samples(self) -> int:
        """Rows served per epoch (the lineage's exact dataset size)."""
        if self.drop_remainder:
            return len(self) * self.batch_size
        return self.rows

    def __len__(self) -> int:
        full, rest = divmod(self.rows, self.batch_size)
        return full + (1 if rest and not self.drop_remainder else 0)

    def __iter__(self) -> Iterator[tuple[npt.NDArray[Any], ...]]:
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield tuple(column[start : start + self.batch_size] for column in self.columns)

    def get_dataset_size(self) -> int:
        """Batches per epoch (MindSpore's name)."""
        return len(self)

    def get_batch_size(self) -> int:
        return self.batch_size

    def shard(self, num_shards: int, shard_id: int) -> ArrayDataset:
        """Rank ``shard_id``'s contiguous share of the rows (sizes differ by at most one)."""
        rows = split_evenly(range(self.rows), num_shards, shard_id)
        window = slice(rows[0], rows[-1] + 1) if rows else slice(0, 0)
        share = ArrayDataset(
            *(column[window] for column in self.columns),
            batch_size=self.batch_size,
            drop_remainder=self.drop_remainder,
            path=self.dataset_path,
            description=self.dataset_graph,
        )
        share.sharding = "shards" if num_shards > 1 else self.sharding
        return share

    @property
    def content_digest(self) -> str:
        """A short digest of the rows: their count and the first and last row of each column."""
        ends = [
            column[index].tobytes() for column in self.columns if len(column) for index in (0, -1)
        ]
        return content_digest(self.rows, ends)

    def __repr__(self) -> str:
        return (
            f"ArrayDataset({self.rows} rows, {len(self.columns)} columns, "
            f"batch_size={self.batch_size})"
        )
