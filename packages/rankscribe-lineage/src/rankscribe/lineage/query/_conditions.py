"""Search conditions of ``filter_summary_lineage``: fields, checks and matching.

The rules are MindInsight 2.3.1's (its checks and messages):
see ``FIELD_MAPPING`` (``record/_fields.py``) for the searchable fields, ``OPERATORS`` for the
comparisons. Every problem with a condition raises
:class:`LineageSearchConditionParamError` whose message is MindInsight's
("Search_condition param error: ...").
"""

from __future__ import annotations

import functools
import math
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageSearchConditionParamError,
)
from rankscribe.lineage.query._first_form import to_current_form
from rankscribe.lineage.record._fields import (
    FIELD_MAPPING,
    INT_FIELDS,
    NUMBER_FIELDS,
    STRING_FIELDS,
    field_kind,
)

__all__ = [
    "CONTROL_KEYS",
    "FIELD_MAPPING",
    "LINEAGE_TYPES",
    "OPERATORS",
    "SORT_BY_TAG",
    "compare_values",
    "field_kind",
    "is_searchable",
    "matches",
    "resolve_summary_path",
    "sort_by",
    "validate_search_condition",
]

OPERATORS = ("eq", "lt", "gt", "le", "ge", "in", "not_in")
CONTROL_KEYS = ("limit", "offset", "sorted_name", "sorted_type", "lineage_type")
LINEAGE_TYPES = ("dataset", "model")
SORTED_TYPES = ("ascending", "descending", None)

_INT64_MAX = 2**63 - 1
_LIST_OPERATORS = ("in", "not_in")

# MindInsight 2.3.1's per-field messages (SEARCH_MODEL_ERROR_MSG_MAPPING).
_FIELD_MESSAGES = {
    "summary_dir": "The parameter summary_dir is invalid. It should be a dict and the value "
    "should be a string.",
    "loss_function": "The parameter loss_function is invalid. It should be a dict and the "
    "value should be a string.",
    "train_dataset_path": "The parameter train_dataset_path is invalid. It should be a dict "
    "and the value should be a string.",
    "train_dataset_count": "The parameter train_dataset_count is invalid. It should be a dict "
    "and the value should be a integer between 0 and pow(2, 63) -1.",
    "test_dataset_path": "The parameter test_dataset_path is invalid. It should be a dict and "
    "the value should be a string.",
    "test_dataset_count": "The parameter test_dataset_count is invalid. It should be a dict "
    "and the value should be a integer between 0 and pow(2, 63) -1.",
    "network": "The parameter network is invalid. It should be a dict and the value should "
    "be a string.",
    "optimizer": "The parameter optimizer is invalid. It should be a dict and the value "
    "should be a string.",
    "learning_rate": "The parameter learning_rate is invalid. It should be a dict and the "
    "value should be a float or a integer.",
    "epoch": "The parameter epoch is invalid. It should be a positive integer.",
    "batch_size": "The parameter batch_size is invalid. It should be a non-negative integer.",
    "device_num": "The parameter device_num is invalid. It should be a non-negative integer.",
    "loss": "The parameter loss is invalid. It should be a float.",
    "model_size": "The parameter model_size is invalid. It should be an integer between 0 "
    "and pow(2, 63) -1.",
    "dataset_mark": "The parameter dataset_mark is invalid. It should be a string.",
    "limit": "Invalid input limit. 0 < limit <= 100",
    "offset": "Invalid input offset. 0 <= offset <= 100000",
    "sorted_name": "The parameter sorted_name is invalid. It should be a string.",
    "sorted_type": "The parameter sorted_type is invalid. It should be a string.",
    "lineage_type": "The parameter lineage_type is invalid. It should be 'dataset' or 'model'.",
}
_METRIC_MESSAGE = (
    "The parameter {} is invalid. It should be a dict and the value should be a float or a integer"
)
# MindInsight says `in` for both list operators.
_LIST_MESSAGE = "The value of `in` operation must be list or tuple."
_OPERATION_MESSAGE = "Its operation should be `eq`, `in` or `not_in`."


class _ConditionProblemError(Exception):
    """A field-level problem: the field's fixed message, or this one if it names an operation."""


def is_searchable(name: object) -> bool:
    """True for a FIELD_MAPPING name or a ``metric/<k>`` / ``user_defined/<k>`` name."""
    return isinstance(name, str) and (
        name in FIELD_MAPPING or name.startswith(("metric/", "user_defined/"))
    )


# MindInsight >= 1.0 sorts on a run's ``added_info`` under this name (tags set
# in its web UI). Files carry none, so every run ties and the order stays.
SORT_BY_TAG = "tag"


