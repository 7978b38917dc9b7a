"""Merging the lineages of a distributed job's ranks into one job lineage.

:func:`merge_rank_lineages` is a pure function; :func:`merge_run_dir` does the
same offline from a job directory's ``rank_<n>`` subdirectories (for jobs
that crashed before rank 0 merged) and writes the merged lineage file.

Rules (``docs/layout.md``, "Merge at rank 0"):

- A value the ranks agree on is kept once. When they disagree, the value of
  rank 0 (or of the lowest rank that reported) is kept, the field's name is
  listed in ``user_defined/disagreements`` and every rank's value is kept as
  JSON text in ``user_defined/<name>_by_rank``.
- ``loss`` and each numeric metric are averaged over the ranks that have
  them; the per-rank extremes are kept as ``user_defined/loss_min`` and
  ``loss_max``, ``metric_<k>_min`` and ``metric_<k>_max``.
- ``train_dataset_size`` and ``valid_dataset_size`` are summed over the
  ranks' shards, and kept once when every rank says (in
  ``user_defined/<kind>_dataset_sharding``) it read the same whole dataset.
- ``device_num`` is the world size; the model (path and size) is rank 0's.
- ``user_defined/ranks_reported`` and ``ranks_expected`` count the ranks, and
  ``ranks_missing`` lists the ones that did not report ("" when none).

Every merge field lives in ``user_defined``, so it can be searched
(``user_defined/ranks_missing``) and shown like any custom lineage.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import filelock

from rankscribe.lineage._checks import (
    check_bool,
    check_host,
    check_mapping,
    check_optional_int,
    check_path,
    is_number,
    ranks_text,
)
from rankscribe.lineage.errors import LineageMergeError, LineageParamTypeError
from rankscribe.lineage.jobview import (
    JobView,
    holds_tensorboard_files,
    read_rank_series,
    session_values,
    write_job_view,
)
from rankscribe.lineage.record._lineage_file import write_merged_lineage
from rankscribe.lineage.record._names import rank_of_dir_name
from rankscribe.lineage.record._parser import RunLineage, parse_run
from rankscribe.writer.files import file_mode

logger = logging.getLogger(__name__)

__all__ = ["MERGE_LOCK_NAME", "MergeOutcome", "merge_rank_lineages", "merge_run_dir", "rank_dirs"]

MERGE_LOCK_NAME = ".rankscribe-merge.lock"
_INT32_MAX = 2**31 - 1
_POLL_SECONDS = 0.5
_LOCK_SECONDS = 120


class _Merger:
    """Gathers disagreements and notes while merging one job."""

    def __init__(self, lineages: Mapping[int, RunLineage], primary: int) -> None:
        self.lineages = lineages
        self.primary = primary
        self.disagreements: list[str] = []
        self.notes: dict[str, Any] = {}

    def values(self, getter: Callable[[RunLineage], Any]) -> dict[int, Any]:
        found = {rank: getter(lineage) for rank, lineage in sorted(self.lineages.items())}
        return {rank: value for rank, value in found.items() if value is not None}

    def agreed(self, label: str, getter: Callable[[RunLineage], Any]) -> Any:
        """The common value, or the primary rank's one with the disagreement noted."""
        present = self.values(getter)
        if not present:
            return None
        distinct: list[Any] = []
        for value in present.values():
            if value not in distinct:
                distinct.append(value)
        if len(distinct) > 1:
            self.disagreements.append(label)
            self.notes[f"{label}_by_rank"] = json.dumps(
                {str(rank): value for rank, value in present.items()}
            )
        return present.get(self.primary, next(iter(present.values())))

    def averaged(self, note: str, getter: Callable[[RunLineage], Any]) -> float | None:
        """The mean (NaN when a rank's value is NaN), the extremes of the numbers noted."""
        present = [
            float(value)
            for value in self.values(getter).values()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        if not present:
            return None
        # min/max with a NaN depend on where it is: take the extremes of the rest.
        numbers = [value for value in present if not math.isnan(value)] or present
        self.notes[f"{note}_min"] = min(numbers)
        self.notes[f"{note}_max"] = max(numbers)
        return math.fsum(present) / len(present)

    def summed(self, label: str, getter: Callable[[RunLineage], Any]) -> int | None:
        present = [value for value in self.values(getter).values() if isinstance(value, int)]
        if not present:
            return None
        total = sum(present)
        if total > _INT32_MAX:
            # The wire field is int32: keep the exact total as text beside it.
            self.notes[f"{label}_total"] = str(total)
            return None
        return total


def _section_getter(section: str, key: str) -> Callable[[RunLineage], Any]:
    return lambda lineage: lineage.section(section).get(key)


# How MessageToDict writes a non-finite float32 field (the loss) in a lineage.
_NON_FINITE_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_getter(section: str, key: str) -> Callable[[RunLineage], Any]:
    def value_of(lineage: RunLineage) -> Any:
        value = lineage.section(section).get(key)
        return _NON_FINITE_FLOATS.get(value, value) if isinstance(value, str) else value

    return value_of


def _merge_train(merger: _Merger, world_size: int) -> dict[str, dict[str, Any]]:
    hyper: dict[str, Any] = {}
    for key in ("optimizer", "learning_rate", "loss_function", "epoch", "parallel_mode",
                "batch_size"):
        value = merger.agreed(key, _section_getter("hyper_parameters", key))
        if value is not None:
            hyper[key] = value
    if any(lineage.section("hyper_parameters") for lineage in merger.lineages.values()):
        hyper["device_num"] = world_size
    dataset = _merged_dataset(merger, "train")
    algorithm: dict[str, Any] = {}
    network = merger.agreed("network", _section_getter("algorithm", "network"))
    if network is not None:
        algorithm["network"] = network
    loss = merger.averaged("loss", _float_getter("algorithm", "loss"))
    if loss is not None:
        algorithm["loss"] = loss
    primary = merger.lineages.get(merger.primary)
    model = dict(primary.section("model")) if primary is not None else {}
    return {
        "hyper_parameters": hyper,
        "train_dataset": dataset,
        "algorithm": algorithm,
        "model": model,
    }


def _merge_evaluation(merger: _Merger) -> dict[str, dict[str, Any]]:
    keys: list[str] = []
    for lineage in merger.lineages.values():
        keys.extend(key for key in lineage.section("metric") if key not in keys)
    metric: dict[str, Any] = {}
    for key in keys:
        getter = _section_getter("metric", key)
        numeric = all(
            isinstance(value, (int, float)) and not isinstance(value, bool)
            for value in merger.values(getter).values()
        )
        value = (
            merger.averaged(f"metric_{key}", getter)
            if numeric
            else merger.agreed(f"metric_{key}", getter)
        )
        if value is not None:
            metric[key] = value
    return {"metric": metric, "valid_dataset": _merged_dataset(merger, "valid")}


def _merged_dataset(merger: _Merger, kind: str) -> dict[str, Any]:
    """A ``<kind>_dataset`` section: the path the ranks agree on, and its size.

    Each rank may note in ``user_defined/<kind>_dataset_sharding`` how it read the
    dataset: ``shards`` (its share) or ``whole:<digest>`` (every item of a dataset
    with that content digest). When every rank read the same whole dataset, its size
    is kept once and the job's note says ``whole``; otherwise the sizes are summed
    and the job's note says ``shards`` (``unknown`` when a rank did not say).
    """
    section, merged = f"{kind}_dataset", {}
    path = merger.agreed(f"{section}_path", _section_getter(section, f"{section}_path"))
    if path is not None:
        merged[f"{section}_path"] = path
    note_key = f"{section}_sharding"
    notes = merger.values(_section_getter("user_defined", note_key))
    size_getter = _section_getter(section, f"{section}_size")
    every_rank = len(notes) == len(merger.lineages)
    whole = every_rank and len(set(notes.values())) == 1 and all(
        isinstance(note, str) and note.startswith("whole:") for note in notes.values())
    if notes:  # the ranks' own notes are read here, never merged as they are
        merger.notes[note_key] = ("whole" if whole else "shards") if every_rank else "unknown"
    size = (merger.agreed(f"{section}_size", size_getter) if whole
            else merger.summed(f"{section}_size", size_getter))
    if size is not None:
        merged[f"{section}_size"] = size
    return merged


def merge_rank_lineages(
    records: Mapping[int, RunLineage],
    *,
    world_size: int | None = None,
    summary_dir: str = "",
    user_defined: Mapping[str, int | float | str] | None = None,
) -> RunLineage:
    """Merge the lineages of a job's ranks (rank -> lineage) into one job lineage.

    Args:
        records: the lineage of each rank that reported, keyed by rank.
        world_size: how many ranks the job had; default the highest rank + 1.
            Ranks in ``range(world_size)`` without a record are "missing".
        summary_dir: the ``summary_dir`` of the returned lineage.
        user_defined: extra ``user_defined`` keys of the job (the job view's
            verdicts, ``JobView.verdicts``); they win over the ranks' keys.

    Raises:
        LineageMergeError: no record, a rank that is not an int in
            ``range(world_size)``, or a record that is not a RunLineage.
        LineageParamTypeError: a ``user_defined`` value that is not int,
            float or str.
    """
    check_mapping("records", records)
    if not isinstance(summary_dir, str):
        raise LineageParamTypeError(
            f"summary_dir must be a str, got {type(summary_dir).__name__}")
    extra = _checked_user_defined(user_defined)
    if not records:
        raise LineageMergeError("no rank lineage to merge")
    for rank, lineage in records.items():
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise LineageMergeError(f"ranks must be ints >= 0, got {rank!r}")
        if not isinstance(lineage, RunLineage):
            raise LineageMergeError(
                f"the record of rank {rank} must be a RunLineage, got {type(lineage).__name__}"
            )
    expected = max(records) + 1 if world_size is None else world_size
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 1:
        raise LineageMergeError(f"world_size must be an int >= 1, got {world_size!r}")
    if max(records) >= expected:
        raise LineageMergeError(
            f"rank {max(records)} is outside a world of {expected} ranks (world_size)"
        )
    ranks = sorted(records)
    merger = _Merger({rank: records[rank] for rank in ranks}, primary=ranks[0])
    merged = RunLineage(summary_dir)
    merged.sections.update(_merge_train(merger, expected))
    merged.sections.update(_merge_evaluation(merger))
    graph = merger.agreed("dataset_graph", lambda lineage: lineage.section("dataset_graph") or None)
    merged.sections["dataset_graph"] = graph or {}
    user_keys: list[str] = []
    for lineage in merger.lineages.values():
        user_keys.extend(key for key in lineage.section("user_defined") if key not in user_keys)
    user_keys_of_job: dict[str, Any] = {}
    for key in user_keys:
        if key in merger.notes:  # the merge's own note on it (a dataset's sharding)
            continue
        value = merger.agreed(f"user_defined.{key}", _section_getter("user_defined", key))
        if value is not None:
            user_keys_of_job[key] = value
    missing = [rank for rank in range(expected) if rank not in records]
    user_keys_of_job.update(merger.notes)
    user_keys_of_job.update(
        {
            "ranks_reported": len(ranks),
            "ranks_expected": expected,
            "ranks_missing": ",".join(str(rank) for rank in missing),
            "disagreements": ",".join(merger.disagreements),
        }
    )
    user_keys_of_job.update(extra)
    merged.sections["user_defined"] = user_keys_of_job
    return merged


def _checked_user_defined(
    values: Mapping[str, int | float | str] | None,
) -> dict[str, int | float | str]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise LineageParamTypeError(
            f"user_defined must be a mapping of str to int, float or str, "
            f"got {type(values).__name__}"
        )
    checked: dict[str, int | float | str] = {}
    for key, value in values.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(
            value, (int, float, str)
        ):
            raise LineageParamTypeError(
                f"user_defined[{key!r}] must be a str key with an int, float or str value, "
                f"got {value!r} ({type(value).__name__})"
            )
        checked[key] = value
    return checked


def rank_dirs(run_dir: str) -> dict[int, str]:
    """The ``rank_<n>`` subdirectories of ``run_dir`` (symbolic links skipped)."""
    found: dict[int, str] = {}
    with os.scandir(run_dir) as entries:
        for entry in entries:
            rank = rank_of_dir_name(entry.name)
            if rank is not None and entry.is_dir(follow_symlinks=False):
                found[rank] = entry.path
    return found


@dataclass
class MergeOutcome:
    """What an offline merge did."""

    path: str
    lineage: RunLineage
    ranks_reported: list[int]
    ranks_missing: list[int]
    #: The job files written and the verdicts (None when no rank had a scalar).
    job_view: JobView | None = None


def _read_ranks(run_dir: str) -> dict[int, RunLineage]:
    found: dict[int, RunLineage] = {}
    for rank, directory in sorted(rank_dirs(run_dir).items()):
        parsed = parse_run(directory)
        for warning in parsed.warnings:
            logger.warning("%s", warning)
        if parsed.lineage is not None:
            found[rank] = parsed.lineage
    return found


def _expected_ranks(run_dir: str, lineages: Mapping[int, RunLineage]) -> int:
    """The world size: rank dirs seen, highest rank, and the ranks' own device_num."""
    candidates = [max(rank_dirs(run_dir), default=-1) + 1]
    candidates.extend(rank + 1 for rank in lineages)
    for lineage in lineages.values():
        device_num = lineage.section("hyper_parameters").get("device_num")
        if isinstance(device_num, int) and not isinstance(device_num, bool):
            candidates.append(device_num)
    return max(candidates)


class Clock(Protocol):
    """What the offline merge's wait for late ranks reads time with."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# Replaced by tests, so that a wait for a late rank needs no wall-clock time.
_CLOCK: Clock = _SystemClock()


def _wait_for_ranks(
    directory: str, timeout: float, world_size: int | None, clock: Clock
) -> tuple[dict[int, RunLineage], int]:
    """Poll ``directory``'s ranks until all reported or ``timeout`` passed."""
    deadline = clock.monotonic() + timeout
    while True:
        lineages = _read_ranks(directory)
        expected = world_size or _expected_ranks(directory, lineages)
        if len(lineages) >= expected or clock.monotonic() >= deadline:
            return lineages, expected
        clock.sleep(min(_POLL_SECONDS, max(0.0, deadline - clock.monotonic())))


def _lineage_without_ranks(directory: str, expected: int) -> RunLineage:
    """The job lineage when no rank wrote one (killed early): the world size, the rank counts.

    The world size makes it a train lineage: readers (MindInsight's rule) list
    a run only when it has one, and the verdicts must be found.
    """
    lineage = RunLineage(directory)
    lineage.sections["hyper_parameters"] = {"device_num": expected}
    lineage.sections["user_defined"] = {
        "ranks_reported": 0,
        "ranks_expected": expected,
        "ranks_missing": ",".join(str(rank) for rank in range(expected)),
        "disagreements": "",
    }
    return lineage


def merge_run_dir(
    run_dir: str | os.PathLike[str],
    *,
    timeout: float = 0.0,
    world_size: int | None = None,
    host: str | None = None,
    user_defined: Mapping[str, int | float | str] | None = None,
    job_view: bool = True,
) -> MergeOutcome:
    """Merge the ``rank_<n>`` dirs of ``run_dir``: the merged lineage and the job view.

    Waits up to ``timeout`` seconds for missing ranks to report, then merges
    what there is. With ``job_view`` (the default), the ranks' scalars also
    give the job's own summary file (and a TensorBoard file when a rank dir
    holds TensorBoard files) and the verdicts, which join the merged
    lineage's ``user_defined`` (see :mod:`rankscribe.lineage.jobview`) with
    any ``user_defined`` given here. Running it again replaces the merged
    lineage and the job files (idempotent: no point is ever duplicated).

    Raises:
        LineageMergeError: ``run_dir`` is not a directory, holds no ``rank_<n>`` dir or
            one of a rank ``>= world_size``, or none holds a lineage or a scalar;
            a ``timeout`` that is negative, NaN or infinite (a wait must end).
        LineageParamTypeError, LineageParamValueError: a malformed argument.
    """
    given = check_path("run_dir", run_dir)
    form = f"timeout must be a finite number of seconds >= 0, got {timeout!r}"
    if not is_number(timeout):
        raise LineageParamTypeError(form)
    if not (math.isfinite(timeout) and timeout >= 0):  # NaN, inf: a deadline never comes
        raise LineageMergeError(form)
    world_size = check_optional_int("world_size", world_size, minimum=1)
    check_host("host", host)
    check_bool("job_view", job_view)
    directory = os.path.realpath(given)
    if not os.path.isdir(directory):
        raise LineageMergeError(f"run_dir {given!r} is not a directory")
    extra = _checked_user_defined(user_defined)
    found = sorted(rank_dirs(directory))
    if not found:
        raise LineageMergeError(
            f"no rank_<n> directory in {directory}: the offline merge reads the rank_0, "
            f"rank_1, ... directories of a distributed job"
        )
    if world_size is not None and found[-1] >= world_size:
        raise LineageMergeError(f"world_size {world_size} is too small for {directory}: it holds "
                                f"the rank dirs of ranks {ranks_text(found)} (world_size must "
                                f"be at least {found[-1] + 1})")
    lineages, expected = _wait_for_ranks(directory, timeout, world_size, _CLOCK)
    on_disk = rank_dirs(directory)
    series = read_rank_series(on_disk) if job_view else {}
    has_scalars = any(item.last_step is not None for item in series.values())
    if not lineages and not has_scalars:
        raise LineageMergeError(
            f"no rank_<n> directory of {directory} holds a usable lineage or any scalar"
        )
    if lineages:
        merged = merge_rank_lineages(lineages, world_size=expected, summary_dir=directory)
    else:
        merged = _lineage_without_ranks(directory, expected)
    view = None
    lock_path = os.path.join(directory, MERGE_LOCK_NAME)
    try:
        # Private like every file RankScribe creates; a bounded wait like every wait.
        with filelock.FileLock(lock_path, timeout=_LOCK_SECONDS, mode=file_mode(False)):
            if has_scalars:
                hparams, metrics = session_values(merged)
                view = write_job_view(
                    directory,
                    series,
                    world_size=expected,
                    tensorboard=holds_tensorboard_files(on_disk),
                    hparams=hparams,
                    metrics=metrics,
                    host=host,
                )
                merged.sections["user_defined"].update(view.verdicts)
            merged.sections["user_defined"].update(extra)
            path = write_merged_lineage(directory, merged, host=host)
    except filelock.Timeout as error:
        raise LineageMergeError(
            f"another merge of {directory} has held {lock_path} for over {_LOCK_SECONDS} s"
        ) from error
    missing = [rank for rank in range(expected) if rank not in lineages]
    if missing:
        logger.warning("merged %s without ranks %s", directory, missing)
    return MergeOutcome(path, merged, sorted(lineages), missing, view)
