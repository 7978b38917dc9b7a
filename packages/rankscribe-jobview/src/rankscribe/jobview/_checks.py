"""The job view's argument checks: ``rankscribe.ranks.arguments``, raising its errors.

The checks and their wording are the ones every RankScribe package uses
(``rankscribe.ranks.arguments``): :class:`~rankscribe.jobview.errors.JobViewParamTypeError`
for another type, :class:`~rankscribe.jobview.errors.JobViewParamValueError` for an
unusable value. :func:`check_series` checks a rank's series (``rank`` and ``scalars``:
``tag -> [(step, value)]``) whole before any of it is used.

May import: ``rankscribe.jobview.errors`` and ``rankscribe.ranks.arguments`` (every
sub-package may import this).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.ranks.arguments import ArgumentChecks, is_int, is_number, shown

__all__ = [
    "check_bool",
    "check_callable",
    "check_host",
    "check_int",
    "check_mapping",
    "check_optional_mapping",
    "check_path",
    "check_ranks",
    "check_seconds",
    "check_series",
    "is_int",
    "is_number",
    "wrong_type",
]

_CHECKS = ArgumentChecks(JobViewParamTypeError, JobViewParamValueError)

check_bool = _CHECKS.check_bool
check_callable = _CHECKS.check_callable
check_host = _CHECKS.check_host
check_int = _CHECKS.check_int
check_mapping = _CHECKS.check_mapping
check_optional_mapping = _CHECKS.check_optional_mapping
check_path = _CHECKS.check_path
check_ranks = _CHECKS.check_ranks
check_seconds = _CHECKS.check_seconds
wrong_type = _CHECKS.wrong_type


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
        JobViewParamTypeError: ``series`` lacks ``rank`` or ``scalars``, or a
            part has the wrong type.
        JobViewParamValueError: a negative rank, or a point that is not a pair.
    """
    try:
        rank, scalars = series.rank, series.scalars  # type: ignore[attr-defined]
    except AttributeError:
        raise JobViewParamTypeError(
            f"{name} must have a rank and scalars (a RankSeries), got {shown(series)} "
            f"({type(series).__name__})"
        ) from None
    if not is_int(rank) or rank < 0:
        raise JobViewParamValueError(f"a series' rank must be an int >= 0, got {shown(rank)}")
    if not isinstance(scalars, Mapping):
        raise JobViewParamTypeError(
            f"{name}.scalars must be a mapping of tag to [(step, value)], got "
            f"{shown(scalars)} ({type(scalars).__name__})"
        )
    checked: dict[str, list[tuple[int, float]]] = {}
    for tag, points in scalars.items():
        if not isinstance(tag, str):
            raise JobViewParamTypeError(
                f"{name}.scalars keys must be str tags, got {shown(tag)} ({type(tag).__name__})"
            )
        try:
            listed = points if isinstance(points, list) else list(points)
        except TypeError:
            raise JobViewParamTypeError(
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
                raise JobViewParamValueError(
                    f"{name}.scalars[{tag!r}] must hold (step, value) pairs of an int and a "
                    f"real number, got {shown(point)}"
                )
        checked[tag] = listed
    return rank, checked
