"""The query API: ``get_summary_lineage``, ``filter_summary_lineage``, ``filter_runs``.

The first two keep MindInsight's behaviour (``docs/lineage-queries.md``): same
arguments, same result shape ``{'customized', 'object', 'count'}``, same checks,
errors and codes as MindInsight 2.3.1, with the few differences
``docs/mindinsight-differences.md`` lists and a test checks against the real
MindInsight. ``filter_runs`` is the terminal-friendly variant taking a string
filter.
"""

from __future__ import annotations

import copy
import logging
import marshal
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rankscribe.lineage._checks import check_optional_bool, check_path
from rankscribe.lineage.errors import (
    LineageFileNotFoundError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
)
from rankscribe.lineage.index._cache import (
    LineageRow,
    cyclic_gc_paused,
    value_getter,
)
from rankscribe.lineage.query._conditions import (
    CONTROL_KEYS,
    FIELD_MAPPING,
    LINEAGE_TYPES,
    SORT_BY_TAG,
    matches,
    resolve_summary_path,
    sort_by,
    validate_search_condition,
)
from rankscribe.lineage.query._selection import Selection, load_rows, select_rows
from rankscribe.lineage.record._discovery import list_lineage_files

if TYPE_CHECKING:
    from rankscribe.lineage.record._parser import RunLineage

logger = logging.getLogger(__name__)

__all__ = [
    "filter_runs",
    "filter_summary_lineage",
    "get_run_lineage",
    "get_summary_lineage",
    "selection_result",
]

DEFAULT_LIMIT = 10
_MODEL_LINEAGE_KEYS = tuple(name for name in FIELD_MAPPING if name != "summary_dir")


def _validate_keys(keys: object) -> list[str]:
    if not isinstance(keys, list):
        raise LineageParamTypeError("Keys must be list.")
    for element in keys:
        if not isinstance(element, str):
            raise LineageParamTypeError("Element of keys must be str.")
    # The parser (protobuf) is imported by the functions that parse: a query that
    # reads the index starts without it.
    from rankscribe.lineage.record._parser import SECTION_KEYS  # noqa: PLC0415

    if not set(keys).issubset(SECTION_KEYS):
        raise LineageParamValueError(f"Keys must be in {list(SECTION_KEYS)}.")
    return keys


def get_run_lineage(summary_dir: str) -> RunLineage | None:
    """The whole lineage of one run directory (user-defined info included), or None.

    None means the directory has lineage files but none could be used.
    Arguments and errors as for :func:`get_summary_lineage`.
    """
    directory = resolve_summary_path(summary_dir)
    try:
        files = list_lineage_files(directory)
    except OSError as error:
        logger.error("cannot list %s: %s", directory, error)
        raise LineageQuerySummaryDataError("Get summary lineage failed.") from error
    if not files:
        raise LineageFileNotFoundError("There is no summary log file under summary_dir.")
    from rankscribe.lineage.record._parser import parse_run  # noqa: PLC0415 - see above

    parsed = parse_run(directory, files)
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    return parsed.lineage


def get_summary_lineage(summary_dir: str, keys: list[str] | None = None) -> dict[str, Any]:
    """Return the lineage of one run directory.

    Args:
        summary_dir: absolute path of the run directory (no ``..``).
        keys: sections to return, a subset of ``metric``, ``hyper_parameters``,
            ``algorithm``, ``train_dataset``, ``valid_dataset``, ``model`` and
            ``dataset_graph``; None for all of them, ``[]`` for none.

    Returns:
        ``{'summary_dir': <real path>, <key>: <dict>, ...}`` with ``{}`` for a
        missing section, or ``{}`` when the directory's lineage files exist
        but none of them could be used. (User-defined info is not part of it,
        as in MindInsight; :func:`get_run_lineage` has it.)

    Raises:
        LineageParamSummaryPathError: ``summary_dir`` is not an absolute
            existing directory without ``..``.
        LineageParamTypeError, LineageParamValueError: bad ``keys``.
        LineageFileNotFoundError: the directory holds no ``_lineage`` file.
        LineageQuerySummaryDataError: the directory cannot be read.
    """
    resolve_summary_path(summary_dir)
    if keys is not None:
        keys = _validate_keys(keys)
    lineage = get_run_lineage(summary_dir)
    if lineage is None:
        return {}
    return lineage.summary_info(keys)


