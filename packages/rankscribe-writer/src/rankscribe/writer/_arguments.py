"""The writer's argument checks: ``rankscribe.ranks.arguments``, raising the writer's errors.

The checks and their wording are the ones every RankScribe package uses
(``rankscribe.ranks.arguments``; ``docs/contributing.md``, "Errors"):
:class:`~rankscribe.writer.errors.WriterTypeError` for another type,
:class:`~rankscribe.writer.errors.WriterValueError` for an unusable value. The
arguments of a public function are named with it (``owner=``)::

    For 'read_events', the argument 'strict' must be a bool, but got 1 (int).

Every module of this package checks integer, boolean and path arguments through
these functions; no other module restates the rule.
"""

from __future__ import annotations

from rankscribe.ranks.arguments import ArgumentChecks, is_int, is_integral, is_real
from rankscribe.writer.errors import WriterTypeError, WriterValueError

__all__ = [
    "check_bool",
    "check_int",
    "check_path",
    "is_int",
    "is_integral",
    "is_real",
]

_CHECKS = ArgumentChecks(WriterTypeError, WriterValueError)

check_bool = _CHECKS.check_bool
check_int = _CHECKS.check_int
check_path = _CHECKS.check_path
