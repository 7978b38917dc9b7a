"""The set of live SummaryRecords: closed at interpreter exit, forgotten in a forked child.

This is the one piece of process-wide state the original API needs: a record
left open must still reach the disk when the program ends.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from typing import Protocol

from rankscribe.ranks.exits import before_abort
from rankscribe.writer import operators

logger = logging.getLogger(__name__)


class LiveRecord(Protocol):
    def close(self) -> None: ...

    def _abandon_in_child(self) -> None: ...


_live_records: weakref.WeakSet[LiveRecord] = weakref.WeakSet()
_live_lock = threading.Lock()


def track(record: LiveRecord) -> None:
    """Close ``record`` at exit unless it is closed first."""
    with _live_lock:
        _live_records.add(record)
    operators.record_opened()


def untrack(record: LiveRecord) -> None:
    """``record`` is closing: nothing is left to do for it at exit."""
    with _live_lock:
        _live_records.discard(record)
    operators.record_closed()


def _forget_records_in_child() -> None:
    """In a forked child, the parent's records are the parent's: never write or close them.

    The child inherits the open files but not the writer threads; closing them
    at the child's exit would write the parent's buffered records a second
    time and make its open files read-only.
    """
    global _live_lock  # noqa: PLW0603 - a lock held by a parent thread at fork stays held
    _live_lock = threading.Lock()
    records = list(_live_records)
    _live_records.clear()
    for record in records:
        record._abandon_in_child()
    operators.reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_records_in_child)


@atexit.register
def _close_live_records() -> None:
    """Finish writing every record the program left open (at exit, and before an MPI job
    aborts on a rank's uncaught exception: :mod:`rankscribe.ranks.exits`)."""
    with _live_lock:
        records = list(_live_records)
    for record in records:
        try:
            record.close()
        except Exception:
            logger.exception("closing %r at exit failed", record)


before_abort(_close_live_records)
