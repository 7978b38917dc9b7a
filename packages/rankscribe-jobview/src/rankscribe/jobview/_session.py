"""A run's TensorBoard HParams session: its values, as the job files and ``hparams`` write it.

:class:`HParamsRun` is one run as TensorBoard's HParams tab shows it; :func:`add_session`
adds its session start, its metrics as scalars and its session end to an event file's
records (:mod:`rankscribe.writer.eventfiles` encodes them). The job's TensorBoard file
holds the job's session; ``rankscribe-lineage hparams`` writes one per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rankscribe.ranks.arguments import is_number
from rankscribe.writer.eventfiles import EventRecords

__all__ = [
    "FINAL_PREFIX",
    "HParamsRun",
    "add_session",
    "hparam_value",
    "job_session",
    "metric_value",
]

#: What a run's metric scalars are named under: ``final/loss``, ``final/metric/acc``.
FINAL_PREFIX = "final/"


@dataclass
class HParamsRun:
    """One run as TensorBoard will show it."""

    name: str
    hparams: dict[str, bool | float | str]
    metrics: dict[str, float]
    start_time: float


def hparam_value(value: Any) -> bool | float | str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)


def metric_value(value: Any) -> float | None:
    if not is_number(value):
        return None
    return float(value)


def add_session(records: EventRecords, run: HParamsRun, wall_time: float, step: int = 0) -> None:
    """Add the session start, metric scalars (at ``step``) and session end of one run.

    A job's session puts its metrics at the job's last step, where the final values
    belong, rather than as lone points at step 0 before its curves.
    """
    records.add_hparams_session(
        wall_time,
        group=run.name,
        start_time=run.start_time,
        end_time=run.start_time,
        hparams=run.hparams,
        metrics=run.metrics,
        step=step,
    )


def job_session(
    hparams: Mapping[str, Any] | None, metrics: Mapping[str, float] | None, wall_time: float
) -> HParamsRun:
    """A job's HParams session: its hyper-parameters and final metrics, as TensorBoard
    takes them (values it cannot show are left out), grouped by the job's directory."""
    values = {
        str(name): converted
        for name, raw in (hparams or {}).items()
        if (converted := hparam_value(raw)) is not None
    }
    finals = {
        str(name): number
        for name, raw in (metrics or {}).items()
        if (number := metric_value(raw)) is not None
    }
    # An empty group name makes TensorBoard group the session by its run: the job dir.
    return HParamsRun(name="", hparams=values, metrics=finals, start_time=wall_time)
