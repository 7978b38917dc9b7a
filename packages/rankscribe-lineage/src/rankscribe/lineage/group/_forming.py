"""Which runs form a group, what a group is called, and its final values (docs/groups.md).

Runs whose values of the ``by`` keys are equal form a group; a run without a
key's value joins the runs that lack it too (the key is *missing* in that
group, and said so). Values are compared as the query compares them: ``1``
and ``1.0`` are one value, NaN equals NaN, a dict or list by its JSON text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "GroupSpread",
    "folder_names",
    "group_positions",
    "spread",
    "value_key",
]

# Lineage text for the non-finite floats (docs/lineage-queries.md): numbers again here.
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")
#: Bytes of a folder name before it is cut (and made unique by a digest).
_NAME_LIMIT = 120


@dataclass(frozen=True)
class GroupSpread:
    """A value over the runs of a group: mean, population std, min, max, and how many runs had it.

    ``mean`` and ``std`` are numpy's (NaN when a run's value is NaN or not
    finite, as the job view's statistics); ``min`` and ``max`` skip NaN.
    """

    mean: float
    std: float
    min: float
    max: float
    count: int

    def text(self) -> str:
        """``0.3124 ± 0.02 (0.29–0.34)``; one run's value alone (4 significant digits)."""
        if self.count == 1:
            return _number(self.mean)
        return (
            f"{_number(self.mean)} ± {_number(self.std)} ({_number(self.min)}–{_number(self.max)})"
        )

    def as_dict(self) -> dict[str, float | int]:
        return {
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "count": self.count,
        }


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def number(value: Any) -> float | None:
    """A lineage value as a float (the text of a non-finite float too), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _NON_FINITE.get(value)
    return None


def spread(values: Sequence[Any]) -> GroupSpread | None:
    """The :class:`GroupSpread` of the numbers among ``values`` (None without any)."""
    numbers = np.array([found for value in values if (found := number(value)) is not None])
    if not len(numbers):
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        mean = float(np.mean(numbers))
        std = float(np.std(numbers))
    extremes = numbers[~np.isnan(numbers)]
    low = float(extremes.min()) if len(extremes) else math.nan
    high = float(extremes.max()) if len(extremes) else math.nan
    return GroupSpread(mean, std, low, high, len(numbers))


def value_key(value: Any) -> Any:
    """What groups compare of a value: equal keys, one group."""
    if value is None:
        return ("missing",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("nan",) if isinstance(value, float) and math.isnan(value) else ("number", value)
    if isinstance(value, str):
        return ("text", value)
    return ("json", json.dumps(value, sort_keys=True, default=repr))


def group_positions(columns: Sequence[Sequence[Any]], positions: Sequence[int]) -> list[list[int]]:
    """The runs at ``positions`` grouped by their values in ``columns``, in order of appearance."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for position in positions:
        key = tuple(value_key(column[position]) for column in columns)
        groups.setdefault(key, []).append(position)
    return list(groups.values())


def _shown(value: Any) -> str:
    if value is None:
        return "missing"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _folder_name(keys: Sequence[str], values: Sequence[Any]) -> str:
    parts = []
    for key, value in zip(keys, values, strict=True):
        parts.append(f"{key.replace('/', '.')}={_shown(value)}")
    name = _UNSAFE.sub("_", ",".join(parts)).strip("._") or "group"
    return name


def folder_names(keys: Sequence[str], groups_values: Sequence[Sequence[Any]]) -> list[str]:
    """A folder name per group: ``learning_rate=0.1,optimizer=Adam``, made safe and unique.

    Characters other than letters, digits and ``._=+-`` become ``_`` (a key's
    ``/`` becomes ``.``); a name that is too long, or that two groups would
    share, ends in a digest of the group's values.
    """
    names = [_folder_name(keys, values) for values in groups_values]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    unique = []
    for name, values in zip(names, groups_values, strict=True):
        if counts[name] > 1 or len(name.encode()) > _NAME_LIMIT:
            text = json.dumps([value_key(value) for value in values], default=repr)
            digest = hashlib.sha256(text.encode()).hexdigest()[:10]
            unique.append(f"{name.encode()[:_NAME_LIMIT].decode(errors='ignore')}-{digest}")
        else:
            unique.append(name)
    return unique
