"""rankscribe.lineage: the lineage of training runs, and queries over it.

- What a run was: :func:`get_summary_lineage` (MindInsight's API, kept).
- Which runs match: :func:`filter_summary_lineage` (MindInsight's dict
  conditions) and :func:`filter_runs` (a string filter for terminals).
- How the ranks of one job merge: :func:`merge_rank_lineages` (pure) and
  :func:`merge_run_dir` (offline, from the ``rank_<n>`` directories).
- Recording: the :class:`TrainLineage` and :class:`EvalLineage` callbacks.
- TensorBoard's HParams tab: :func:`write_hparams`.
- The job view (cross-rank curves and verdicts): :mod:`rankscribe.lineage.jobview`.
- The model: dataclasses that convert exactly to and from the writer's
  lineage protobuf messages.
"""

from __future__ import annotations

from rankscribe.lineage._hparams import write_hparams
from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageError,
    LineageExpressionError,
    LineageFileNotFoundError,
    LineageLogError,
    LineageMergeError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    LineageSummaryAnalyzeException,
    LineageSummaryParseException,
    MindInsightException,
)
from rankscribe.lineage.jobview import JobView, RankSeries, series_from_dir, write_job_view
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
    TrainLineage,
    eval_lineage_from_args,
    train_lineage_from_args,
)
from rankscribe.lineage.record._dataset_graph import (
    DatasetGraphInfo,
    OperationInfo,
    OperationParameterInfo,
)
from rankscribe.lineage.record._lineage_file import write_merged_lineage
from rankscribe.lineage.record._model import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    ModelFile,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.lineage.record._parser import ParsedRun, RunLineage, parse_run

__version__ = "0.1.0"

__all__ = [
    "MERGE_LOCK_NAME",
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineage",
    "EvalLineageInfo",
    "HyperParameters",
    "JobView",
    "LineageDirNotExistError",
    "LineageError",
    "LineageExpressionError",
    "LineageFileNotFoundError",
    "LineageLogError",
    "LineageMergeError",
    "LineageParamSummaryPathError",
    "LineageParamTypeError",
    "LineageParamValueError",
    "LineageQuerySummaryDataError",
    "LineageSearchConditionParamError",
    "LineageSummaryAnalyzeException",
    "LineageSummaryParseException",
    "MergeOutcome",
    "MindInsightException",
    "ModelFile",
    "OperationInfo",
    "OperationParameterInfo",
    "ParsedRun",
    "RankSeries",
    "RunLineage",
    "TrainDataset",
    "TrainLineage",
    "TrainLineageInfo",
    "UserDefinedInfo",
    "ValidDataset",
    "__version__",
    "eval_lineage_from_args",
    "filter_runs",
    "filter_summary_lineage",
    "get_run_lineage",
    "get_summary_lineage",
    "merge_rank_lineages",
    "merge_run_dir",
    "parse_run",
    "series_from_dir",
    "train_lineage_from_args",
    "write_hparams",
    "write_job_view",
    "write_merged_lineage",
]
