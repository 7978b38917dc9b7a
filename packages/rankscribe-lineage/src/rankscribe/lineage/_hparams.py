"""TensorBoard's HParams view of the runs under a base dir.

:func:`write_hparams` writes, under an output directory (default
``<base>/tensorboard-hparams``), one TensorBoard run per lineage run:

    <out>/<run name>/events.out.tfevents.<T>.<host>.rankscribe-hparams

holding the version record, the session start (``_hparams_/session_start_info``:
the run's hyper-parameters: the search fields that describe a setup and the
user's own ``user_defined/<k>``), its metrics as scalars at step 0 (``loss``,
``metric/<k>``, and a job's numeric merge notes and verdicts such as
``user_defined/loss_min``, see :func:`split_user_defined`) and the session end.
``<out>`` itself gets the experiment summary (``_hparams_/experiment``) listing
every hyper-parameter, the values seen for text ones, and every metric.
``tensorboard --logdir <out>`` then compares the runs in its HParams tab.

Writing again replaces what a previous call wrote (files ending in
``.rankscribe-hparams``) and leaves everything else alone. The records are
TF ``Event`` messages framed like any summary record; each file is written
with :func:`rankscribe.ranks.files.atomic_write`, so a reader never sees half
of one and a link planted in the output directory is never followed.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rankscribe.lineage._checks import (
    check_host,
    check_optional_bool,
    check_path,
    is_number,
)
from rankscribe.lineage.query._querier import filter_runs
from rankscribe.lineage.record._names import HPARAMS_SUFFIX, hparams_file_name
from rankscribe.ranks.files import atomic_write, file_mode, make_private_dir
from rankscribe.writer.files import frame
from rankscribe.writer.pb import tensorboard_hparams_pb2 as hparams_pb2
from rankscribe.writer.pb import tensorboard_pb2

__all__ = [
    "HPARAM_FIELDS",
    "METRIC_FIELDS",
    "HParamsRun",
    "hparam_value",
    "is_merge_note",
    "metric_value",
    "session_records",
    "write_hparams",
]

DEFAULT_OUT_NAME = "tensorboard-hparams"
PLUGIN_NAME = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
# Hyper-parameters: what a run was set up with. Metrics: what it achieved.
HPARAM_FIELDS = (
    "network",
    "optimizer",
    "learning_rate",
    "loss_function",
    "epoch",
    "batch_size",
    "device_num",
    "train_dataset_path",
    "train_dataset_count",
    "test_dataset_count",
    "dataset_mark",
)
METRIC_FIELDS = ("loss",)
# user_defined keys the job's merge and job view write (docs/layout.md, "Merge at
# rank 0"; docs/job-view.md): notes and verdicts about how the job went, not how it
# was set up. A user's own key of one of these forms is taken for a note too.
_MERGE_NOTE = re.compile(
    r"^(ranks_(reported|expected|missing)|disagreements|.+_by_rank|.+_total"
    r"|loss_(min|max)|metric_.+_(min|max)|(train|valid)_dataset_sharding|job/.+)$"
)


def is_merge_note(key: str) -> bool:
    """Whether ``user_defined/<key>`` is a note of the job's merge or a job-view verdict."""
    return _MERGE_NOTE.match(key) is not None


def split_user_defined(
    user_defined: dict[str, Any],
) -> tuple[dict[str, bool | float | str], dict[str, float]]:
    """The HParams view of a lineage's ``user_defined``: (hyper-parameters, metrics).

    The user's own keys are hyper-parameters; the merge's numeric notes and verdicts
    (``loss_min``, ``ranks_reported``, ``job/step_time_skew``, ...) are metrics, which
    is where HParams shows results; their text notes (``ranks_missing``,
    ``disagreements``, ...) are neither (``rankscribe-lineage show`` and the report
    list them). Names are ``user_defined/<key>``.
    """
    hparams: dict[str, bool | float | str] = {}
    metrics: dict[str, float] = {}
    for key, raw in user_defined.items():
        if is_merge_note(key):
            number = metric_value(raw)
            # Per-rank verdicts (job/last_step/<rank>, ...) would be a column per rank.
            if number is not None and key.count("/") < 2:
                metrics[f"user_defined/{key}"] = number
            continue
        value = hparam_value(raw)
        if value is not None:
            hparams[f"user_defined/{key}"] = value
    return hparams, metrics


# Owner read and write: these files are rewritten by the next call.


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


def _run_name(summary_dir: str, base_dir: str) -> str:
    relative = os.path.relpath(summary_dir, base_dir)
    return os.path.basename(base_dir) if relative == "." else relative


def collect_runs(base_dir: str, *, use_index: bool | None = None) -> list[HParamsRun]:
    """The runs under ``base_dir`` with their hyper-parameters and metrics."""
    directory = os.path.realpath(base_dir)
    result = filter_runs(directory, lineage_type="model", use_index=use_index)
    runs = []
    for item in result["object"]:
        lineage = item["model_lineage"]
        hparams: dict[str, bool | float | str] = {}
        for name in HPARAM_FIELDS:
            value = hparam_value(lineage.get(name))
            if value is not None:
                hparams[name] = value
        user_hparams, notes = split_user_defined(lineage["user_defined"])
        hparams.update(user_hparams)
        metrics: dict[str, float] = {}
        for name in METRIC_FIELDS:
            metric = metric_value(lineage.get(name))
            if metric is not None:
                metrics[name] = metric
        for key, raw in lineage["metric"].items():
            metric = metric_value(raw)
            if metric is not None:
                metrics[f"metric/{key}"] = metric
        metrics.update(notes)
        summary_dir = item["summary_dir"]
        runs.append(
            HParamsRun(
                name=_run_name(summary_dir, directory),
                hparams=hparams,
                metrics=metrics,
                start_time=os.path.getmtime(summary_dir),
            )
        )
    return runs


