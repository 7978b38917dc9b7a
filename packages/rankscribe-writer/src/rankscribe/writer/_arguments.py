"""Argument checks of the writer's public functions: the one place that says what an int is.

``bool`` is a subclass of ``int`` (``isinstance(True, int)`` holds), so a count, a
size, a rank or a step given as ``True`` would pass a plain ``isinstance`` check and
be taken as 1; every check here refuses it. Messages keep the original's shape
("For 'SummaryRecord', the argument 'x' must be ..., but got ...") and name the
argument, the value received and the form expected (``docs/contributing.md``,
"Errors"). Every module of this package checks integer and boolean arguments through
these functions; no other module restates the rule.
"""

from __future__ import annotations

import numbers
import os
from typing import TypeGuard

from rankscribe.writer.errors import WriterTypeError, WriterValueError


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a Python int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_integral(value: object) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer of any type (NumPy's included) and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number of any type (int, float, NumPy's) and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(value: object, argument: str, *, caller: str, minimum: int | None = None) -> int:
    """``value`` when it is an int (not a bool) and at least ``minimum`` (when given).

    ``caller`` names the function or class the argument was given to.

    Raises:
        WriterTypeError: ``value`` is not an int, or is a bool.
        WriterValueError: ``value`` is below ``minimum``.
    """
    if not is_int(value):
        raise WriterTypeError(
            f"For '{caller}', the argument '{argument}' must be an int, but got "
            f"{type(value).__name__}."
        )
    if minimum is not None and value < minimum:
        bound = "greater than 0" if minimum == 1 else f">= {minimum}"
        raise WriterValueError(
            f"For '{caller}', the argument '{argument}' must be {bound}, but got {value}."
        )
    return value


def check_positive_int(value: object, argument: str, *, caller: str) -> int:
    """``value`` when it is an int > 0 (not a bool); see :func:`check_int`."""
    return check_int(value, argument, caller=caller, minimum=1)


def check_bool(value: object, argument: str, *, caller: str) -> bool:
    """``value`` when it is a bool (not 0 or 1, which may be a count given by mistake).

    Raises:
        WriterTypeError: ``value`` is not a bool.
    """
    if not isinstance(value, bool):
        raise WriterTypeError(
            f"For '{caller}', the argument '{argument}' must be a bool, but got "
            f"{type(value).__name__}."
        )
    return value


def check_path(value: object, argument: str, *, caller: str) -> str:
    """``value`` (a str or an ``os.PathLike`` of a str) as a str, when it holds no NUL.

    Raises:
        WriterTypeError: ``value`` is not a path (None, an int, bytes, ...).
        WriterValueError: ``value`` holds a NUL character (no file has that name).
    """
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise WriterTypeError(
            f"For '{caller}', the argument '{argument}' must be a path (str or os.PathLike), "
            f"but got {type(value).__name__}."
        )
    if "\0" in text:
        raise WriterValueError(
            f"For '{caller}', the argument '{argument}' must be a path without NUL characters, "
            f"but got {text!r}."
        )
    return text
