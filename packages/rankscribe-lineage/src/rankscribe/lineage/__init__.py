"""rankscribe.lineage: the lineage of training runs, and queries over it.

- What a run was: :func:`get_summary_lineage` (MindInsight's API, kept).
- Which runs match: :func:`filter_summary_lineage` (MindInsight's dict
  conditions) and :func:`filter_runs` (a string filter for terminals).
- How the ranks of one job merge: :func:`merge_rank_lineages` (pure) and
  :func:`merge_run_dir` (offline, from the ``rank_<n>`` directories).
- Recording: the :class:`TrainLineage` and :class:`EvalLineage` callbacks (their
  base :class:`LineageCallback`; the record they write to: :class:`SummaryRecordLike`).
- One run's lineage files, folded: :func:`parse_run` (the files, when already
  listed: :class:`LineageFile`).
- TensorBoard's HParams tab: :func:`write_hparams`.
- The job view (cross-rank curves and verdicts): :mod:`rankscribe.lineage.jobview`;
  per-rank timings from anywhere judged as the job view judges them:
  :func:`judge_timings` (thresholds: :class:`VerdictSettings`).
- The model: dataclasses that convert exactly to and from the writer's
  lineage protobuf messages (:class:`ScalarMessage` is the base of those made of
  scalar fields only).
- The errors: :class:`LineageError` here, the whole hierarchy in
  :mod:`rankscribe.lineage.errors`.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rankscribe.lineage._hparams import write_hparams
    from rankscribe.lineage.errors import LineageDirNotExistError as LineageDirNotExistError
    from rankscribe.lineage.errors import LineageError
    from rankscribe.lineage.errors import LineageExpressionError as LineageExpressionError
    from rankscribe.lineage.errors import LineageFileNotFoundError as LineageFileNotFoundError
    from rankscribe.lineage.errors import LineageLogError as LineageLogError
    from rankscribe.lineage.errors import LineageMergeError as LineageMergeError
    from rankscribe.lineage.errors import (
        LineageParamSummaryPathError as LineageParamSummaryPathError,
    )
    from rankscribe.lineage.errors import LineageParamTypeError as LineageParamTypeError
    from rankscribe.lineage.errors import LineageParamValueError as LineageParamValueError
    from rankscribe.lineage.errors import (
        LineageQuerySummaryDataError as LineageQuerySummaryDataError,
    )
    from rankscribe.lineage.errors import (
        LineageSearchConditionParamError as LineageSearchConditionParamError,
    )
    from rankscribe.lineage.errors import (
        LineageSummaryAnalyzeException as LineageSummaryAnalyzeException,
    )
    from rankscribe.lineage.errors import (
        LineageSummaryParseException as LineageSummaryParseException,
    )
    from rankscribe.lineage.errors import MindInsightException as MindInsightException
    from rankscribe.lineage.jobview import JobView as JobView
    from rankscribe.lineage.jobview import RankSeries as RankSeries
    from rankscribe.lineage.jobview import VerdictSettings, judge_timings
    from rankscribe.lineage.jobview import series_from_dir as series_from_dir
    from rankscribe.lineage.jobview import write_job_view as write_job_view
    from rankscribe.lineage.merge._lineages import merge_rank_lineages
    from rankscribe.lineage.merge._merge import MERGE_LOCK_NAME, MergeOutcome, merge_run_dir
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
        eval_lineage_from_args,
        train_lineage_from_args,
    )
    from rankscribe.lineage.record._dataset_graph import (
        DatasetGraphInfo,
        OperationInfo,
        OperationParameterInfo,
    )
    from rankscribe.lineage.record._discovery import LineageFile
    from rankscribe.lineage.record._lineage_file import write_merged_lineage
    from rankscribe.lineage.record._model import (
        Algorithm,
        EvalLineageInfo,
        HyperParameters,
        ModelFile,
        ScalarMessage,
        TrainDataset,
        TrainLineageInfo,
        UserDefinedInfo,
        ValidDataset,
    )
    from rankscribe.lineage.record._parser import ParsedRun, RunLineage, parse_run

# Where each name lives. Imported on first use (PEP 562): a command that reads an
# index and prints a table never loads the writer, numpy or protobuf
# (docs/lineage-queries.md, "The command line").
_HOMES = {
    "write_hparams": "rankscribe.lineage._hparams",
    "LineageDirNotExistError": "rankscribe.lineage.errors",
    "LineageError": "rankscribe.lineage.errors",
    "LineageExpressionError": "rankscribe.lineage.errors",
    "LineageFileNotFoundError": "rankscribe.lineage.errors",
    "LineageLogError": "rankscribe.lineage.errors",
    "LineageMergeError": "rankscribe.lineage.errors",
    "LineageParamSummaryPathError": "rankscribe.lineage.errors",
    "LineageParamTypeError": "rankscribe.lineage.errors",
    "LineageParamValueError": "rankscribe.lineage.errors",
    "LineageQuerySummaryDataError": "rankscribe.lineage.errors",
    "LineageSearchConditionParamError": "rankscribe.lineage.errors",
    "LineageSummaryAnalyzeException": "rankscribe.lineage.errors",
    "LineageSummaryParseException": "rankscribe.lineage.errors",
    "MindInsightException": "rankscribe.lineage.errors",
    "JobView": "rankscribe.lineage.jobview",
    "RankSeries": "rankscribe.lineage.jobview",
    "VerdictSettings": "rankscribe.lineage.jobview",
    "judge_timings": "rankscribe.lineage.jobview",
    "series_from_dir": "rankscribe.lineage.jobview",
    "write_job_view": "rankscribe.lineage.jobview",
    "merge_rank_lineages": "rankscribe.lineage.merge._lineages",
    "MERGE_LOCK_NAME": "rankscribe.lineage.merge._merge",
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
    "eval_lineage_from_args": "rankscribe.lineage.record._callbacks",
    "train_lineage_from_args": "rankscribe.lineage.record._callbacks",
    "DatasetGraphInfo": "rankscribe.lineage.record._dataset_graph",
    "OperationInfo": "rankscribe.lineage.record._dataset_graph",
    "OperationParameterInfo": "rankscribe.lineage.record._dataset_graph",
    "LineageFile": "rankscribe.lineage.record._discovery",
    "write_merged_lineage": "rankscribe.lineage.record._lineage_file",
    "Algorithm": "rankscribe.lineage.record._model",
    "EvalLineageInfo": "rankscribe.lineage.record._model",
    "HyperParameters": "rankscribe.lineage.record._model",
    "ModelFile": "rankscribe.lineage.record._model",
    "ScalarMessage": "rankscribe.lineage.record._model",
    "TrainDataset": "rankscribe.lineage.record._model",
    "TrainLineageInfo": "rankscribe.lineage.record._model",
    "UserDefinedInfo": "rankscribe.lineage.record._model",
    "ValidDataset": "rankscribe.lineage.record._model",
    "ParsedRun": "rankscribe.lineage.record._parser",
    "RunLineage": "rankscribe.lineage.record._parser",
    "parse_run": "rankscribe.lineage.record._parser",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
        # A submodule the eager imports used to load as a side effect (``package.reader``).
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__version__ = "0.1.0"

# The `name as name` imports above stay importable for code written against earlier
# versions; they are not listed here: each has one home (errors, jobview) where the
# docs, the examples and the other packages spell it (docs/contributing.md).
__all__ = [
    "MERGE_LOCK_NAME",
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineage",
    "EvalLineageInfo",
    "HyperParameters",
    "LineageCallback",
    "LineageError",
    "LineageFile",
    "MergeOutcome",
    "ModelFile",
    "OperationInfo",
    "OperationParameterInfo",
    "ParsedRun",
    "RunLineage",
    "ScalarMessage",
    "SummaryRecordLike",
    "TrainDataset",
    "TrainLineage",
    "TrainLineageInfo",
    "UserDefinedInfo",
    "ValidDataset",
    "VerdictSettings",
    "__version__",
    "eval_lineage_from_args",
    "filter_runs",
    "filter_summary_lineage",
    "get_run_lineage",
    "get_summary_lineage",
    "judge_timings",
    "merge_rank_lineages",
    "merge_run_dir",
    "parse_run",
    "train_lineage_from_args",
    "write_hparams",
    "write_merged_lineage",
]
