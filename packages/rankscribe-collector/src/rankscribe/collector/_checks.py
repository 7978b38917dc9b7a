"""The collector's argument checks: ``rankscribe.ranks.arguments``, raising its errors.

The checks and their wording are the ones every RankScribe package uses
(``rankscribe.ranks.arguments``): a ``CollectorTypeError`` for another type, a
``CollectorValueError`` for an unusable value; the checkpoint subsystem's arguments
raise its own pair through :data:`CHECKPOINT_CHECKS`. The arguments of a public class
are named with it (``owner=``)::

    For 'Progress', the argument 'clock' must be a function, but got None (NoneType).
    save_checkpoint_steps must be an int >= 0 or None, got True (bool)

The arguments of ``SummaryCollector`` keep the original's own wording
(``collection/_options.py``).
"""

from __future__ import annotations

import math
import os

from rankscribe.collector.errors import (
    CheckpointTypeError,
    CheckpointValueError,
    CollectorTypeError,
    CollectorValueError,
)
from rankscribe.ranks.arguments import ArgumentChecks, is_int, is_integral, is_number, shown

__all__ = [
    "CHECKPOINT_CHECKS",
    "check_bool",
    "check_callable",
    "check_int",
    "check_iterable",
    "check_number",
    "check_optional_int",
    "check_optional_path",
    "check_optional_text",
    "check_seconds_setting",
    "is_int",
    "is_integral",
    "is_number",
    "shown",
]

_CHECKS = ArgumentChecks(CollectorTypeError, CollectorValueError)
CHECKPOINT_CHECKS = ArgumentChecks(CheckpointTypeError, CheckpointValueError)
"""The checks of the checkpoint subsystem's arguments: ``Checkpoint*Error``s."""

check_bool = _CHECKS.check_bool
check_callable = _CHECKS.check_callable
check_int = _CHECKS.check_int
check_iterable = _CHECKS.check_iterable
check_number = _CHECKS.check_number
check_optional_int = _CHECKS.check_optional_int
check_optional_path = _CHECKS.check_optional_path
check_optional_text = _CHECKS.check_optional_text


def check_seconds_setting(
    value: object,
    *,
    argument: str,
    variable: str,
    default: float,
    off: str,
    off_words: tuple[str, ...] = (),
    shortest: float = 0.0,
    longest: float = math.inf,
) -> float:
    """An interval in seconds (0: ``off``): ``value``, else the environment ``variable``, else
    ``default``. A variable set to one of ``off_words`` (any case) is 0. Another value is
    from ``shortest`` to ``longest`` seconds.

    Raises:
        CollectorValueError: ``value`` (or the variable) is no finite number of seconds >= 0,
            or one other than 0 outside that range.
    """
    zero = "0 or 'off'" if off_words and value is None else "0"
    expected = f"a finite number of seconds >= 0 ({zero} turns {off}"
    if shortest > 0 or longest < math.inf:
        expected += f"; else from {shortest:g} to {longest:g}"
    expected += ")"
    source, shown_value = f"'{argument}'", repr(value)
    if value is None:
        text = os.environ.get(variable)
        if text is None or not text.strip():
            return default
        source, shown_value = f"the environment variable {variable}", repr(text)
        if text.strip().lower() in off_words:
            return 0.0
        try:
            value = float(text)
        except ValueError:
            value = None
    seconds = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond a float
            seconds = math.inf
    if not (seconds == 0 or shortest <= seconds <= longest) or not math.isfinite(seconds):
        raise CollectorValueError(
            f"For {source}, the value should be {expected}, but got {shown_value}."
        )
    return seconds
