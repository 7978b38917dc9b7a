"""TensorBoard's HParams view of the runs under a base dir.

:func:`write_hparams` writes, under an output directory (default
``<base>/tensorboard-hparams``), one TensorBoard run per lineage run:

    <out>/<run name>/events.out.tfevents.<T>.<host>.rankscribe-hparams

holding the version record, the session start (``_hparams_/session_start_info``:
the run's hyper-parameters: the search fields that describe a setup and the
user's own ``user_defined/<k>``), its metrics as scalars at step 0 (``final/loss``,
``final/metric/<k>``, and a job's numeric merge notes and verdicts such as
``final/user_defined/loss_min``, see :func:`split_user_defined`) and the session end.
The metrics are named ``final/<field>``: TensorBoard's Scalars tab shows them too,
and under a name no curve has, a final value never lands on the runs' curves of
the same tag (``tensorboard --logdir BASE`` shows both).
``<out>`` itself gets the experiment summary (``_hparams_/experiment``) listing
every hyper-parameter, the values seen for text ones, and every metric.
``tensorboard --logdir <out>`` then compares the runs in its HParams tab.

Writing again replaces what a previous call wrote (files ending in
``.rankscribe-hparams``) and leaves everything else alone. The writer encodes
and frames the records (TF ``Event`` messages, :mod:`rankscribe.writer.eventfiles`)
and writes each file atomically, so a reader never sees half of one and a link
planted in the output directory is never followed.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from rankscribe.jobview.parts import (
    FINAL_PREFIX,
    HParamsRun,
    add_session,
    hparam_value,
    metric_value,
)
from rankscribe.lineage._checks import (
    check_host,
    check_optional_bool,
    check_path,
)
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.query._querier import filter_runs
from rankscribe.lineage.record._names import HPARAMS_SUFFIX, hparams_file_name
from rankscribe.lineage.record._parser import RunLineage
from rankscribe.ranks.files import make_private_dir
from rankscribe.writer.eventfiles import EventRecords, write_event_file

__all__ = [
    "HPARAM_FIELDS",
    "METRIC_FIELDS",
    "is_merge_note",
    "session_values",
    "split_user_defined",
    "write_hparams",
]

DEFAULT_OUT_NAME = "tensorboard-hparams"
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


def session_values(lineage: RunLineage) -> tuple[dict[str, Any], dict[str, float]]:
    """The HParams session of a merged lineage: hyper-parameters and final metrics.

    The same names as ``rankscribe-lineage hparams`` uses: the search fields
    that describe a setup and the user's ``user_defined/<k>`` as hyper-parameters;
    ``loss``, ``metric/<k>`` and the merge's numeric notes (``user_defined/loss_min``,
    ...) as metrics; the merge's text notes and the verdicts are neither.
    """
    hparams: dict[str, Any] = {}
    for name in HPARAM_FIELDS:
        section, key = FIELD_MAPPING.get(name, (name, None))
        value = lineage.section(section).get(key) if key is not None else None
        if value is not None:
            hparams[name] = value
    user_hparams, notes = split_user_defined(lineage.section("user_defined"))
    hparams.update(user_hparams)
    metrics: dict[str, float] = {}
    loss = metric_value(lineage.section("algorithm").get("loss"))
    if loss is not None:
        metrics["loss"] = loss
    for key, value in lineage.section("metric").items():
        number = metric_value(value)
        if number is not None:
            metrics[f"metric/{key}"] = number
    metrics.update(notes)
    return hparams, metrics


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
                metrics={f"{FINAL_PREFIX}{name}": value for name, value in metrics.items()},
                start_time=os.path.getmtime(summary_dir),
            )
        )
    return runs


def _add_experiment(records: EventRecords, runs: list[HParamsRun], wall_time: float) -> None:
    # Each name's values, names in order of appearance: one pass, whatever the runs' keys.
    values_of: dict[str, list[bool | float | str]] = {}
    for run in runs:
        for name, value in run.hparams.items():
            values_of.setdefault(name, []).append(value)
    metrics = list(dict.fromkeys(tag for run in runs for tag in run.metrics))
    records.add_hparams_experiment(wall_time, values_of, metrics)


def _replace(directory: str, name: str, records: EventRecords) -> str:
    make_private_dir(directory)
    for old in os.listdir(directory):
        if old.endswith(HPARAMS_SUFFIX) and old != name:
            os.unlink(os.path.join(directory, old))
    # Owner read and write: these files are rewritten by the next call.
    return write_event_file(os.path.join(directory, name), records, final=False)


def _new_file(wall_time: float) -> EventRecords:
    records = EventRecords("tensorboard")
    records.add_version(wall_time)
    return records


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
    experiment = _new_file(wall_time)
    _add_experiment(experiment, runs, wall_time)
    written = [_replace(out, name, experiment)]
    for run in runs:
        session = _new_file(wall_time)
        add_session(session, run, wall_time)
        written.append(_replace(os.path.join(out, run.name), name, session))
    return written
