"""Merging the lineages of a distributed job's ranks into one job lineage (a pure function).

:func:`merge_rank_lineages` takes each rank's lineage and returns the job's; the
offline merge of a job directory (:mod:`rankscribe.lineage.merge._merge`) and rank
0's merge at the end of training both call it.

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
from collections.abc import Callable, Mapping
from typing import Any

from rankscribe.jobview.parts import missing_ranges, ranges_text
from rankscribe.lineage._checks import check_mapping
from rankscribe.lineage.errors import LineageMergeError, LineageParamTypeError
from rankscribe.lineage.record._parser import RunLineage

logger = logging.getLogger(__name__)

__all__ = ["checked_user_defined", "merge_rank_lineages"]

_INT32_MAX = 2**31 - 1


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
            _as_float(value)
            for value in self.values(getter).values()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        if not present:
            return None
        # min/max with a NaN depend on where it is: take the extremes of the rest.
        numbers = [value for value in present if not math.isnan(value)] or present
        self.notes[f"{note}_min"] = min(numbers)
        self.notes[f"{note}_max"] = max(numbers)
        return _mean(present)

    def summed(self, label: str, getter: Callable[[RunLineage], Any]) -> int | None:
        present = [value for value in self.values(getter).values() if isinstance(value, int)]
        if not present:
            return None
        total = sum(present)
        if not -_INT32_MAX - 1 <= total <= _INT32_MAX:
            # The wire field is int32: keep the exact total as text beside it (ranks'
            # negative sizes, as a planted file may hold, add up below it too).
            self.notes[f"{label}_total"] = str(total)
            return None
        return total


def _mean(values: list[float]) -> float:
    """The mean of ``values``, whatever they hold: NaN when one is NaN or both infinities
    are among them (inf - inf), the infinity when one kind is; otherwise summed exactly
    (fsum), each value scaled first when the sum alone would overflow a float."""
    if any(map(math.isnan, values)) or (math.inf in values and -math.inf in values):
        return math.nan
    for infinity in (math.inf, -math.inf):
        if infinity in values:
            return infinity
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # 1e308 + 1e308: the mean is still a float
        return math.fsum(value / len(values) for value in values)


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
    for key in (
        "optimizer",
        "learning_rate",
        "loss_function",
        "epoch",
        "parallel_mode",
        "batch_size",
    ):
        value = merger.agreed(key, _section_getter("hyper_parameters", key))
        if value is not None:
            hyper[key] = value
    if any(lineage.section("hyper_parameters") for lineage in merger.lineages.values()):
        # int32 on the wire; a larger world (read from a file) stays exact in ranks_expected.
        hyper["device_num"] = min(world_size, _INT32_MAX)
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


def _as_float(value: float) -> float:
    """``value`` as a float; an int beyond the floats (a metric of 400 digits) is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


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
    whole = (
        every_rank
        and len(set(notes.values())) == 1
        and all(isinstance(note, str) and note.startswith("whole:") for note in notes.values())
    )
    if notes:  # the ranks' own notes are read here, never merged as they are
        merger.notes[note_key] = ("whole" if whole else "shards") if every_rank else "unknown"
    size = (
        merger.agreed(f"{section}_size", size_getter)
        if whole
        else merger.summed(f"{section}_size", size_getter)
    )
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
        raise LineageParamTypeError(f"summary_dir must be a str, got {type(summary_dir).__name__}")
    extra = checked_user_defined(user_defined)
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
    # From the ranks that exist: a world size read from a file may be 2**31 - 1.
    missing = missing_ranges(records, expected)
    user_keys_of_job.update(merger.notes)
    user_keys_of_job.update(
        {
            "ranks_reported": len(ranks),
            "ranks_expected": expected if expected <= _INT32_MAX else float(expected),
            "ranks_missing": ranges_text(missing),
            "disagreements": ",".join(merger.disagreements),
        }
    )
    user_keys_of_job.update(extra)
    merged.sections["user_defined"] = user_keys_of_job
    return merged


def checked_user_defined(
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
        if (
            not isinstance(key, str)
            or isinstance(value, bool)
            or not isinstance(value, (int, float, str))
        ):
            raise LineageParamTypeError(
                f"user_defined[{key!r}] must be a str key with an int, float or str value, "
                f"got {value!r} ({type(value).__name__})"
            )
        checked[key] = value
    return checked