def _is_sortable(name: object) -> bool:
    return isinstance(name, str) and (
        name in FIELD_MAPPING
        or name == SORT_BY_TAG
        or (name.startswith("metric/") and len(name) > len("metric/"))
        or (name.startswith("user_defined/") and len(name) > len("user_defined/"))
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_list_operand(key: str, value: object) -> None:
    if key in _LIST_OPERATORS and not isinstance(value, (list, tuple)):
        raise _ConditionProblemError(_LIST_MESSAGE)


def _check_string_field(condition: dict[str, Any]) -> None:
    # Several operators are fine (all must hold), as in MindInsight 2.3.1.
    if not set(condition).issubset(("eq", "in", "not_in")):
        raise _ConditionProblemError(_OPERATION_MESSAGE)
    for key, value in condition.items():
        _check_list_operand(key, value)
        if key not in _LIST_OPERATORS and not isinstance(value, str):
            raise _ConditionProblemError("Wrong value type.")


def _check_int_field(condition: dict[str, Any]) -> None:
    for key, value in condition.items():
        _check_list_operand(key, value)
        if key in _LIST_OPERATORS:
            continue
        if not _is_int(value):
            raise _ConditionProblemError("Wrong value type.")
        if not 0 <= value <= _INT64_MAX:
            raise _ConditionProblemError("Int value should <= pow(2, 63) - 1.")


def _check_number_field(condition: dict[str, Any]) -> None:
    # MindInsight 2.3.1 refuses not_in here (its check knows `in` only); it is
    # accepted with a list, like on every other field (docs/mindinsight-differences.md).
    for key, value in condition.items():
        _check_list_operand(key, value)
        if key not in _LIST_OPERATORS and not _is_number(value):
            raise _ConditionProblemError("Wrong value type.")


def _check_attribute(name: object, condition: object) -> None:
    """MindInsight's pre-load check of one search attribute."""
    if not is_searchable(name):
        raise LineageParamValueError("The search attribute not supported.")
    assert isinstance(name, str)
    if not isinstance(condition, dict):
        raise LineageParamTypeError(f"The search_condition element {name} should be dict.")
    for key in condition:
        if key not in OPERATORS:
            raise LineageParamValueError(
                "The compare condition should be in ('eq', 'lt', 'gt', 'le', 'ge', 'in', 'not_in')."
            )
    if name.startswith("metric/"):
        if name == "metric/":
            raise LineageParamValueError("The search attribute not supported.")
        try:
            _check_number_field(condition)
        except _ConditionProblemError:
            raise LineageSearchConditionParamError(_METRIC_MESSAGE.format(name)) from None


def _check_field_values(name: str, condition: dict[str, Any]) -> None:
    try:
        if name in STRING_FIELDS:
            _check_string_field(condition)
        elif name in INT_FIELDS:
            _check_int_field(condition)
        elif name in NUMBER_FIELDS:
            _check_number_field(condition)
    except _ConditionProblemError as problem:
        detail = str(problem)
        message = (
            f"The parameter {name} is invalid. {detail}"
            if "operation" in detail.lower()
            else _FIELD_MESSAGES[name]
        )
        raise LineageSearchConditionParamError(message) from None


def _check_control_types(condition: dict[str, Any]) -> None:
    """MindInsight's ``validate_condition``."""
    for key in ("limit", "offset"):
        if key in condition and not _is_int(condition[key]):
            raise LineageParamTypeError(f"The {key} must be int.")
    if "sorted_name" in condition and not _is_sortable(condition["sorted_name"]):
        raise LineageParamValueError(
            f"The sorted_name must be in {list(FIELD_MAPPING)} or start with `metric/` or "
            f"`user_defined/`."
        )
    if "sorted_type" in condition:
        if "sorted_name" not in condition:
            raise LineageParamValueError("The sorted_name must exist when sorted_type exists.")
        if condition["sorted_type"] not in SORTED_TYPES:
            raise LineageParamValueError("The sorted_type must be ascending or descending.")


def _check_control_values(condition: dict[str, Any]) -> None:
    limit = condition.get("limit", 1)
    offset = condition.get("offset", 0)
    if not 0 < limit <= 100:
        raise LineageSearchConditionParamError(_FIELD_MESSAGES["limit"])
    if not 0 <= offset <= 100000:
        raise LineageSearchConditionParamError(_FIELD_MESSAGES["offset"])
    if "lineage_type" in condition:
        _check_lineage_type(condition["lineage_type"])


def _check_lineage_type(value: object) -> None:
    """``{'eq': t}`` and/or ``{'in': [t, ...]}`` with t 'dataset' or 'model' ('in' wins).

    ``None`` is every lineage, as if the key were absent: the original API's
    text says so ("If it is not defined ... the query result is all lineage
    information"), although MindInsight 2.3.1 refuses it
    (docs/mindinsight-differences.md, ``lineage_type-none``).
    """
    if value is None:
        return
    message = _FIELD_MESSAGES["lineage_type"]
    if not isinstance(value, dict) or not set(value).issubset(("eq", "in")):
        raise LineageSearchConditionParamError(message)
    if "in" in value and not isinstance(value["in"], (list, tuple)):
        raise LineageSearchConditionParamError(
            f"The parameter lineage_type is invalid. {_LIST_MESSAGE}"
        )
    wanted = [*value.get("in", ()), *([value["eq"]] if "eq" in value else [])]
    if not all(isinstance(item, str) and item in LINEAGE_TYPES for item in wanted):
        raise LineageSearchConditionParamError(message)


def validate_search_condition(condition: object) -> dict[str, Any]:
    """Check a search condition; return it, or raise LineageSearchConditionParamError.

    A condition in MindInsight v0.1's form (``metric_<k>`` names, a plain
    string ``lineage_type``) is returned in the later form, as a new dict.
    """
    try:
        if not isinstance(condition, dict):
            raise LineageParamTypeError("Invalid search_condition type, it should be dict.")
        condition = to_current_form(condition)
        _check_control_types(condition)
        for name, value in condition.items():
            if name not in CONTROL_KEYS:
                _check_attribute(name, value)
        for name, value in condition.items():
            if name in FIELD_MAPPING:
                _check_field_values(name, value)
        _check_control_values(condition)
    except LineageSearchConditionParamError:
        raise
    except LineageError as error:
        raise LineageSearchConditionParamError(error.message) from None
    return condition


def resolve_summary_path(path: object, base_dir: str | None = None) -> str:
    """MindInsight's ``validate_path``: an absolute, ``..``-free, existing directory.

    With ``base_dir``, a path starting with ``./`` is taken relative to it.
    Returns the real path; raises :class:`LineageParamSummaryPathError`.
    """
    if base_dir is not None and isinstance(path, str) and path.startswith("./"):
        path = os.path.join(base_dir, path[2:])
    try:
        if (
            not isinstance(path, str)
            or not path
            or ".." in path.split("/")
            or not path.startswith("/")
        ):
            raise LineageParamValueError("The summary path is invalid.")
        try:
            real = os.path.realpath(path)
        except ValueError:  # e.g. an embedded NUL
            raise LineageParamValueError("The summary path is invalid.") from None
        if not os.path.isdir(real):
            raise LineageDirNotExistError("The summary path does not exist or is not a dir.")
    except (LineageParamValueError, LineageDirNotExistError) as error:
        raise LineageParamSummaryPathError(error.message) from None
    return real


def matches(key: str, expected: Any, actual: Any) -> bool:
    """Whether ``actual`` satisfies ``<key> expected`` (MindInsight's ``is_match``).

    A missing value (None) fails the ordering comparisons; it passes
    ``not_in`` unless the list holds None (MindInsight 2.3.1 evaluates
    ``None not in [...]``). A comparison between incompatible types counts
    as no match.
    """
    if actual is None and key in ("lt", "gt", "le", "ge"):
        return False
    try:
        if key == "in":
            return bool(operator.contains(expected, actual))
        if key == "not_in":
            return not operator.contains(expected, actual)
        return bool(getattr(operator, key)(actual, expected))
    except TypeError:
        return False


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def compare_values(first: Any, second: Any) -> int:
    """MindInsight's sort comparison: None smallest, mismatched types by type name.

    NaN, which compares as neither smaller nor larger than anything and so
    left the other values unsorted, ranks just above None.
    """
    if first is None and second is None:
        return 0
    if first is None:
        return -1
    if second is None:
        return 1
    if _is_nan(first) or _is_nan(second):
        return int(_is_nan(second)) - int(_is_nan(first))
    try:
        return int(first > second) - int(first < second)
    except TypeError:
        first_type, second_type = str(type(first)), str(type(second))
        return int(first_type > second_type) - int(first_type < second_type)


_Row = TypeVar("_Row")


def _none_smallest(pair: tuple[Any, object]) -> tuple[bool, Any]:
    value = pair[0]
    return (value is not None, value if value is not None else 0)


def sort_by(
    rows: Sequence[_Row],
    value_of: Callable[[_Row], Any],
    *,
    descending: bool = False,
    none_last: bool = False,
) -> list[_Row]:
    """Stable sort on one key with MindInsight's comparison.

    By default None is the smallest value (first ascending, last descending)
    and NaN the next smallest; with ``none_last`` missing and NaN values go
    last in both directions.
    """
    if none_last:
        unusable = [value_of(row) is None or _is_nan(value_of(row)) for row in rows]
        present = [row for row, skip in zip(rows, unusable, strict=True) if not skip]
        missing = [row for row, skip in zip(rows, unusable, strict=True) if skip]
    else:
        present, missing = list(rows), []
    values = list(map(value_of, present))
    if set(map(type, values)) <= {int, float} and not any(map(_is_nan, values)):
        # Plain numbers (the usual case, e.g. a metric): sorted by C comparisons alone.
        order = sorted(range(len(values)), key=values.__getitem__, reverse=descending)
        return [present[index] for index in order] + missing
    try:
        # Fast path when the values are mutually comparable and not NaN.
        keyed = [(value_of(row), row) for row in present]
        if any(_is_nan(value) for value, _ in keyed):
            raise TypeError("NaN takes the comparison path")
        ordered = [row for _, row in sorted(keyed, key=_none_smallest, reverse=descending)]
    except TypeError:

        def compare_rows(first: _Row, second: _Row) -> int:
            return compare_values(value_of(first), value_of(second))

        ordered = sorted(present, key=functools.cmp_to_key(compare_rows), reverse=descending)
    return ordered + missing
