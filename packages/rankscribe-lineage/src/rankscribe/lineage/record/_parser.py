"""Reading lineage files and folding the files of one run into one lineage.

Semantics are MindInsight 0.7's (its LineageSummaryAnalyzer, LineageParser
and LineageObj):

- In one file the last ``train_lineage``, the last ``evaluation_lineage`` and
  the last ``dataset_graph`` win; every ``user_defined_info`` is kept in order.
- A file with none of train, evaluation or dataset graph contributes nothing
  (not even its user-defined info).
- Across a run's files, in order: a file holding a train lineage or a dataset
  graph first resets everything gathered so far; then its user-defined info,
  train lineage, evaluation lineage and dataset graph are applied. So a
  training run followed by a separate evaluation run (a second file) merges
  into one record.

Damaged files are skipped with a warning naming the file, and never stop the
other files or runs from being read. A file whose last record is incomplete
(its writer died mid-write, or is still writing) keeps its complete records.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import io
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage._checks import check_optional_mapping, check_path
from rankscribe.lineage.errors import LineageParamTypeError, LineageSummaryAnalyzeException
from rankscribe.lineage.record._dataset_graph import DatasetGraphInfo, graph_dict_from_proto
from rankscribe.lineage.record._discovery import LineageFile, list_lineage_files
from rankscribe.lineage.record._model import (
    EvalLineageInfo,
    TrainLineageInfo,
    UserDefinedInfo,
    user_values_from_proto,
)
from rankscribe.ranks.files import open_regular_descriptor
from rankscribe.writer.files import RecordReader
from rankscribe.writer.pb import lineage_pb2

logger = logging.getLogger(__name__)

# Imported by name so that type checking does not need protobuf's stubs.
_DECODE_ERROR: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError

__all__ = [
    "SECTION_KEYS",
    "LineageFileContent",
    "RunLineage",
    "fold_files",
    "parse_run",
    "read_lineage_file",
]

# get_summary_lineage's sections in their default order.
SECTION_KEYS = (
    "metric",
    "hyper_parameters",
    "algorithm",
    "train_dataset",
    "valid_dataset",
    "model",
    "dataset_graph",
)
_TRAIN_SECTIONS = ("hyper_parameters", "train_dataset", "algorithm", "model")


@dataclass
class LineageFileContent:
    """What one lineage file contributes to its run.

    The dataset graph is kept in MindInsight's dict form and each
    user-defined record as its flat dict of values (what queries use).
    """

    path: str
    train: TrainLineageInfo | None = None
    evaluation: EvalLineageInfo | None = None
    dataset_graph: dict[str, Any] | None = None
    user_defined: list[dict[str, Any]] = field(default_factory=list)
    record_count: int = 0
    torn_tail: str | None = None

    @property
    def has_lineage(self) -> bool:
        """True when the file holds a train or evaluation lineage or a dataset graph."""
        return any(part is not None for part in (self.train, self.evaluation, self.dataset_graph))


def read_lineage_file(
    path: str, graph_memo: dict[bytes, dict[str, Any]] | None = None, *, owned: bool = False
) -> LineageFileContent:
    """Read one ``_lineage`` file.

    ``graph_memo`` maps serialized dataset graphs to their dict form; runs of
    one base dir mostly share a few graphs, so a scan converts each once.
    ``owned``: the file must be this user's (``rankscribe.ranks.files.open_regular``'s
    rule), as a file at one of the job's own names must.

    Raises :class:`LineageSummaryAnalyzeException` when the file cannot be
    read, fails a checksum, or holds something that is not a LineageEvent.
    An incomplete last record is not an error: it is reported in
    ``torn_tail`` and the complete records before it are used.
    """
    content = LineageFileContent(path)
    try:
        reader = RecordReader(_file_source(path, owned), strict=False)
        for record in reader:
            if reader.corruptions:
                break
            content.record_count += 1
            event = lineage_pb2.LineageEvent.FromString(record.payload)
            _apply_event(content, event, graph_memo)
    except OSError as error:
        raise LineageSummaryAnalyzeException(f"cannot read {path}: {error}") from error
    except _DECODE_ERROR as error:
        raise LineageSummaryAnalyzeException(
            f"{path}: record {content.record_count} is not a LineageEvent ({error})"
        ) from error
    except UnicodeDecodeError as error:
        # protobuf refuses a map key that is not UTF-8 while parsing.
        raise _undecodable(content) from error
    if reader.corruptions:
        raise LineageSummaryAnalyzeException(f"{reader.corruptions[0]}")
    if reader.torn_tail is not None:
        content.torn_tail = (
            f"incomplete record at byte {reader.torn_tail.offset} ({reader.torn_tail.reason})"
        )
    return content


def _undecodable(content: LineageFileContent) -> LineageSummaryAnalyzeException:
    return LineageSummaryAnalyzeException(
        f"{content.path}: record {content.record_count} holds text that is not UTF-8"
    )


def _holds_bytes(value: Any) -> bool:
    """True when ``value`` holds a ``bytes`` anywhere (as a key, a value or an item).

    A proto2 string field that is not UTF-8 comes back from protobuf as
    ``bytes``; lineage answers are plain JSON types, so such a record is
    refused like a corrupt one.
    """
    kind: Any = type(value)
    if kind in _PLAIN:  # most values: one set lookup (a cold scan checks millions)
        return False
    if isinstance(value, bytes):
        return True
    if isinstance(value, dict):
        return any(_holds_bytes(key) or _holds_bytes(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_bytes(item) for item in value)
    # A model dataclass, walked in place: dataclasses.asdict copied every value first,
    # a tenth of a cold scan's time.
    return any(_holds_bytes(getattr(value, name)) for name in _field_names(kind))


_PLAIN = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _field_names(kind: Any) -> tuple[str, ...]:
    """The fields of a dataclass type; none for any other type."""
    if not dataclasses.is_dataclass(kind):
        return ()
    return tuple(item.name for item in dataclasses.fields(kind))


def _checked(content: LineageFileContent, value: Any, parts: Any) -> Any:
    if _holds_bytes(parts):
        raise _undecodable(content)
    return value


# Lineage files are small: read whole with bare descriptor calls (open, fstat, read
# until empty, close: no isatty or seek as a buffered file costs; a cold scan reads
# tens of thousands). A file larger than this is read as a stream.
_READ_AT_ONCE_LIMIT = 16 * 1024 * 1024
_READ_CHUNK = 64 * 1024


def _file_source(path: str, owned: bool = False) -> str | io.BytesIO:
    # A regular file only, never through a link, never waiting on a FIFO: the run dirs
    # of a shared base dir are other users' (rankscribe.ranks.files.open_regular).
    descriptor = open_regular_descriptor(path, owned=owned)
    try:
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(descriptor, _READ_CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > _READ_AT_ONCE_LIMIT:
                return path
    finally:
        os.close(descriptor)
    source = io.BytesIO(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    source.name = path  # named in the reader's messages
    return source


def _apply_event(
    content: LineageFileContent,
    event: lineage_pb2.LineageEvent,
    graph_memo: dict[bytes, dict[str, Any]] | None,
) -> None:
    kind = event.WhichOneof("what")
    if kind == "train_lineage":
        train = TrainLineageInfo.from_proto(event.train_lineage)
        content.train = _checked(content, train, train)
    elif kind == "evaluation_lineage":
        evaluation = EvalLineageInfo.from_proto(event.evaluation_lineage)
        content.evaluation = _checked(content, evaluation, evaluation)
    elif kind == "dataset_graph":
        if graph_memo is None:
            graph = graph_dict_from_proto(event.dataset_graph)
            content.dataset_graph = _checked(content, graph, graph)
            return
        key = event.dataset_graph.SerializeToString(deterministic=True)
        known = graph_memo.get(key)
        if known is None:
            known = graph_dict_from_proto(event.dataset_graph)
            graph_memo[key] = _checked(content, known, known)
        # Shared between the runs of one scan, which only read it.
        content.dataset_graph = known
    elif kind == "user_defined_info":
        values = user_values_from_proto(event.user_defined_info)
        content.user_defined.append(_checked(content, values, values))


def _empty_sections() -> dict[str, Any]:
    return {
        "model": {},
        "algorithm": {},
        "hyper_parameters": {},
        "train_dataset": {},
        "metric": {},
        "valid_dataset": {},
        "dataset_graph": {},
        "user_defined": {},
    }


@dataclass
class RunLineage:
    """The lineage of one run directory, as MindInsight's LineageObj holds it.

    ``sections`` maps ``metric``, ``hyper_parameters``, ``algorithm``,
    ``train_dataset``, ``valid_dataset``, ``model``, ``dataset_graph`` and
    ``user_defined`` to dicts in MindInsight's form (see
    :mod:`rankscribe.lineage.record._model`); a missing section is ``{}``.
    """

    summary_dir: str
    sections: dict[str, Any] = field(default_factory=_empty_sections)

    def _apply(self, content: LineageFileContent) -> None:
        """Apply one file, MindInsight's ``parse_and_update_lineage``.

        Raises ``ValueError`` when the evaluation's ``metric`` is not JSON.
        """
        evaluation = content.evaluation.to_query_dict() if content.evaluation else None
        if content.train is not None or content.dataset_graph is not None:
            self.sections = _empty_sections()
        for values in content.user_defined:
            self.sections["user_defined"].update(values)
        if content.train is not None:
            self.sections.update(content.train.to_query_dict())
        if evaluation is not None:
            if "metric" in evaluation:
                metric = evaluation["metric"]
                self.sections["metric"] = metric if isinstance(metric, dict) else {}
            if "valid_dataset" in evaluation:
                self.sections["valid_dataset"] = evaluation["valid_dataset"]
        if content.dataset_graph is not None:
            self.sections["dataset_graph"] = content.dataset_graph

    @classmethod
    def from_records(
        cls,
        summary_dir: str = "",
        *,
        train: TrainLineageInfo | lineage_pb2.TrainLineage | None = None,
        evaluation: EvalLineageInfo | lineage_pb2.EvaluationLineage | None = None,
        dataset_graph: DatasetGraphInfo | lineage_pb2.DatasetGraph | None = None,
        user_defined: Iterable[UserDefinedInfo | lineage_pb2.UserDefinedInfo] = (),
    ) -> RunLineage:
        """The lineage a file holding these records reads back as.

        Takes the model's dataclasses or the writer's protobuf messages, e.g.
        what each rank sends to rank 0 before :func:`merge_rank_lineages`.
        """
        content = LineageFileContent(summary_dir)
        if isinstance(train, lineage_pb2.TrainLineage):
            train = TrainLineageInfo.from_proto(train)
        if isinstance(evaluation, lineage_pb2.EvaluationLineage):
            evaluation = EvalLineageInfo.from_proto(evaluation)
        content.train, content.evaluation = train, evaluation
        if isinstance(dataset_graph, lineage_pb2.DatasetGraph):
            content.dataset_graph = graph_dict_from_proto(dataset_graph)
        elif dataset_graph is not None:
            content.dataset_graph = dataset_graph.to_graph_dict()
        for info in user_defined:
            content.user_defined.append(
                user_values_from_proto(info)
                if isinstance(info, lineage_pb2.UserDefinedInfo)
                else info.to_values()
            )
        lineage = cls(summary_dir)
        lineage._apply(content)
        return lineage

    def section(self, name: str) -> dict[str, Any]:
        value = self.sections.get(name)
        return value if isinstance(value, dict) else {}

    def summary_info(self, keys: list[str] | None = None) -> dict[str, Any]:
        """``get_summary_lineage``'s result: summary_dir, then the requested sections."""
        result: dict[str, Any] = {"summary_dir": self.summary_dir}
        for key in SECTION_KEYS if keys is None else keys:
            result[key] = copy.deepcopy(self.section(key))
        return result

    def to_json_dict(self) -> dict[str, Any]:
        return {"summary_dir": self.summary_dir, **copy.deepcopy(self.sections)}

    @classmethod
    def from_json_dict(cls, values: dict[str, Any]) -> RunLineage:
        sections = _empty_sections()
        for key in sections:
            value = values.get(key)
            if isinstance(value, dict):
                sections[key] = copy.deepcopy(value)
        return cls(str(values.get("summary_dir", "")), sections)


