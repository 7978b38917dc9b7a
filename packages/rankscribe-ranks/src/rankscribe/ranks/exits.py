"""How a rank's program ends under MPI when it raises: the job aborts instead of hanging.

A sibling-facing module (``docs/contributing.md``, "Sibling modules"), not part of
``rankscribe.ranks``' top-level API. The MPI coordinator of a job of several ranks
arranges that a program ending on an uncaught exception aborts the job
(``MPI_Abort``) rather than waiting in ``MPI_Finalize`` for ranks that wait for it
(``docs/layout.md``, "A rank that raises"). :func:`abort_on_uncaught_exception` installs
it (once a process; the MPI coordinator calls it); :func:`before_abort` registers what must
run first (the writer closes its open records there); :func:`abort_if_uncaught` is the exit
handler's body; :data:`ABORT_ENV` turns the abort off. :func:`end_cleanly_on_sigterm`
turns a SIGTERM during training into :class:`Terminated`, so that what was recorded is
written before the process ends by the signal, and :func:`mark_terminated_and_wait` has the
ranks of a job sent it together end together (``docs/layout.md``, "A rank sent SIGTERM").
"""

from __future__ import annotations

from rankscribe.ranks.coordination._exits import (
    ABORT_ENV,
    TERMINATED_MARK_PREFIX,
    TERMINATED_WAIT_SECONDS,
    Terminated,
    abort_if_uncaught,
    abort_on_uncaught_exception,
    before_abort,
    end_cleanly_on_sigterm,
    forget_terminated_mark,
    mark_terminated_and_wait,
    sigterm_received,
)

__all__ = [
    "ABORT_ENV",
    "TERMINATED_MARK_PREFIX",
    "TERMINATED_WAIT_SECONDS",
    "Terminated",
    "abort_if_uncaught",
    "abort_on_uncaught_exception",
    "before_abort",
    "end_cleanly_on_sigterm",
    "forget_terminated_mark",
    "mark_terminated_and_wait",
    "sigterm_received",
]
