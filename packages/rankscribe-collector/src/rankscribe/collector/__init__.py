"""rankscribe.collector: training callbacks that record summaries, rank-aware.

- :class:`SummaryCollector`: loss, weights, inputs, graph and lineage at the
  original's schedule, each rank into its own directory, lineage merged on rank 0.
- :class:`ModelCheckpoint` / :class:`CheckpointConfig`: checkpoints the lineage
  points at; :func:`load_checkpoint` reads them back, :func:`save_checkpoint`
  writes one directly; :class:`CheckpointManager` is the file list a
  ``ModelCheckpoint`` keeps (its ``manager``), usable on its own.
- :class:`TrainLoop`: drives callbacks around your own step and eval functions;
  :class:`TrainSession`: the same callbacks from a training loop of your own.
- :class:`ArrayNetwork`, :class:`ArrayOptimizer`, :class:`ArrayDataset`: NumPy
  containers for scripts without a framework (PyTorch objects work directly);
  :class:`GraphDescription` (with :class:`GraphNode`, :class:`GraphParameter`)
  describes an ``ArrayNetwork``'s graph.
- :class:`CollectionSchedule` (a collector's ``schedule``) and :class:`Collect`: what
  each unit of this rank collects (``docs/collector-schedule.md``).
- :class:`Progress`: training progress on rank 0 (a bar on a terminal, lines otherwise).
- :class:`SummaryStep`: records a summary record of your own every ``flush_step``
  steps (MindSpore's callback that the lineage callbacks' examples use).
- :class:`Callback`, :class:`RunContext`, :class:`CallbackParams`: the protocol.
- :class:`CollectorError`: the base of every error raised here; the specific
  ones are in :mod:`rankscribe.collector.errors`.

Reading other frameworks' objects (:func:`register_adapter`, the views) is
:mod:`rankscribe.collector.adapters`.
"""

from __future__ import annotations

from rankscribe.collector._callback import Callback, CallbackParams, RunContext
from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.adapters._arrays import ArrayDataset, ArrayNetwork, ArrayOptimizer
from rankscribe.collector.adapters._graph import GraphDescription, GraphNode, GraphParameter
from rankscribe.collector.adapters._registry import register_adapter
from rankscribe.collector.checkpoint._callback import CheckpointManager, ModelCheckpoint
from rankscribe.collector.checkpoint._config import CheckpointConfig
from rankscribe.collector.checkpoint._format import (
    LoadedCheckpoint,
    load_checkpoint,
    save_checkpoint,
)
from rankscribe.collector.collection._schedule import Collect, CollectionSchedule
from rankscribe.collector.errors import CollectorError
from rankscribe.collector.loop._loop import TrainLoop
from rankscribe.collector.loop._progress import Progress
from rankscribe.collector.loop._session import TrainSession
from rankscribe.collector.loop._summary_step import SummaryStep

__version__ = "0.1.0"  # the distribution's version (metadata, not an API name)

__all__ = [
    "ArrayDataset",
    "ArrayNetwork",
    "ArrayOptimizer",
    "Callback",
    "CallbackParams",
    "CheckpointConfig",
    "CheckpointManager",
    "Collect",
    "CollectionSchedule",
    "CollectorError",
    "GraphDescription",
    "GraphNode",
    "GraphParameter",
    "LoadedCheckpoint",
    "ModelCheckpoint",
    "Progress",
    "RunContext",
    "SummaryCollector",
    "SummaryStep",
    "TrainLoop",
    "TrainSession",
    "load_checkpoint",
    "register_adapter",
    "save_checkpoint",
]
