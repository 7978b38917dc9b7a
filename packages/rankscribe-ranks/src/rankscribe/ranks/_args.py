"""The ranks package's argument checks: :mod:`rankscribe.ranks.arguments`, raising ranks' errors.

Every public function of ``rankscribe.ranks`` checks what it is given before it does
anything: :class:`RanksTypeError` for the wrong type, :class:`RanksValueError` for an
unusable value, worded as every package words them (``rankscribe.ranks.arguments``).
"""

from __future__ import annotations

from pathlib import Path

from rankscribe.ranks.arguments import ArgumentChecks
from rankscribe.ranks.errors import RanksTypeError, RanksValueError

__all__ = [
    "check_choice",
    "check_int",
    "check_path",
    "check_rank",
    "check_timeout",
    "check_world_size",
]

_CHECKS = ArgumentChecks(RanksTypeError, RanksValueError)

check_int = _CHECKS.check_int
check_rank = _CHECKS.check_rank
check_choice = _CHECKS.check_choice
check_timeout = _CHECKS.check_seconds


def check_world_size(name: str, value: object) -> int:
    """A number of ranks: an int >= 1."""
    return _CHECKS.check_int(name, value, minimum=1)


def check_path(name: str, value: object) -> Path:
    """A filesystem path: a non-empty ``str`` or ``os.PathLike`` without NUL characters."""
    return Path(_CHECKS.check_path(name, value))
