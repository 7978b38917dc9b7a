"""Checking the arguments of the public functions, once, at the boundary.

Every public function of ``rankscribe.ranks`` checks what it is given before it
does anything, with an error that names the argument, the value received and
the form expected (``docs/contributing.md``): :class:`RanksTypeError` for the
wrong type, :class:`RanksValueError` for an unusable value. The rules live
here so that ``world_size=0``, ``rank="x"`` or ``timeout=float("nan")`` are
refused alike everywhere.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection
from pathlib import Path

from rankscribe.ranks.errors import RanksTypeError, RanksValueError

__all__ = [
    "check_choice",
    "check_int",
    "check_path",
    "check_rank",
    "check_timeout",
    "check_world_size",
]


def _shown(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:200]


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` as an int (``bool`` refused), at least ``minimum`` when given."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RanksTypeError(f"{name} must be an int, got {_shown(value)}")
    if minimum is not None and value < minimum:
        form = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
        raise RanksValueError(f"{name} must be {form}, got {value}")
    return int(value)


def check_world_size(name: str, value: object) -> int:
    """A number of ranks: an int >= 1."""
    return check_int(name, value, minimum=1)


def check_rank(name: str, value: object, world_size: int) -> int:
    """A rank of a ``world_size``-rank job: an int in ``range(world_size)``."""
    rank = check_int(name, value, minimum=0)
    if rank >= world_size:
        raise RanksValueError(
            f"{name} must be in range(world_size) = range({world_size}), got {rank}"
        )
    return rank


def check_timeout(name: str, value: object) -> float:
    """``value`` as seconds: a finite number >= 0 (collectives always have a bounded wait)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RanksTypeError(f"{name} must be a number of seconds, got {_shown(value)}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise RanksValueError(
            f"{name} must be a finite number of seconds >= 0, got {value!r}; "
            "collectives always have a bounded wait"
        )
    return seconds


def check_path(name: str, value: object) -> Path:
    """A filesystem path: a non-empty ``str`` or ``os.PathLike`` without NUL characters."""
    if not isinstance(value, (str, os.PathLike)):
        raise RanksTypeError(f"{name} must be a str or os.PathLike, got {_shown(value)}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise RanksTypeError(f"{name} must name a path as text, got {_shown(text)}")
    if not text or "\0" in text:
        raise RanksValueError(
            f"{name} must be a non-empty path without NUL characters, got {text!r}"
        )
    return Path(text)


def check_choice(name: str, value: object, choices: Collection[str]) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise RanksValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value
