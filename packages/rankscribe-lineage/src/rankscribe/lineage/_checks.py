"""Argument checks shared by the lineage package's modules: ints and numbers, never a bool.

``bool`` is a subclass of ``int``, so ``isinstance(True, int)`` holds; a value
documented as an int or a number refuses ``True``/``False`` here (a flag
passed where a count belongs is a mistake, not the count 1; a ``True`` metric
is not the number 1). The modules of this package ask these functions instead
of spelling the test themselves (``docs/contributing.md``: one place per rule).

- :func:`is_int`, :func:`is_number`: the tests, for values read from lineage
  files and training arguments as well as for arguments;
- :func:`check_int`, :func:`check_optional_int`: an int argument with a lower bound
  (:class:`~rankscribe.lineage.errors.LineageParamTypeError` for another type,
  :class:`~rankscribe.lineage.errors.LineageParamValueError` below the bound),
  worded ``"max_points must be an int >= 4, got 2"``;
- :func:`int_argument`: the same rule for a command-line option (an
  ``argparse`` ``type=``), worded ``"expected an int >= 4, got 2"``;
  :func:`seconds_argument`: a finite number of seconds ``>= 0`` for an option
  (``inf`` would wait forever, ``nan`` never compares);
- :func:`check_series`: a rank's series (``rank`` and ``scalars``:
  ``tag -> [(step, value)]``), checked whole before any of it is used;
- :func:`check_path`, :func:`check_host`, :func:`check_ranks`,
  :func:`check_seconds`, :func:`check_bool`, :func:`check_optional_bool`,
  :func:`check_mapping`, :func:`check_optional_mapping`:
  the other argument forms of the public functions (a path without NUL, a
  file-name part without separators, a sequence of ranks, a finite timeout,
  a flag, a mapping or None), each worded ``"<name> must be <form>, got ..."``.

May import: ``rankscribe.lineage.errors`` only (every sub-package may import this).
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TypeGuard

from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError

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


def ranks_text(ranks: Sequence[int], limit: int = 8) -> str:
    """Sorted ranks for a message: the first ``limit`` and how many in all."""
    listed = ", ".join(str(rank) for rank in ranks[:limit])
    return listed if len(ranks) <= limit else f"{listed}, ... ({len(ranks)} in all)"


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a huge argument keeps a message short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a Python int or float and not a bool (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _form(minimum: int | None, optional: bool) -> str:
    form = "an int" if minimum is None else f"an int >= {minimum}"
    return form + (" or None" if optional else "")


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` as an int ``>= minimum``, else a lineage error naming ``name`` and the form.

    Raises:
        LineageParamTypeError: ``value`` is not an int (a bool included).
        LineageParamValueError: ``value`` is below ``minimum``.
    """
    return _check_int(name, value, minimum, optional=False)


def check_optional_int(name: str, value: object, *, minimum: int | None = None) -> int | None:
    """None, or ``value`` as :func:`check_int` checks it (the messages say "or None")."""
    return None if value is None else _check_int(name, value, minimum, optional=True)


def _check_int(name: str, value: object, minimum: int | None, *, optional: bool) -> int:
    if not is_int(value):
        raise LineageParamTypeError(
            f"{name} must be {_form(minimum, optional)}, got {value!r} ({type(value).__name__})"
        )
    if minimum is not None and value < minimum:
        raise LineageParamValueError(f"{name} must be {_form(minimum, optional)}, got {value}")
    return value


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


def check_path(name: str, value: object) -> str:
    """``value`` (a str or ``os.PathLike`` of str) as a str; no NUL character in it.

    Raises:
        LineageParamTypeError: not a str or a path-like object of a str.
        LineageParamValueError: empty, or holding a NUL character (no file has that name).
    """
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise LineageParamTypeError(
            f"{name} must be a path (a str or os.PathLike), got {shown(value)} "
            f"({type(value).__name__})"
        )
    if not text or "\0" in text:
        raise LineageParamValueError(
            f"{name} must be a non-empty path without NUL characters, got {shown(text)}"
        )
    return text


def check_host(name: str, value: object) -> str | None:
    """None, or a host name that can be part of a file name: no separator, no NUL.

    Raises:
        LineageParamTypeError: neither None nor a str.
        LineageParamValueError: empty, or holding ``/``, the OS's separators or NUL.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise LineageParamTypeError(
            f"{name} must be a str or None, got {shown(value)} ({type(value).__name__})"
        )
    forbidden = {"/", "\0", os.sep} | ({os.altsep} if os.altsep else set())
    if not value or any(character in value for character in forbidden):
        raise LineageParamValueError(
            f"{name} must be a non-empty file-name part (no '/', no NUL), got {shown(value)}"
        )
    return value


def check_ranks(name: str, value: object) -> list[int]:
    """``value`` as a list of ranks: a sequence (not a str) of ints ``>= 0``.

    Raises:
        LineageParamTypeError: not a sequence.
        LineageParamValueError: an item that is not an int >= 0 (a bool included).
    """
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise LineageParamTypeError(
            f"{name} must be a sequence of ranks (ints >= 0), got {shown(value)} "
            f"({type(value).__name__})"
        )
    for item in value:
        if not is_int(item) or item < 0:
            raise LineageParamValueError(
                f"{name} must hold ranks (ints >= 0), got {shown(item)} ({type(item).__name__})"
            )
    return list(value)


def check_seconds(name: str, value: object) -> float:
    """``value`` as a finite number of seconds ``>= 0`` (``inf`` would wait forever).

    Raises:
        LineageParamTypeError: not an int or a float (a bool included).
        LineageParamValueError: negative, NaN or infinite.
    """
    if not is_number(value):
        raise LineageParamTypeError(
            f"{name} must be a finite number of seconds >= 0, got {shown(value)} "
            f"({type(value).__name__})"
        )
    if not (math.isfinite(value) and value >= 0):
        raise LineageParamValueError(
            f"{name} must be a finite number of seconds >= 0, got {value!r}"
        )
    return float(value)


def check_bool(name: str, value: object) -> bool:
    """``value`` when it is a bool (not 0, 1 or a str, which are mistakes for a flag).

    Raises:
        LineageParamTypeError: not a bool.
    """
    if not isinstance(value, bool):
        raise LineageParamTypeError(
            f"{name} must be a bool, got {shown(value)} ({type(value).__name__})"
        )
    return value


def check_optional_bool(name: str, value: object) -> bool | None:
    """None, or ``value`` as :func:`check_bool` checks it."""
    if value is not None and not isinstance(value, bool):
        raise LineageParamTypeError(
            f"{name} must be a bool or None, got {shown(value)} ({type(value).__name__})"
        )
    return value


def check_mapping(name: str, value: object) -> Mapping[object, object]:
    """``value`` when it is a mapping (a dict, say).

    Raises:
        LineageParamTypeError: not a mapping.
    """
    if not isinstance(value, Mapping):
        raise LineageParamTypeError(
            f"{name} must be a mapping, got {shown(value)} ({type(value).__name__})"
        )
    return value


def check_optional_mapping(name: str, value: object) -> Mapping[object, object] | None:
    """None, or ``value`` when it is a mapping.

    Raises:
        LineageParamTypeError: neither None nor a mapping.
    """
    if value is not None and not isinstance(value, Mapping):
        raise LineageParamTypeError(
            f"{name} must be a mapping or None, got {shown(value)} ({type(value).__name__})"
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
