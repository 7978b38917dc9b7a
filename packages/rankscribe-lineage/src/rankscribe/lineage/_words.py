"""Counts in words for what the report and the command line print ("1 run", "2 runs")."""

from __future__ import annotations

__all__ = ["counted"]


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` and ``noun``, the noun plural unless the number is 1.

    ``plural``: the plural when it is not ``noun + "s"`` (``"directories"``).
    """
    return f"{number} {noun if number == 1 else (plural or noun + 's')}"