def _summary_dir_in_condition(base_dir: str, value: Any) -> Any:
    """A ``./<name>`` value as the run's absolute path (what results show); others as given.

    As in MindInsight 2.3.1, a value naming no run simply matches nothing.
    """
    if isinstance(value, str) and value.startswith("./"):
        return os.path.normpath(os.path.join(base_dir, value[2:]))
    return value


def _resolve_summary_dir_condition(base_dir: str, condition: dict[str, Any]) -> dict[str, Any]:
    """Make ``./``-relative summary_dir values absolute, in a copy of the condition."""
    summary_dir = condition.get("summary_dir")
    if not summary_dir:
        return condition
    resolved = dict(summary_dir)
    for key in ("in", "not_in"):
        if key in resolved:
            resolved[key] = [_summary_dir_in_condition(base_dir, path) for path in resolved[key]]
    if "eq" in resolved:
        resolved["eq"] = _summary_dir_in_condition(base_dir, resolved["eq"])
    return {**condition, "summary_dir": resolved}


def _matcher(condition: dict[str, Any]) -> Callable[[LineageRow], bool]:
    """Whether a row satisfies every field condition (compiled once per query)."""
    tests = [
        (value_getter(name), key, expected)
        for name, operations in condition.items()
        if name not in CONTROL_KEYS
        for key, expected in operations.items()
    ]

    def satisfied(row: LineageRow) -> bool:
        # A loop, not all(...): a generator per row is a measurable part of a warm query.
        for value_of, key, expected in tests:  # noqa: SIM110
            if not matches(key, expected, value_of(row)):
                return False
        return True

    return satisfied


def _lineage_types(condition: dict[str, Any]) -> list[str]:
    value = condition.get("lineage_type")
    if not value:
        return list(LINEAGE_TYPES)
    if value.get("in") is not None:
        return list(value["in"])
    return [value["eq"]]


def _value_type(values: list[Any]) -> str:
    names = {type(value).__name__ for value in values}
    if len(names) == 1:
        return names.pop()
    if names == {"int", "float"}:
        return "float"
    return "mixed"


def _customized(rows: list[LineageRow]) -> dict[str, dict[str, Any]]:
    """The ``metric/<k>`` and ``user_defined/<k>`` columns of the rows shown."""
    seen: dict[str, list[Any]] = {}
    for row in rows:
        for prefix, values in (("metric", row.metric), ("user_defined", row.user_defined)):
            for key, value in values.items():
                seen.setdefault(f"{prefix}/{key}", []).append(value)
    return {
        label: {
            "label": label,
            "required": label.startswith("metric/"),
            "type": _value_type(values),
        }
        for label, values in seen.items()
    }


_IMMUTABLE = (str, int, float, bool, type(None))


def _copied(values: dict[str, Any]) -> dict[str, Any]:
    """A copy the caller may change: values that are containers are copied deeply.

    Most values are numbers and text (immutable): a deepcopy of each made a
    result of 100,000 runs cost seconds.
    """
    return {
        key: value if isinstance(value, _IMMUTABLE) else copy.deepcopy(value)
        for key, value in values.items()
    }


class _GraphCopier:
    """Fresh copies of dataset graphs, which many runs share (one per distinct graph).

    A graph is plain data (dicts, lists, text, numbers) shared by every run
    that recorded the same pipeline; each result must get a copy of its own
    that the caller may change. ``copy.deepcopy`` costs ~12 us per graph,
    seconds over 100,000 runs; a graph serialized once with ``marshal`` and
    loaded per run gives the same independent copy in ~1.5 us. A graph
    ``marshal`` cannot hold (another type inside) is deep-copied.
    """

    def __init__(self) -> None:
        self._blobs: dict[int, tuple[Any, bytes | None]] = {}

    def copy(self, graph: Any) -> Any:
        if isinstance(graph, _IMMUTABLE):
            return graph
        known = self._blobs.get(id(graph))
        if known is None or known[0] is not graph:
            try:
                blob: bytes | None = marshal.dumps(graph)
            except ValueError:  # not plain data
                blob = None
            known = self._blobs[id(graph)] = (graph, blob)  # the graph kept: ids stay unique
        return copy.deepcopy(graph) if known[1] is None else marshal.loads(known[1])


