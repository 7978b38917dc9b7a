"""The command line's tables: which columns fit, how numbers look, which key was meant.

- Columns: those whose values differ between the runs shown come first (they
  are what a comparison is about), then those every run shares; the default
  keeps as many as fit the terminal's width.
- Numbers: the floats of one column get one number of decimals, enough for
  four significant digits of the column's smallest non-zero magnitude (at most
  8), so ``0.9583333333333334`` and ``0.16649036`` print as ``0.9583`` and
  ``0.1665``; very large or very small magnitudes use one exponent format.
- Keys: a ``metric/<k>`` or ``user_defined/<k>`` that no run has is named with
  the keys that exist, closest first.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["closest_first", "column_texts", "fit_columns", "order_columns"]

_SIGNIFICANT_DIGITS = 4
_MAX_DECIMALS = 8
_FIXED_RANGE = (1e-4, 1e9)
SEPARATOR = "  "
MISSING = "-"


def _is_float(value: Any) -> bool:
    return isinstance(value, float)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plain_text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _float_format(values: Sequence[float]) -> str:
    """One format for the finite floats of a column."""
    magnitudes = [abs(value) for value in values if math.isfinite(value) and value != 0]
    if not magnitudes:
        return ".1f"
    smallest, largest = min(magnitudes), max(magnitudes)
    if smallest < _FIXED_RANGE[0] or largest >= _FIXED_RANGE[1]:
        return f".{_SIGNIFICANT_DIGITS - 1}e"
    leading = math.floor(math.log10(smallest))
    decimals = min(_MAX_DECIMALS, max(1, _SIGNIFICANT_DIGITS - 1 - leading))
    return f".{decimals}f"


def column_texts(values: Sequence[Any]) -> list[str]:
    """The cells of one column: numbers alike when the column holds a float."""
    if not any(_is_float(value) for value in values):
        return [_plain_text(value) for value in values]
    numbers = [float(value) for value in values if _is_number(value)]
    form = _float_format(numbers)
    return [
        format(float(value), form) if _is_number(value) and math.isfinite(value)
        else _plain_text(value)
        for value in values
    ]


def order_columns(names: Sequence[str], rows: Sequence[dict[str, Any]]) -> list[str]:
    """The columns whose values differ between ``rows`` first, each group in its order."""

    def differs(name: str) -> bool:
        seen = {json.dumps(row.get(name), sort_keys=True, default=str) for row in rows}
        return len(seen) > 1

    varying = [name for name in names if differs(name)]
    return varying + [name for name in names if name not in varying]


def fit_columns(
    fixed_width: int, columns: Sequence[tuple[str, int]], width: int
) -> tuple[list[str], list[str]]:
    """Split ``(name, width)`` columns, in order, into those that fit and those left out.

    ``fixed_width`` is what is always shown (the run column). A column too wide
    for the room left is skipped and the narrower ones after it still get in.
    """
    used = fixed_width
    shown: list[str] = []
    hidden: list[str] = []
    for name, column_width in columns:
        needed = len(SEPARATOR) + column_width
        if used + needed <= width:
            shown.append(name)
            used += needed
        else:
            hidden.append(name)
    return shown, hidden


def closest_first(wanted: str, existing: Iterable[str]) -> list[str]:
    """``existing`` sorted by likeness to ``wanted``, most alike first (ties by name)."""

    def likeness(name: str) -> float:
        return difflib.SequenceMatcher(None, wanted, name).ratio()

    return sorted(sorted(set(existing)), key=likeness, reverse=True)
