"""The lineage package's argument checks: ``rankscribe.ranks.arguments``, raising its errors.

The checks and their wording are the ones every RankScribe package uses
(``rankscribe.ranks.arguments``): :class:`~rankscribe.lineage.errors.LineageParamTypeError`
for another type, :class:`~rankscribe.lineage.errors.LineageParamValueError` for an
unusable value, worded ``"max_points must be an int >= 4, got 2"``. What only this
package checks is here too:

- :func:`int_argument`, :func:`seconds_argument`: the same rules for a command-line
  option (an ``argparse`` ``type=``), worded ``"expected an int >= 4, got 2"``;
- :func:`check_series`: a rank's series (``rank`` and ``scalars``:
  ``tag -> [(step, value)]``), checked whole before any of it is used;
- :func:`ranks_text`: a list of ranks for a message.

May import: ``rankscribe.lineage.errors`` and ``rankscribe.ranks.arguments`` (every
sub-package may import this).
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable, Mapping, Sequence

from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError
from rankscribe.ranks.arguments import ArgumentChecks, is_int, is_number, shown

__all__ = [
    "check_bool",
    "check_host",
    "check_int",
    "check_mapping",
    "check_optional_bool",
    "check_optional_int",
    "check_optional_mapping",
    "check_path",
    "check_ranks",
    "check_seconds",
    "check_series",
    "int_argument",
    "is_int",
    "is_number",
    "ranks_text",
    "seconds_argument",
    "shown",
]

_CHECKS = ArgumentChecks(LineageParamTypeError, LineageParamValueError)

check_bool = _CHECKS.check_bool
check_host = _CHECKS.check_host
check_int = _CHECKS.check_int
check_mapping = _CHECKS.check_mapping
check_optional_bool = _CHECKS.check_optional_bool
check_optional_int = _CHECKS.check_optional_int
check_optional_mapping = _CHECKS.check_optional_mapping
check_path = _CHECKS.check_path
check_ranks = _CHECKS.check_ranks
check_seconds = _CHECKS.check_seconds


def ranks_text(ranks: Sequence[int], limit: int = 8) -> str:
    """Sorted ranks for a message: the first ``limit`` and how many in all."""
    listed = ", ".join(str(rank) for rank in ranks[:limit])
    return listed if len(ranks) <= limit else f"{listed}, ... ({len(ranks)} in all)"


def int_argument(minimum: int) -> Callable[[str], int]:
    """An ``argparse`` ``type=`` for an int option ``>= minimum``: its errors name the form."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an int >= {minimum}, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {text}")
        return value

    parse.__name__ = f"int_at_least_{minimum}"
    return parse


def seconds_argument(text: str) -> float:
    """An ``argparse`` ``type=`` for a timeout: a finite number of seconds ``>= 0``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds >= 0, got {text!r}"
        ) from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds >= 0, got {text!r}"
            + (" (a wait must end)" if value == math.inf else "")
        )
    return value


def _is_step(value: object) -> bool:
    return type(value) is int or (
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
    )


def _is_value(value: object) -> bool:
    return type(value) is float or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def check_series(name: str, series: object) -> tuple[int, dict[str, list[tuple[int, float]]]]:
    """A rank's series as ``(rank, {tag: [(step, value)]})``, every part checked first.

    ``series`` has a ``rank`` (an int >= 0) and ``scalars``: a mapping of str
    tags to iterables of ``(step, value)`` pairs, the step an int and the
    value a real number (NumPy's included; bools are neither).

    Raises:
        LineageParamTypeError: ``series`` lacks ``rank`` or ``scalars``, or a
            part has the wrong type.
        LineageParamValueError: a negative rank, or a point that is not a pair.
    """
    try:
        rank, scalars = series.rank, series.scalars  # type: ignore[attr-defined]
    except AttributeError:
        raise LineageParamTypeError(
            f"{name} must have a rank and scalars (a RankSeries), got {shown(series)} "
            f"({type(series).__name__})"
        ) from None
    if not is_int(rank) or rank < 0:
        raise LineageParamValueError(f"a series' rank must be an int >= 0, got {shown(rank)}")
    if not isinstance(scalars, Mapping):
        raise LineageParamTypeError(
            f"{name}.scalars must be a mapping of tag to [(step, value)], got "
            f"{shown(scalars)} ({type(scalars).__name__})"
        )
    checked: dict[str, list[tuple[int, float]]] = {}
    for tag, points in scalars.items():
        if not isinstance(tag, str):
            raise LineageParamTypeError(
                f"{name}.scalars keys must be str tags, got {shown(tag)} ({type(tag).__name__})"
            )
        try:
            listed = points if isinstance(points, list) else list(points)
        except TypeError:
            raise LineageParamTypeError(
                f"{name}.scalars[{tag!r}] must be a list of (step, value) pairs, got "
                f"{shown(points)} ({type(points).__name__})"
            ) from None
        for point in listed:
            if not (
                isinstance(point, (tuple, list))
                and len(point) == 2
                and _is_step(point[0])
                and _is_value(point[1])
            ):
                raise LineageParamValueError(
                    f"{name}.scalars[{tag!r}] must hold (step, value) pairs of an int and a "
                    f"real number, got {shown(point)}"
                )
        checked[tag] = listed
    return rank, checked
