"""The job view's errors: one base, :class:`JobViewError`, and what a bad argument raises.

Each is also the built-in error of its kind (a wrong type is a :class:`TypeError`, an
unusable value a :class:`ValueError`, a job directory that is not there a
:class:`FileNotFoundError`), so code that catches those keeps working. The lineage
manager's errors (:mod:`rankscribe.lineage.errors`) are its own.
"""

from __future__ import annotations

__all__ = [
    "JobViewDirNotExistError",
    "JobViewError",
    "JobViewParamTypeError",
    "JobViewParamValueError",
]


class JobViewError(Exception):
    """The base of the job view's errors."""


class JobViewParamTypeError(JobViewError, TypeError):
    """An argument of the wrong type (the message names it and the expected form)."""


class JobViewParamValueError(JobViewError, ValueError):
    """An argument of the right type and an unusable value (the message names both)."""


class JobViewDirNotExistError(JobViewError, FileNotFoundError):
    """A job or rank directory that does not exist."""
