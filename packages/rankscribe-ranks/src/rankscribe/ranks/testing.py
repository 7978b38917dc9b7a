"""Test doubles and seams for the ranks (sibling-facing, not the user's API).

:class:`MemoryTreeHub` and its :class:`MemoryTreeChannel` carry the tree's messages
between threads of one process, with the behaviour of :func:`rankscribe.ranks.tree.tree_channel`'s
channels (a timeout when a child is silent, a closed channel refusing more). The sibling
packages' tests build a job's tree with them without starting processes.

:func:`wait_clock` gives every wait of this package (collective timeouts, claims,
rendezvous) another clock and sleep for the length of a ``with`` block, so a test of a
timeout runs in no real time and asserts the exact seconds waited
(``docs/contributing.md``, "Tests"). docs/contributing.md lists the sibling-facing modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rankscribe.ranks.coordination import _deadline
from rankscribe.ranks.tree._channels import MemoryTreeChannel, MemoryTreeHub

__all__ = ["MemoryTreeChannel", "MemoryTreeHub", "wait_clock"]


@contextmanager
def wait_clock(clock: Callable[[], float], sleep: Callable[[float], None]) -> Iterator[None]:
    """Inside the block, every wait of rankscribe.ranks reads ``clock`` and sleeps with ``sleep``.

    For waits in one thread: ranks in several threads need the real clock to meet.
    """
    saved = _deadline.monotonic, _deadline.sleep
    _deadline.monotonic, _deadline.sleep = clock, sleep
    try:
        yield
    finally:
        _deadline.monotonic, _deadline.sleep = saved
