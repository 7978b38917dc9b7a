"""The job view: one record per distributed job, built from its ranks' scalars.

Every rank of a job writes its own summary files into ``<job_dir>/rank_<r>/``.
This module turns the ranks' scalar series into the job's own summary file in
``<job_dir>`` (cross-rank curves per step) and into verdicts for the merged
lineage (straggler, step-time skew, diverged ranks, non-finite loss, where
each rank stopped). See ``docs/job-view.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FINGERPRINT_TAG",
    "STEP_TIME_TAG",
    "JobView",
    "RankSeries",
    "series_from_dir",
    "write_job_view",
]

#: Each rank's wall time of one training step, in seconds, every step.
STEP_TIME_TAG = "rankscribe/step_time"
#: ``crc32c(raw bytes of all parameters) & 0xFFFFFF`` at each collected step.
FINGERPRINT_TAG = "rankscribe/param_fingerprint"


@dataclass
class RankSeries:
    """One rank's scalars: ``tag -> [(step, value)]`` in step order.

    Small and picklable on purpose (it travels through the coordinator):
    scalars only, never tensors, histograms or images.
    """

    rank: int
    scalars: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def last_step(self) -> int | None:
        """The largest step this rank recorded any scalar at, or ``None``."""
        raise NotImplementedError


def series_from_dir(rank_dir: str | os.PathLike[str], rank: int) -> RankSeries:
    """Read a rank's scalars from its summary files.

    Lenient: a torn or corrupt file contributes the records before the damage.
    """
    raise NotImplementedError


@dataclass
class JobView:
    """What :func:`write_job_view` wrote and the verdicts it reached."""

    paths: list[str]
    verdicts: dict[str, float | int | str]


def write_job_view(
    job_dir: str | os.PathLike[str],
    series: Mapping[int, RankSeries],
    *,
    world_size: int,
    missing: Sequence[int] = (),
    tensorboard: bool = False,
    hparams: Mapping[str, Any] | None = None,
    metrics: Mapping[str, float] | None = None,
) -> JobView:
    """Write the job's own summary file into ``job_dir`` and return the verdicts.

    Computes per-step cross-rank statistics of every scalar tag and writes the
    job's summary file (MindSpore format; plus a TensorBoard file with a
    custom_scalars layout and the HParams session when ``tensorboard`` is
    true), atomically, replacing earlier job files. The verdicts are the
    ``user_defined`` keys of the merged lineage (straggler, skew, diverged
    ranks, non-finite loss ranks, last steps, the rank that stopped first).
    """
    raise NotImplementedError
