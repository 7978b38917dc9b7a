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
  ``argparse`` ``type=``), worded ``"expected an int >= 4, got 2"``.

May import: ``rankscribe.lineage.errors`` only (every sub-package may import this).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeGuard

from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError

__all__ = ["check_int", "check_optional_int", "int_argument", "is_int", "is_number"]


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
                f"expected an int >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {text}")
        return value

    parse.__name__ = f"int_at_least_{minimum}"
    return parse
