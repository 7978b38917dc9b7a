"""Writing a run's lineage back into a ``_lineage`` file.

Used for the merged lineage of a distributed job, which rank 0 (or the
offline ``rankscribe-lineage merge``) writes into the job's directory as::

    events.out.events.summary.<T>.merged.<host>_lineage

(see :mod:`rankscribe.lineage.record._names`). The writer frames the events and
writes the file atomically (:mod:`rankscribe.writer.eventfiles`): a reader sees
the old merged file or the new one, never a half-written one. Writing again replaces the previous
merged file rather than adding a second one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from rankscribe.lineage._checks import (
    check_host,
    check_optional_int,
    check_optional_mapping,
    check_path,
)
from rankscribe.lineage.errors import LineageParamTypeError
from rankscribe.lineage.record._dataset_graph import DatasetGraphInfo
from rankscribe.lineage.record._model import (
    EvalLineageInfo,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.lineage.record._names import is_merged_lineage_name, merged_lineage_name
from rankscribe.lineage.record._parser import RunLineage
from rankscribe.writer.eventfiles import EventRecords, write_event_file
from rankscribe.writer.pb import lineage_pb2

__all__ = ["lineage_events", "write_merged_lineage"]

_TRAIN_SECTION_NAMES = ("hyper_parameters", "train_dataset", "algorithm", "model")


def lineage_events(
    lineage: RunLineage, wall_time: float | None = None
) -> list[lineage_pb2.LineageEvent]:
    """The events that read back as ``lineage``: graph, custom data, train, evaluation."""
    now = time.time() if wall_time is None else wall_time
    events: list[lineage_pb2.LineageEvent] = []
    graph = lineage.section("dataset_graph")
    if graph:
        events.append(
            lineage_pb2.LineageEvent(
                wall_time=now, dataset_graph=DatasetGraphInfo.from_graph_dict(graph).to_proto()
            )
        )
    user_defined = lineage.section("user_defined")
    if user_defined:
        events.append(
            lineage_pb2.LineageEvent(
                wall_time=now,
                user_defined_info=UserDefinedInfo.from_values(user_defined).to_proto(),
            )
        )
    train_sections = {
        name: lineage.section(name) for name in _TRAIN_SECTION_NAMES if lineage.section(name)
    }
    if train_sections:
        train = TrainLineageInfo.from_query_dict(train_sections)
        events.append(lineage_pb2.LineageEvent(wall_time=now, train_lineage=train.to_proto()))
    metric: dict[str, Any] = lineage.section("metric")
    valid = lineage.section("valid_dataset")
    if metric or valid:
        evaluation = EvalLineageInfo(
            metric=json.dumps(metric),
            valid_dataset=ValidDataset.from_query_dict(valid) if valid else None,
        )
        events.append(
            lineage_pb2.LineageEvent(wall_time=now, evaluation_lineage=evaluation.to_proto())
        )
    return events


def write_merged_lineage(
    run_dir: str | os.PathLike[str],
    lineage: RunLineage,
    *,
    host: str | None = None,
    timestamp: int | None = None,
    user_defined: Mapping[str, int | float | str] | None = None,
) -> str:
    """Write ``lineage`` as the merged lineage file of ``run_dir``; return its path.

    An existing merged file is replaced in place (its name is kept), and any
    other merged file in ``run_dir`` is removed, so there is always one.
    ``user_defined`` adds keys (e.g. the job view's verdicts) to the lineage's
    own ``user_defined``; ``lineage`` itself is not changed.
    """
    directory = check_path("run_dir", run_dir)
    if not isinstance(lineage, RunLineage):
        raise LineageParamTypeError(f"lineage must be a RunLineage, got {type(lineage).__name__}")
    check_host("host", host)
    check_optional_int("timestamp", timestamp, minimum=0)
    check_optional_mapping("user_defined", user_defined)
    if user_defined:
        lineage = RunLineage.from_json_dict(lineage.to_json_dict())
        lineage.sections["user_defined"].update(user_defined)
    existing = sorted(name for name in os.listdir(directory) if is_merged_lineage_name(name))
    name = existing[-1] if existing else merged_lineage_name(timestamp, host)
    records = EventRecords("mindinsight")
    for event in lineage_events(lineage):
        records.add_event(event)
    write_event_file(os.path.join(directory, name), records)
    for stale in existing[:-1]:
        os.unlink(os.path.join(directory, stale))
    return os.path.join(directory, name)