def _objects(rows: list[LineageRow], lineage_types: list[str]) -> list[dict[str, Any]]:
    objects = []
    graphs = _GraphCopier()
    for row in rows:
        item: dict[str, Any] = {"summary_dir": row.summary_dir}
        if "model" in lineage_types:
            fields = row.fields
            model_lineage = {name: fields.get(name) for name in _MODEL_LINEAGE_KEYS}
            model_lineage["dataset_mark"] = row.dataset_mark
            model_lineage = _copied(model_lineage)
            model_lineage["metric"] = _copied(row.metric)
            model_lineage["user_defined"] = _copied(row.user_defined)
            item["model_lineage"] = model_lineage
        if "dataset" in lineage_types:
            item["dataset_graph"] = graphs.copy(row.dataset_graph)
        objects.append(item)
    return objects


def _result(rows: list[LineageRow], count: int, lineage_types: list[str]) -> dict[str, Any]:
    return {
        "customized": _customized(rows),
        "object": _objects(rows, lineage_types),
        "count": count,
    }


def _base_dir(summary_base_dir: object) -> str:
    return resolve_summary_path(summary_base_dir)


def filter_summary_lineage(
    summary_base_dir: str,
    search_condition: dict[str, Any] | None = None,
    *,
    use_index: bool | None = None,
) -> dict[str, Any]:
    """Filter, sort and page the runs under a base directory.

    Args:
        summary_base_dir: absolute path of the base directory; its runs are
            itself, its direct subdirectories and the runs further down in
            directories that are no run (docs/lineage-queries.md).
        search_condition: ``{<field>: {<op>: value, ...}, ...}`` with fields
            from ``FIELD_MAPPING`` or ``metric/<k>`` / ``user_defined/<k>``
            and ops ``eq lt gt le ge in not_in`` (all combined with AND;
            a run without the value fails ``lt gt le ge`` and passes
            ``not_in``), plus the control keys ``sorted_name`` (a field,
            or ``'tag'``, which keeps the base order), ``sorted_type``
            ('ascending' or 'descending'; None is the smallest value),
            ``limit`` (1..100) and ``offset`` (a page index, 0..100000)
            and ``lineage_type`` (``{'eq': 'model'}`` or ``{'in': [...]}``).
            MindInsight v0.1's documented form is accepted too:
            ``metric_<k>`` for ``metric/<k>`` (in fields and
            ``sorted_name``) and ``'lineage_type': 'model'``.
        use_index: read and update the index cache in the base dir (default:
            yes, unless the environment sets ``RANKSCRIBE_LINEAGE_INDEX=0``).

    Returns:
        ``{'customized': {...}, 'object': [...], 'count': <matches before paging>}``.

    Raises:
        LineageParamSummaryPathError, LineageSearchConditionParamError,
        LineageFileNotFoundError, LineageQuerySummaryDataError.
    """
    check_optional_bool("use_index", use_index)
    with cyclic_gc_paused():
        return _filter_summary_lineage(summary_base_dir, search_condition, use_index)


