"""The first condition form of ``filter_summary_lineage`` (MindInsight v0.1).

MindInsight's documentation of ``filter_summary_lineage`` shows the v0.1
form, which later versions dropped without a word:

- metric fields are named ``metric_<key>`` (later ``metric/<key>``), in a
  condition and in ``sorted_name``;
- ``lineage_type`` is a plain string, ``'model'`` or ``'dataset'`` (later
  ``{'eq': 'model'}`` or ``{'in': [...]}``).

Scripts written from that documentation keep working: this module rewrites a
v0.1 condition into the later form, which then goes through the usual checks
and matches the same runs. A name starts the v0.1 way only with the exact
prefix ``metric_``; no searchable field does, so nothing else changes.
"""

from __future__ import annotations

from typing import Any

from rankscribe.lineage.errors import LineageSearchConditionParamError

__all__ = ["to_current_form"]

FIRST_METRIC_PREFIX = "metric_"
METRIC_PREFIX = "metric/"


def _current_name(name: object) -> object:
    """``metric_<k>`` as ``metric/<k>``; a bare ``metric_`` stays (and is refused later)."""
    if (
        isinstance(name, str)
        and name.startswith(FIRST_METRIC_PREFIX)
        and len(name) > len(FIRST_METRIC_PREFIX)
    ):
        return METRIC_PREFIX + name[len(FIRST_METRIC_PREFIX) :]
    return name


def to_current_form(condition: dict[Any, Any]) -> dict[Any, Any]:
    """The condition with its v0.1 names and values in the later form (a new dict).

    When both ``metric_<k>`` and ``metric/<k>`` are given, both must hold,
    as for any two conditions, so their operators are merged; the same
    operator with two different operands is refused.
    """
    converted: dict[Any, Any] = {}
    for name, value in condition.items():
        current = _current_name(name)
        earlier = converted.get(current)
        if isinstance(earlier, dict) and isinstance(value, dict):
            for key in set(earlier) & set(value):
                if earlier[key] != value[key]:
                    raise LineageSearchConditionParamError(
                        f"{current!r} is given twice (as metric_<key> and metric/<key>) with "
                        f"different {key!r} values: {earlier[key]!r} and {value[key]!r}"
                    )
            converted[current] = {**earlier, **value}
        else:
            converted[current] = value
    if "sorted_name" in converted:
        converted["sorted_name"] = _current_name(converted["sorted_name"])
    lineage_type = converted.get("lineage_type")
    if isinstance(lineage_type, str):
        converted["lineage_type"] = {"eq": lineage_type}
    return converted