def _plugin_value(tag: str, data: hparams_pb2.HParamsPluginData) -> tensorboard_pb2.Summary.Value:
    value = tensorboard_pb2.Summary.Value(tag=tag)
    value.metadata.plugin_data.plugin_name = PLUGIN_NAME
    value.metadata.plugin_data.content = data.SerializeToString()
    # TensorBoard's own hparams summaries carry an empty float tensor.
    value.tensor.dtype = tensorboard_pb2.DT_FLOAT
    value.tensor.tensor_shape.SetInParent()
    return value


def _event(
    wall_time: float, values: Iterable[tensorboard_pb2.Summary.Value], step: int = 0
) -> bytes:
    event = tensorboard_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.extend(values)
    return frame(event.SerializeToString())


def _set_protobuf_value(target: Any, value: bool | float | str) -> None:
    """Fill a ``google.protobuf.Value``."""
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, str):
        target.string_value = value
    else:
        target.number_value = value


def session_records(run: HParamsRun, wall_time: float, step: int = 0) -> bytes:
    """The framed session start, metric scalars (at ``step``) and session end of one run.

    A job's session puts its metrics at the job's last step, where the final values
    belong, rather than as lone points at step 0 before its curves.
    """
    start = hparams_pb2.HParamsPluginData(version=0)
    start.session_start_info.group_name = run.name
    start.session_start_info.start_time_secs = run.start_time
    for name, value in run.hparams.items():
        _set_protobuf_value(start.session_start_info.hparams[name], value)
    scalars = [
        tensorboard_pb2.Summary.Value(tag=tag, simple_value=metric)
        for tag, metric in run.metrics.items()
    ]
    end = hparams_pb2.HParamsPluginData(version=0)
    end.session_end_info.status = hparams_pb2.STATUS_SUCCESS
    end.session_end_info.end_time_secs = run.start_time
    return (
        _event(wall_time, [_plugin_value(SESSION_START_TAG, start)])
        + (_event(wall_time, scalars, step) if scalars else b"")
        + _event(wall_time, [_plugin_value(SESSION_END_TAG, end)])
    )


def _experiment_record(runs: list[HParamsRun], wall_time: float) -> bytes:
    data = hparams_pb2.HParamsPluginData(version=0)
    experiment = data.experiment
    experiment.time_created_secs = wall_time
    # Each name's values, names in order of appearance: one pass, whatever the runs' keys.
    values_of: dict[str, list[bool | float | str]] = {}
    for run in runs:
        for name, value in run.hparams.items():
            values_of.setdefault(name, []).append(value)
    for name, values in values_of.items():
        info = experiment.hparam_infos.add(name=name)
        if all(isinstance(value, bool) for value in values):
            info.type = hparams_pb2.DATA_TYPE_BOOL
        elif all(isinstance(value, str) for value in values):
            info.type = hparams_pb2.DATA_TYPE_STRING
            for text in sorted({str(value) for value in values}):
                info.domain_discrete.values.add(string_value=text)
        elif all(isinstance(value, float) for value in values):
            info.type = hparams_pb2.DATA_TYPE_FLOAT64
    metrics = dict.fromkeys(tag for run in runs for tag in run.metrics)
    for tag in metrics:
        experiment.metric_infos.add().name.tag = tag
    return _event(wall_time, [_plugin_value(EXPERIMENT_TAG, data)])


def _version_record(wall_time: float) -> bytes:
    event = tensorboard_pb2.Event(wall_time=wall_time, file_version="brain.Event:2")
    return frame(event.SerializeToString())


def _replace(directory: str, name: str, payload: bytes) -> str:
    make_private_dir(directory)
    for old in os.listdir(directory):
        if old.endswith(HPARAMS_SUFFIX) and old != name:
            os.unlink(os.path.join(directory, old))
    return atomic_write(os.path.join(directory, name), [payload], mode=file_mode(False))


def write_hparams(
    base_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    use_index: bool | None = None,
    host: str | None = None,
) -> list[str]:
    """Write the HParams summaries of the runs under ``base_dir``; return the files written."""
    base = os.path.realpath(check_path("base_dir", base_dir))
    given_out = None if out_dir is None else check_path("out_dir", out_dir)
    check_optional_bool("use_index", use_index)
    check_host("host", host)
    out = given_out if given_out is not None else os.path.join(base, DEFAULT_OUT_NAME)
    runs = collect_runs(base, use_index=use_index)
    wall_time = time.time()
    name = hparams_file_name(int(wall_time), host)
    written = [
        _replace(out, name, _version_record(wall_time) + _experiment_record(runs, wall_time))
    ]
    for run in runs:
        written.append(
            _replace(
                os.path.join(out, run.name),
                name,
                _version_record(wall_time) + session_records(run, wall_time),
            )
        )
    return written
