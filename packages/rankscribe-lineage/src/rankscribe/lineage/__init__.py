"""rankscribe.lineage: the lineage of training runs, and queries over it.

- What a run was: :func:`get_summary_lineage` (MindInsight's API, kept).
- Which runs match: :func:`filter_summary_lineage` (MindInsight's dict
  conditions) and :func:`filter_runs` (a string filter for terminals).
- The model: dataclasses that convert exactly to and from the writer's
  lineage protobuf messages.
"""

from __future__ import annotations

from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageError,
    LineageExpressionError,
    LineageFileNotFoundError,
    LineageMergeError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    LineageSummaryAnalyzeException,
    LineageSummaryParseException,
)
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
from rankscribe.lineage.parser import RunLineage
from rankscribe.lineage.querier import filter_runs, filter_summary_lineage, get_summary_lineage

__version__ = "0.1.0"

__all__ = [
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineageInfo",
    "HyperParameters",
    "LineageDirNotExistError",
    "LineageError",
    "LineageExpressionError",
    "LineageFileNotFoundError",
    "LineageMergeError",
    "LineageParamSummaryPathError",
    "LineageParamTypeError",
    "LineageParamValueError",
    "LineageQuerySummaryDataError",
    "LineageSearchConditionParamError",
    "LineageSummaryAnalyzeException",
    "LineageSummaryParseException",
    "ModelFile",
    "OperationInfo",
    "OperationParameterInfo",
    "RunLineage",
    "TrainDataset",
    "TrainLineageInfo",
    "UserDefinedInfo",
    "ValidDataset",
    "__version__",
    "filter_runs",
    "filter_summary_lineage",
    "get_summary_lineage",
]
