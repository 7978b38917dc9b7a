"""What the collector reads from a network, an optimizer and a dataset: the view types."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from rankscribe.writer.pb import anf_ir_pb2

__all__ = ["DatasetView", "NetworkView", "OptimizerView", "content_digest"]


def content_digest(size: int, parts: Iterable[bytes]) -> str:
    """A short digest of a dataset from its length and a few of its items' bytes.

    Not a proof of equality, a cheap sign of it: two ranks given the same dataset get
    the same digest; ranks given different shares almost surely do not.
    """
    digest = hashlib.blake2b(str(size).encode(), digest_size=8)
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


class NetworkView(Protocol):
    """A network as the collector sees it."""

    @property
    def name(self) -> str:
        """The network's display name: it labels the landscape's parameter files.

        The lineage does not use it: the train lineage names objects by the
        lineage builder's one rule (``docs/collector-schedule.md``).
        """

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
        """The optimizer's display name, for log messages (not the lineage's: see above)."""

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
    #: ``"shards"`` when this rank reads its share of a dataset (a ``DistributedSampler``
    #: of several replicas, an ``ArrayDataset.shard``), ``"whole"`` when it reads every
    #: item of the dataset it was given (which may still be a share the user cut), None
    #: when the view cannot tell. See docs/layout.md, "Merge at rank 0".
    sharding: str | None = None
    #: With ``"whole"``: a short digest of that dataset (its length, first and last
    #: item). Ranks with equal digests read the same data: the job's merge then counts
    #: its size once instead of summing it over the ranks.
    digest: str | None = None

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
