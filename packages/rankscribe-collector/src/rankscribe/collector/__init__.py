"""rankscribe.collector: training callbacks that record summaries, rank-aware.

- :class:`SummaryCollector`: loss, weights, inputs, graph and lineage at the
  original's schedule, each rank into its own directory, lineage merged on rank 0.
- :class:`ModelCheckpoint` / :class:`CheckpointConfig`: checkpoints the lineage points at.
- :class:`TrainLoop`: drives callbacks around your own step and eval functions.
- :class:`Callback`, :class:`RunContext`, :class:`CallbackParams`: the protocol.
"""

from __future__ import annotations

from rankscribe.collector.callback import Callback, CallbackList, CallbackParams, RunContext

__version__ = "0.1.0"

__all__ = [
    "Callback",
    "CallbackList",
    "CallbackParams",
    "RunContext",
    "__version__",
]
