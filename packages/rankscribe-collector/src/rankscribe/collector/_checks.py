"""Argument checks shared by the collector's modules: ints and numbers, never a bool.

``bool`` is a subclass of ``int``, so ``isinstance(True, int)`` holds; an
argument documented as an int or a number refuses ``True``/``False`` here (a
flag passed where a count belongs is a mistake, not the count 1). Every module
of this package asks these functions instead of spelling the test itself
(``docs/contributing.md``: one place per rule).

- :func:`is_int`, :func:`is_number`: the tests, for values read from a
  framework's objects as well as for arguments;
- :func:`check_int`, :func:`check_optional_int`: an int argument with a lower
  bound, a clear error otherwise (TypeError for another type, ValueError below
  the bound; the error classes are the caller's, so a checkpoint argument
  raises a ``CheckpointTypeError``);
- :func:`check_number`: a real number argument, optionally positive and finite;
- :func:`check_callable`, :func:`check_optional_text`, :func:`check_iterable`,
  :func:`check_flag`, :func:`check_optional_path`: a function, a non-empty str
  (or None), an iterable (or None), a bool, a path (or None), worded
  ``For 'Progress', the argument 'clock' must be a function, but got NoneType.``

Two wordings. This package's own names the argument and the expected form::

    save_checkpoint_steps must be a non-negative int or None, got True (bool)
    save_checkpoint_steps must be a non-negative int, got -2

and, with ``owner=`` (the arguments of ``SummaryCollector``, which mirrors
MindSpore's), the original's wording, so a search for the original message
finds ours::

    For `collect_freq` the type should be a valid type of ['int'], but got bool True.
    For "SummaryCollector", the value of `collect_freq` should be greater than 0, but got `0`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import TypeGuard

import numpy as np

from rankscribe.collector.errors import CollectorTypeError, CollectorValueError

__all__ = [
    "check_callable",
    "check_flag",
    "check_int",
    "check_iterable",
    "check_number",
    "check_optional_int",
    "check_optional_path",
    "check_optional_text",
    "is_int",
    "is_number",
    "shown",
]

ErrorClasses = tuple[type[Exception], type[Exception]]
"""The (TypeError, ValueError) classes a check raises: the caller's subsystem's."""

COLLECTOR_ERRORS: ErrorClasses = (CollectorTypeError, CollectorValueError)


def is_int(value: object, *, numpy_ints: bool = False) -> TypeGuard[int]:
    """Whether ``value`` is an int and not a bool (with ``numpy_ints``, a NumPy integer too)."""
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, np.integer) if numpy_ints else int)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a Python int or float and not a bool (NaN included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters so a huge argument keeps a message short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _int_form(minimum: int | None) -> str:
    if minimum is None:
        return "an int"
    if minimum == 1:
        return "a positive int"
    if minimum == 0:
        return "a non-negative int"
    return f"an int >= {minimum}"


def check_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    numpy_ints: bool = False,
    errors: ErrorClasses = COLLECTOR_ERRORS,
    owner: str | None = None,
) -> int:
    """``value`` as an int ``>= minimum``: ``errors[0]`` for another type, ``errors[1]`` below.

    ``numpy_ints`` accepts NumPy integer scalars (returned as ``int``). ``owner``
    switches to MindSpore's wording for the arguments of that class.
    """
    return _check_int(name, value, minimum, numpy_ints, errors, owner, or_none=False)


def check_optional_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    numpy_ints: bool = False,
    errors: ErrorClasses = COLLECTOR_ERRORS,
    owner: str | None = None,
) -> int | None:
    """``None``, or ``value`` as :func:`check_int` checks it (the type error says "or None")."""
    if value is None:
        return None
    return _check_int(name, value, minimum, numpy_ints, errors, owner, or_none=True)


def _check_int(
    name: str,
    value: object,
    minimum: int | None,
    numpy_ints: bool,
    errors: ErrorClasses,
    owner: str | None,
    *,
    or_none: bool,
) -> int:
    type_error, value_error = errors
    if not is_int(value, numpy_ints=numpy_ints):
        if owner is not None:
            valid = "['int', 'NoneType']" if or_none else "['int']"
            raise type_error(
                f"For `{name}` the type should be a valid type of {valid}, but got "
                f"{type(value).__name__} {shown(value)}."
            )
        form = _int_form(minimum) + (" or None" if or_none else "")
        raise type_error(f"{name} must be {form}, got {shown(value)} ({type(value).__name__})")
    number = int(value)
    if minimum is not None and number < minimum:
        if owner is not None:
            raise value_error(
                f'For "{owner}", the value of `{name}` should be greater than {minimum - 1}, '
                f"but got `{number}`."
            )
        raise value_error(f"{name} must be {_int_form(minimum)}, got {number}")
    return number


def check_number(
    name: str,
    value: object,
    *,
    positive: bool = False,
    finite: bool = False,
    errors: ErrorClasses = COLLECTOR_ERRORS,
    unit: str = "",
) -> float:
    """``value`` as a float: an int or float, not a bool (TypeError) nor NaN (ValueError).

    ``positive`` and ``finite`` refuse ``<= 0`` and infinities (ValueError).

    ``unit`` ("seconds", say) completes the expected form in the message:
    ``save_timeout must be a number of seconds, got '5' (str)``.
    """
    type_error, value_error = errors
    form = f"a number of {unit}" if unit else "a number"
    if not is_number(value):
        raise type_error(f"{name} must be {form}, got {shown(value)} ({type(value).__name__})")
    if math.isnan(value):  # the right type, a wrong value: compares false with everything
        raise value_error(f"{name} must be {form}, got nan")
    if (positive and not value > 0) or (finite and not math.isfinite(value)):
        wanted = " and ".join(
            word for word, on in (("positive", positive), ("finite", finite)) if on
        )
        raise value_error(f"{name} must be {wanted}, got {value}")
    return float(value)


def check_callable(name: str, value: object, *, owner: str, optional: bool = False) -> None:
    """``value`` is callable (or None when ``optional``), else a ``CollectorTypeError``."""
    if (value is None and optional) or callable(value):
        return
    form = "a function or None" if optional else "a function"
    raise CollectorTypeError(
        f"For '{owner}', the argument '{name}' must be {form}, but got "
        f"{type(value).__name__} {shown(value)}."
    )


def check_optional_text(name: str, value: object, *, owner: str) -> str | None:
    """None or a non-empty str: ``CollectorTypeError`` for another type, ValueError for ``""``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise CollectorTypeError(
            f"For '{owner}', the argument '{name}' must be a str or None, but got "
            f"{type(value).__name__} {shown(value)}."
        )
    if not value:
        raise CollectorValueError(
            f"For '{owner}', the argument '{name}' must be a non-empty str or None, but got ''."
        )
    return value


def check_iterable(name: str, value: object, *, owner: str, optional: bool = False) -> None:
    """``value`` is an iterable (of batches, say), or None when ``optional``."""
    if (value is None and optional) or isinstance(value, Iterable):
        return
    form = "an iterable or None" if optional else "an iterable"
    raise CollectorTypeError(
        f"For '{owner}', the argument '{name}' must be {form}, but got "
        f"{type(value).__name__} {shown(value)}."
    )


def check_flag(name: str, value: object, *, owner: str) -> bool:
    """``value`` when it is a bool (0, 1 or a str for a flag is a mistake)."""
    if not isinstance(value, bool):
        raise CollectorTypeError(
            f"For '{owner}', the argument '{name}' must be a bool, but got "
            f"{type(value).__name__} {shown(value)}."
        )
    return value


def check_optional_path(name: str, value: object, *, owner: str) -> str | None:
    """None, or ``value`` (a str or ``os.PathLike`` of a str) as a str."""
    if value is None:
        return None
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise CollectorTypeError(
            f"For '{owner}', the argument '{name}' must be a path (str or os.PathLike) or "
            f"None, but got {type(value).__name__} {shown(value)}."
        )
    return text
