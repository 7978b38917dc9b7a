"""rankscribe.lineage: the lineage of training runs, and queries over it.

- What a run was: :func:`get_summary_lineage` (MindInsight's API, kept).
- Which runs match: :func:`filter_summary_lineage` (MindInsight's dict
  conditions) and :func:`filter_runs` (a string filter for terminals).
- How the ranks of one job merge: :func:`merge_rank_lineages` (pure) and
  :func:`merge_run_dir` (offline, from the ``rank_<n>`` directories).
- Recording: the :class:`TrainLineage` and :class:`EvalLineage` callbacks.
- TensorBoard's HParams tab: :func:`write_hparams`.
- The model: dataclasses that convert exactly to and from the writer's
  lineage protobuf messages.
"""

from __future__ import annotations

from rankscribe.lineage.callbacks import (
    EvalLineage,
    TrainLineage,
    eval_lineage_from_args,
    train_lineage_from_args,
)
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
from rankscribe.lineage.hparams import write_hparams
from rankscribe.lineage.lineage_file import merged_lineage_name, write_merged_lineage
from rankscribe.lineage.merge import MergeOutcome, merge_rank_lineages, merge_run_dir
from rankscribe.lineage.model import (
    Algorithm,
    DatasetGraphInfo,
    EvalLineageInfo,
    HyperParameters,
    ModelFile,
    OperationInfo,
    OperationParameterInfo,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.lineage.parser import ParsedRun, RunLineage, parse_run
from rankscribe.lineage.querier import (
    filter_runs,
    filter_summary_lineage,
    get_run_lineage,
    get_summary_lineage,
)

__version__ = "0.1.0"

__all__ = [
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineage",
    "EvalLineageInfo",
    "HyperParameters",
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
    "merged_lineage_name",
    "parse_run",
    "train_lineage_from_args",
    "write_hparams",
    "write_merged_lineage",
]
