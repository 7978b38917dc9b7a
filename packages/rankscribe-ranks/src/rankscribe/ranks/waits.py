"""Bounded waits for the sibling packages, on the ranks' one clock.

    from rankscribe.ranks.waits import Deadline, pause

    deadline = Deadline(timeout)
    while not done() and not deadline.expired():
        pause(min(0.5, deadline.remaining()))

Every wait of the project polls against a :class:`Deadline` and sleeps between polls with
:func:`pause`, so none can last forever and all of them read one clock and one sleep:
:func:`rankscribe.ranks.testing.wait_clock` replaces both for the length of a ``with``
block, and a test of a timeout runs in no real time (docs/contributing.md, "Tests").
Sibling-facing (docs/contributing.md, "Sibling modules").
"""

from __future__ import annotations

from rankscribe.ranks.coordination import _deadline
from rankscribe.ranks.coordination._deadline import Backoff, Deadline

__all__ = ["Backoff", "Deadline", "pause"]


def pause(seconds: float) -> None:
    """Sleep ``seconds`` on the waits' sleep (the one ``wait_clock`` replaces)."""
    _deadline.sleep(seconds)