@dataclass
class ParsedRun:
    """A run's lineage (None when no file could be used) and what went wrong."""

    lineage: RunLineage | None
    warnings: list[str] = field(default_factory=list)
    # False when a file could not be read at all (e.g. permissions): the
    # outcome may change without the file changing, so it must not be cached.
    cacheable: bool = True


def parse_run(
    directory: str,
    files: list[LineageFile] | None = None,
    graph_memo: dict[bytes, dict[str, Any]] | None = None,
) -> ParsedRun:
    """Fold the lineage files of ``directory`` (already listed, or listed now)."""
    directory = check_path("directory", directory)
    check_optional_mapping("graph_memo", graph_memo)
    if files is not None and not isinstance(files, list):
        raise LineageParamTypeError(
            f"files must be a list of LineageFile or None, got {type(files).__name__}"
        )
    if files is None:
        files = list_lineage_files(directory)
    return fold_files(directory, files, graph_memo)


def fold_files(
    directory: str, files: list[LineageFile], graph_memo: dict[bytes, dict[str, Any]] | None
) -> ParsedRun:
    """:func:`parse_run` of arguments already checked (a cold scan folds every run)."""
    result = ParsedRun(None)
    for item in files:
        path = os.path.join(directory, item.name)
        if item.size == 0:
            result.warnings.append(f"skipping empty lineage file {path}")
            continue
        try:
            content = read_lineage_file(path, graph_memo)
        except LineageSummaryAnalyzeException as error:
            if isinstance(error.__cause__, OSError):
                result.cacheable = False
            result.warnings.append(f"skipping unusable lineage file {path}: {error.message}")
            continue
        if content.torn_tail is not None:
            result.warnings.append(
                f"lineage file {path} ends with an {content.torn_tail}; "
                f"using its {content.record_count} complete records"
            )
        if not content.has_lineage:
            logger.debug("%s holds no train, evaluation or dataset graph record", path)
            continue
        lineage = result.lineage or RunLineage(directory)
        try:
            lineage._apply(content)
        except ValueError as error:
            result.warnings.append(
                f"skipping lineage file {path}: its evaluation metric is not JSON ({error})"
            )
            continue
        result.lineage = lineage
    return result
