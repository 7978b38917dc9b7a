"""Errors raised by the SummaryCollector and its helpers.

Every error derives from :class:`CollectorError` and from the built-in it
refines, so code written for MindSpore's ``SummaryCollector`` (which raised
plain ``TypeError`` and ``ValueError``) still catches what it expects.
"""

from __future__ import annotations

__all__ = ["CollectorError", "CollectorTypeError", "CollectorValueError"]


class CollectorError(Exception):
    """Base class of every collector error."""


class CollectorTypeError(CollectorError, TypeError):
    """An argument has the wrong type."""


class CollectorValueError(CollectorError, ValueError):
    """An argument has the right type but an unusable value."""
