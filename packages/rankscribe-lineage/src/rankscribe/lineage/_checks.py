"""The lineage package's argument checks: ``rankscribe.ranks.arguments``, raising its errors.

The checks and their wording are the ones every RankScribe package uses
(``rankscribe.ranks.arguments``): :class:`~rankscribe.lineage.errors.LineageParamTypeError`
for another type, :class:`~rankscribe.lineage.errors.LineageParamValueError` for an
unusable value, worded ``"max_points must be an int >= 4, got 2"``. What only this
package checks is here too:

- :func:`int_argument`, :func:`seconds_argument`: the same rules for a command-line
  option (an ``argparse`` ``type=``), worded ``"expected an int >= 4, got 2"``;
- :func:`ranks_text`: a list of ranks for a message.

May import: ``rankscribe.lineage.errors`` and ``rankscribe.ranks.arguments`` (every
sub-package may import this).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

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
