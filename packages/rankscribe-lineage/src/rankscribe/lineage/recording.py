"""What the collector needs to record and merge lineage (sibling-facing, not the user's API).

The collector's callbacks build the lineage callbacks from its own arguments
(:func:`train_lineage_from_args`, :func:`eval_lineage_from_args`), read one run's
lineage files back (:func:`parse_run`, :class:`ParsedRun`; the files when already
listed: :class:`LineageFile`), write the job's merged lineage
(:func:`write_merged_lineage`) and take the merge's lock (:data:`MERGE_LOCK_NAME`).
A rank keeps the train lineage known at the start of training
(:func:`write_train_start`, removed by :func:`remove_train_start` once the run's own
train lineage is on disk), and the merge reads a rank with it
(:func:`parse_rank_run`), so an interrupted job's merge keeps its hyper-parameters. A rank
whose training stopped on an exception says so (:func:`write_train_stop`; a signal's,
SIGTERM or SIGINT, one of :data:`STOP_SIGNALS`), and the merge reads it
(:func:`read_train_stop`) for the job view's stop verdict.
The merged lineage names the ranks that wrote outside the job's directory
(:func:`rank_dirs_note`). The HParams session of a merged lineage (its
hyper-parameters and final metrics, :func:`session_values`) goes into the job's
TensorBoard file. A run given no optimizer has the one its network holds
(:func:`optimizer_of`, the rule the lineage callbacks follow too).

The record model is here too: the dataclasses that convert exactly to and from the
writer's lineage protobuf messages (:class:`TrainLineageInfo`, :class:`EvalLineageInfo`,
:class:`DatasetGraphInfo`, :class:`UserDefinedInfo` and their parts;
:class:`ScalarMessage` is the base of those made of scalar fields only), which the
callbacks above return and ``RunLineage.from_records`` takes.
The user's API is :mod:`rankscribe.lineage`; docs/contributing.md lists the
sibling-facing modules.
"""

from __future__ import annotations

from rankscribe.lineage._hparams import session_values
from rankscribe.lineage.merge._merge import MERGE_LOCK_NAME, rank_dirs_note
from rankscribe.lineage.record._callbacks import eval_lineage_from_args, train_lineage_from_args
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
from rankscribe.lineage.record._optimizer_search import optimizer_of
from rankscribe.lineage.record._parser import ParsedRun, parse_run
from rankscribe.lineage.record._train_start import (
    STOP_SIGNALS,
    TRAIN_START_FILE_NAME,
    TRAIN_STOP_FILE_NAME,
    TrainStop,
    parse_rank_run,
    read_train_stop,
    remove_train_start,
    write_train_start,
    write_train_stop,
)

__all__ = [
    "MERGE_LOCK_NAME",
    "STOP_SIGNALS",
    "TRAIN_START_FILE_NAME",
    "TRAIN_STOP_FILE_NAME",
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineageInfo",
    "HyperParameters",
    "LineageFile",
    "ModelFile",
    "OperationInfo",
    "OperationParameterInfo",
    "ParsedRun",
    "ScalarMessage",
    "TrainDataset",
    "TrainLineageInfo",
    "TrainStop",
    "UserDefinedInfo",
    "ValidDataset",
    "eval_lineage_from_args",
    "optimizer_of",
    "parse_rank_run",
    "parse_run",
    "rank_dirs_note",
    "read_train_stop",
    "remove_train_start",
    "session_values",
    "train_lineage_from_args",
    "write_merged_lineage",
    "write_train_start",
    "write_train_stop",
]
