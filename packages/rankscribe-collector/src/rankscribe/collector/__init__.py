"""rankscribe.collector: training callbacks that record summaries, rank-aware.

- :class:`SummaryCollector`: loss, weights, inputs, graph and lineage at the
  original's schedule, each rank into its own directory, lineage merged on rank 0.
- :class:`ModelCheckpoint` / :class:`CheckpointConfig`: checkpoints the lineage
  points at; :func:`load_checkpoint` reads them back.
- :class:`TrainLoop`: drives callbacks around your own step and eval functions.
- :class:`ArrayNetwork`, :class:`ArrayOptimizer`, :class:`ArrayDataset`: NumPy
  containers for scripts without a framework (PyTorch objects work directly).
- :class:`Callback`, :class:`RunContext`, :class:`CallbackParams`: the protocol.
"""

from __future__ import annotations

from rankscribe.collector.adapters import register_adapter
from rankscribe.collector.adapters.numpy import ArrayDataset, ArrayNetwork, ArrayOptimizer
from rankscribe.collector.callback import Callback, CallbackList, CallbackParams, RunContext
from rankscribe.collector.checkpoint import (
    CheckpointAuthenticationError,
    CheckpointConfig,
    CheckpointEncryptionError,
    CheckpointError,
    CheckpointFormatError,
    CheckpointManager,
    CheckpointNotFoundError,
    CheckpointTimeoutError,
    CheckpointTypeError,
    CheckpointValueError,
    CheckpointWriteError,
    LoadedCheckpoint,
    ModelCheckpoint,
    load_checkpoint,
    network_parameters,
    save_checkpoint,
)
from rankscribe.collector.collector import SummaryCollector
from rankscribe.collector.errors import CollectorError, CollectorTypeError, CollectorValueError
from rankscribe.collector.graph import (
    GraphDescription,
    GraphNode,
    GraphParameter,
    build_graph_proto,
)
from rankscribe.collector.loop import TrainLoop

__version__ = "0.1.0"

__all__ = [
    "ArrayDataset",
    "ArrayNetwork",
    "ArrayOptimizer",
    "Callback",
    "CallbackList",
    "CallbackParams",
    "CheckpointAuthenticationError",
    "CheckpointConfig",
    "CheckpointEncryptionError",
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointManager",
    "CheckpointNotFoundError",
    "CheckpointTimeoutError",
    "CheckpointTypeError",
    "CheckpointValueError",
    "CheckpointWriteError",
    "CollectorError",
    "CollectorTypeError",
    "CollectorValueError",
    "GraphDescription",
    "GraphNode",
    "GraphParameter",
    "LoadedCheckpoint",
    "ModelCheckpoint",
    "RunContext",
    "SummaryCollector",
    "TrainLoop",
    "__version__",
    "build_graph_proto",
    "load_checkpoint",
    "network_parameters",
    "register_adapter",
    "save_checkpoint",
]