def _filter_summary_lineage(
    summary_base_dir: str, search_condition: dict[str, Any] | None, use_index: bool | None
) -> dict[str, Any]:
    base_dir = _base_dir(summary_base_dir)
    condition = validate_search_condition({} if search_condition is None else search_condition)
    condition = _resolve_summary_dir_condition(base_dir, condition)
    rows = load_rows(base_dir, use_index)
    if rows is None:
        raise LineageFileNotFoundError("There is no summary log file under summary_base_dir.")
    if not rows:
        return {"customized": {}, "object": [], "count": 0}
    selected = list(filter(_matcher(condition), rows))
    if "sorted_name" in condition and condition["sorted_name"] != SORT_BY_TAG:
        selected = sort_by(
            selected,
            value_getter(condition["sorted_name"]),
            descending=condition.get("sorted_type") == "descending",
        )
    page = selected
    if "limit" in condition or "offset" in condition:
        limit = condition.get("limit", DEFAULT_LIMIT)
        offset = condition.get("offset", 0)
        page = selected[offset * limit : (offset + 1) * limit]
    return _result(page, len(selected), _lineage_types(condition))


def _normalize_lineage_type(lineage_type: str | Sequence[str] | None) -> list[str]:
    if lineage_type is None:
        return list(LINEAGE_TYPES)
    wanted = [lineage_type] if isinstance(lineage_type, str) else list(lineage_type)
    if not wanted or not set(wanted).issubset(LINEAGE_TYPES):
        raise LineageParamValueError(
            f"lineage_type must be 'model', 'dataset' or a list of them, got {lineage_type!r}"
        )
    return wanted


def filter_runs(
    base_dir: str | os.PathLike[str],
    where: str | None = None,
    *,
    order_by: str | Sequence[str] | None = None,
    limit: int | None = None,
    offset: int = 0,
    lineage_type: str | Sequence[str] | None = None,
    use_index: bool | None = None,
) -> dict[str, Any]:
    """Query runs with a string filter, e.g. ``"loss < 0.5 and optimizer = 'Adam'"``.

    Args:
        base_dir: the base directory (relative paths are resolved).
        where: a filter in the grammar of :mod:`rankscribe.lineage.query._expressions`;
            None matches every run.
        order_by: sort keys, most significant first, each ``"<name> [asc|desc]"``
            (or ``"-<name>"`` for descending). Runs missing a key's value (or
            whose value is NaN) go last whatever the direction.
        limit: the most rows to return (None: all; there is no hidden cap).
        offset: rows to skip before the first returned one (a row count, not
            a page index as in ``filter_summary_lineage``).
        lineage_type: 'model', 'dataset', or both (default).
        use_index: as for :func:`filter_summary_lineage`.

    Returns:
        The same shape as :func:`filter_summary_lineage`; ``count`` is the
        number of matching runs before ``offset`` and ``limit``.

    Raises:
        LineageExpressionError: the filter does not parse, or names a
            ``metric/<k>`` or ``user_defined/<k>`` that no run has (a typo,
            refused as the command line refuses it; the message names the
            keys of that kind that exist).
        LineageParamValueError: a bad sort key (or one no run has), limit,
            offset or lineage_type.
        LineageFileNotFoundError: no lineage file under ``base_dir``.
    """
    check_path("base_dir", base_dir)
    if lineage_type is not None and not isinstance(lineage_type, (str, Sequence)):
        raise LineageParamTypeError(
            f"lineage_type must be 'model', 'dataset' or a list of them, "
            f"got {type(lineage_type).__name__}"
        )
    check_optional_bool("use_index", use_index)
    with cyclic_gc_paused():
        return _filter_runs(base_dir, where, order_by, limit, offset, lineage_type, use_index)


def _filter_runs(
    base_dir: str | os.PathLike[str],
    where: str | None,
    order_by: str | Sequence[str] | None,
    limit: int | None,
    offset: int,
    lineage_type: str | Sequence[str] | None,
    use_index: bool | None,
) -> dict[str, Any]:
    lineage_types = _normalize_lineage_type(lineage_type)
    selection = select_rows(
        base_dir, where, order_by=order_by, limit=limit, offset=offset, use_index=use_index
    )
    return selection_result(selection, lineage_types)


def selection_result(selection: Selection, lineage_types: Sequence[str]) -> dict[str, Any]:
    """The result dict of :func:`filter_runs` for a selection."""
    return _result(selection.page, selection.count, list(lineage_types))
