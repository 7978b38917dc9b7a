"""The command line's tables: how the cells of a column look.

(Which columns a table shows, and in which order, is the query command's:
:mod:`rankscribe.lineage.cli._query`.)
- Numbers: the floats of one column get one number of decimals, enough for
  four significant digits of the column's smallest non-zero magnitude (at most
  8), so ``0.9583333333333334`` and ``0.16649036`` print as ``0.9583`` and
  ``0.1665``; very large or very small magnitudes use one exponent format.
- Text: control characters are escaped (``_terminal.printable``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from rankscribe.lineage.cli._terminal import printable

__all__ = ["MISSING", "SEPARATOR", "column_texts", "column_width"]

_SIGNIFICANT_DIGITS = 4
_MAX_DECIMALS = 8
_FIXED_RANGE = (1e-4, 1e9)
SEPARATOR = "  "
MISSING = "-"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plain_text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)  # JSON escapes control characters
    return printable(str(value))


def _float_format(values: Sequence[float]) -> str:
    """One format for the finite floats of a column."""
    # filter(None, ...) drops the zeros; C loops (a column of 100,000 runs).
    magnitudes = list(filter(None, map(abs, filter(math.isfinite, values))))
    if not magnitudes:
        return ".1f"
    smallest, largest = min(magnitudes), max(magnitudes)
    if smallest < _FIXED_RANGE[0] or largest >= _FIXED_RANGE[1]:
        return f".{_SIGNIFICANT_DIGITS - 1}e"
    leading = math.floor(math.log10(smallest))
    decimals = min(_MAX_DECIMALS, max(1, _SIGNIFICANT_DIGITS - 1 - leading))
    return f".{decimals}f"


def column_texts(values: Sequence[Any]) -> list[str]:
    """The cells of one column: numbers alike when the column holds a float.

    A column of one plain type (the usual case) is converted by one ``map``
    (C loops: a table of 100,000 runs is built in tenths of a second); other
    columns value by value.
    """
    types = set(map(type, values))
    if types <= {str}:
        return list(values) if all(map(str.isprintable, values)) else list(map(_plain_text, values))
    if types <= {int}:
        return list(map(str, values))
    if float not in types:
        return [_plain_text(value) for value in values]
    if types <= {float, int} and all(map(math.isfinite, values)):
        form = _float_format(values)
        return list(map(f"%{form}".__mod__, values))
    numbers = [float(value) for value in values if _is_number(value)]
    form = _float_format(numbers)
    return [
        format(float(value), form)
        if _is_number(value) and math.isfinite(value)
        else _plain_text(value)
        for value in values
    ]


def column_width(values: Sequence[Any]) -> int | None:
    """The length of the longest cell :func:`column_texts` makes of ``values``, if known at once.

    A column of plain numbers in a fixed-point format is measured at its
    smallest and largest value alone (a cell's length grows with the
    magnitude, a minus sign included): the command line sizes columns it
    may not show without turning 100,000 values into text. None: only the
    cells tell (make them).
    """
    types = set(map(type, values))
    if values and types == {int}:
        return max(len(str(max(values))), len(str(min(values))))
    if values and float in types and types <= {float, int} and all(map(math.isfinite, values)):
        form = _float_format(values)
        if form.endswith("f"):
            return max(len(f"%{form}" % max(values)), len(f"%{form}" % min(values)))
    return None
