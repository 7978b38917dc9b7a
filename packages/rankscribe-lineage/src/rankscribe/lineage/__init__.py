"""rankscribe.lineage: the lineage of training runs, and queries over it.

- What a run was: :func:`get_summary_lineage` (MindInsight's API, kept) and
  :func:`get_run_lineage` (a :class:`RunLineage`).
- Which runs match: :func:`filter_summary_lineage` (MindInsight's dict
  conditions) and :func:`filter_runs` (a string filter for terminals).
- How the ranks of one job merge: :func:`merge_rank_lineages` (pure) and
  :func:`merge_run_dir` (offline, from the ``rank_<n>`` directories).
- Recording: the :class:`TrainLineage` and :class:`EvalLineage` callbacks (their
  base :class:`LineageCallback`; the record they write to: :class:`SummaryRecordLike`).
- Runs side by side across seeds: :func:`group_runs` (groups of runs that agree
  on lineage keys, their final values as mean +- std and their curves' bands).
- The job view (cross-rank curves and verdicts, judged timings) is a package of its own,
  :mod:`rankscribe.jobview`; the merge writes its files and verdicts.
- TensorBoard's HParams tab: :func:`write_hparams` (the command ``rankscribe-lineage
  hparams``).
- The errors: :class:`LineageError` here, the whole hierarchy in
  :mod:`rankscribe.lineage.errors`.

The record model (the dataclasses that convert to and from the writer's lineage
messages) is sibling-facing, in :mod:`rankscribe.lineage.recording`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.lineage._hparams import write_hparams
    from rankscribe.lineage.errors import LineageError
    from rankscribe.lineage.group._forming import GroupSpread
    from rankscribe.lineage.group._grouping import GroupedRuns, RunGroup, group_runs
    from rankscribe.lineage.merge._lineages import merge_rank_lineages
    from rankscribe.lineage.merge._merge import MergeOutcome, merge_run_dir
    from rankscribe.lineage.query._querier import (
        filter_runs,
        filter_summary_lineage,
        get_run_lineage,
        get_summary_lineage,
    )
    from rankscribe.lineage.record._callbacks import (
        EvalLineage,
        LineageCallback,
        SummaryRecordLike,
        TrainLineage,
    )
    from rankscribe.lineage.record._parser import RunLineage

# Where each name lives. Imported on first use (PEP 562): a command that reads an
# index and prints a table never loads the writer, numpy or protobuf
# (docs/lineage-queries.md, "The command line").
_HOMES = {
    "write_hparams": "rankscribe.lineage._hparams",
    "LineageError": "rankscribe.lineage.errors",
    "GroupSpread": "rankscribe.lineage.group._forming",
    "GroupedRuns": "rankscribe.lineage.group._grouping",
    "RunGroup": "rankscribe.lineage.group._grouping",
    "group_runs": "rankscribe.lineage.group._grouping",
    "merge_rank_lineages": "rankscribe.lineage.merge._lineages",
    "MergeOutcome": "rankscribe.lineage.merge._merge",
    "merge_run_dir": "rankscribe.lineage.merge._merge",
    "filter_runs": "rankscribe.lineage.query._querier",
    "filter_summary_lineage": "rankscribe.lineage.query._querier",
    "get_run_lineage": "rankscribe.lineage.query._querier",
    "get_summary_lineage": "rankscribe.lineage.query._querier",
    "EvalLineage": "rankscribe.lineage.record._callbacks",
    "LineageCallback": "rankscribe.lineage.record._callbacks",
    "SummaryRecordLike": "rankscribe.lineage.record._callbacks",
    "TrainLineage": "rankscribe.lineage.record._callbacks",
    "RunLineage": "rankscribe.lineage.record._parser",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())


__version__ = "0.1.0"  # the distribution's version (metadata, not an API name)

# The user's API (docs/contributing.md): the errors other than LineageError live in
# rankscribe.lineage.errors, and what the collector needs to record lineage (the record
# model among it) in rankscribe.lineage.recording.
__all__ = [
    "EvalLineage",
    "GroupSpread",
    "GroupedRuns",
    "LineageCallback",
    "LineageError",
    "MergeOutcome",
    "RunGroup",
    "RunLineage",
    "SummaryRecordLike",
    "TrainLineage",
    "filter_runs",
    "filter_summary_lineage",
    "get_run_lineage",
    "get_summary_lineage",
    "group_runs",
    "merge_rank_lineages",
    "merge_run_dir",
    "write_hparams",
]
