"""A job that ends, instead of hanging, when one rank's program ends on an uncaught exception.

Under MPICH, ``MPI_Finalize`` waits for every rank of the job, and mpi4py calls it when
the interpreter ends. A rank whose program raised (a data error, an out-of-memory) would
end its interpreter and wait there for the other ranks, which wait in the step's
collective for it: the job hangs, and ``mpiexec`` never hears of the failure. A real
2-rank ``mpiexec -n 2 python examples/digits/train.py`` whose rank 1 raised at step
3,000 stood so until it was killed. ``python -m mpi4py`` avoids it by aborting the job
on an uncaught exception; a script run with plain ``python`` does not, and RankScribe
starts MPI for scripts that never asked for it.

So once RankScribe's MPI coordinator is made for a job of several ranks, a program that
ends on an uncaught exception aborts the job (``MPI_Abort`` on ``COMM_WORLD``, exit code
1), as ``python -m mpi4py`` does, at exit, after Python printed the exception, and after
the callbacks the sibling packages registered with :func:`before_abort` (the writer
closes every record left open, so what they hold is on disk before the abort), once the
launcher has read what the rank printed (at most a second). Not on
``KeyboardInterrupt``: ``mpiexec`` hands Ctrl-C to every rank, and each ends on its own.
``RANKSCRIBE_MPI_ABORT=0`` leaves MPI to finalise as before.

What an abort costs: ``mpiexec`` kills the other ranks at once, and a rank killed loses
what it had not written yet (its kept timings, up to a second of steps:
``docs/job-view.md``, "Where each rank stopped"), as it would when killed by hand.

A rank sent SIGTERM (a scheduler's time limit or preemption: SLURM, Kubernetes and
torchrun send it, then SIGKILL after a grace period) would die at once, losing the same.
While training is recorded (:func:`end_cleanly_on_sigterm`, which the collector calls for
its training runs), a SIGTERM raises :class:`Terminated` in the main thread instead: the
program unwinds (``finally`` blocks and context managers run; the collector writes what it
kept and closes its record), and at exit the :func:`before_abort` callbacks run and the
process ends by SIGTERM, as it would have without RankScribe (its parent, ``mpiexec`` or
the scheduler, sees the same signal). Only where SIGTERM's handler is the default one, in
the main thread: a handler of the program's own (or a framework's) is left alone.
"""

from __future__ import annotations

import array
import atexit
import fcntl
import logging
import os
import signal
import stat
import sys
import termios
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from rankscribe.ranks._args import check_path, check_rank, check_timeout, check_world_size
from rankscribe.ranks.errors import RanksTypeError, RanksValueError

logger = logging.getLogger(__name__)

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

#: ``0`` leaves MPI to finalise after an uncaught exception (the job then waits for the
#: rank's peers); ``1``, the default, aborts the job.
ABORT_ENV = "RANKSCRIBE_MPI_ABORT"

# The callbacks given with first=True, then the others, each in the order given.
_first: list[Callable[[], object]] = []
_later: list[Callable[[], object]] = []
_lock = threading.Lock()
_installed = False


def before_abort(callback: Callable[[], object], *, first: bool = False) -> Callable[[], None]:
    """Call ``callback`` (no arguments) before an abort of the job (and before the end by
    SIGTERM: :func:`end_cleanly_on_sigterm`), in the order given, once however often
    given; returns what forgets it again. ``first``: before every callback given without
    it (what writes into records before the writer closes them all).

    Its exception is logged and the next callback runs: the abort comes regardless."""
    if not callable(callback):
        raise RanksValueError(f"callback must be callable, got {type(callback).__name__}")
    if not isinstance(first, bool):
        raise RanksTypeError(f"first must be a bool, got {type(first).__name__}")
    with _lock:
        if callback not in _first and callback not in _later:
            (_first if first else _later).append(callback)

    def forget() -> None:
        with _lock:
            for callbacks in (_first, _later):
                if callback in callbacks:
                    callbacks.remove(callback)

    return forget


def _aborts() -> bool:
    value = os.environ.get(ABORT_ENV, "1").strip()
    if value not in ("0", "1"):
        raise RanksValueError(f"{ABORT_ENV} must be 0 or 1, got {value!r}")
    return value == "1"


def abort_on_uncaught_exception(mpi: Any) -> None:
    """At exit after an uncaught exception, abort the job through ``mpi`` (mpi4py's ``MPI``).

    Called by the MPI coordinator of a job of several ranks; once per process. A bad
    :data:`ABORT_ENV` is refused here, when the coordinator is made."""
    global _installed  # noqa: PLW0603 - one exit handler per process
    if not _aborts():
        return
    with _lock:
        if _installed:
            return
        _installed = True
    atexit.register(abort_if_uncaught, mpi)


def _uncaught() -> BaseException | None:
    """The exception the program is ending on (Python keeps it as ``sys.last_value``)."""
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    return error if isinstance(error, BaseException) else None


def _run_before_abort(what: str) -> None:
    """The :func:`before_abort` callbacks, in order; one that fails is logged (``what``:
    what comes after them) and the next runs."""
    with _lock:
        callbacks = _first + _later
    for callback in callbacks:
        try:
            callback()
        except Exception:
            logger.exception("%r before %s failed", callback, what)


def abort_if_uncaught(mpi: Any) -> bool:
    """Abort the job if the program is ending on an uncaught exception other than
    ``KeyboardInterrupt`` and MPI still runs; first run the :func:`before_abort` callbacks.

    Returns False where it does not abort (the exit handler's body; ``Abort`` does not
    return)."""
    error = _uncaught()
    if error is None or isinstance(error, KeyboardInterrupt) or mpi.Is_finalized():
        return False
    _run_before_abort("aborting the job")
    comm = mpi.COMM_WORLD
    print(
        f"rank {comm.Get_rank()} of {comm.Get_size()}: the program ended on an uncaught "
        f"{type(error).__name__}; aborting the MPI job so that the other ranks do not wait "
        f"for this one ({ABORT_ENV}=0 waits instead)",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    _wait_for_output_read()
    comm.Abort(1)
    return True


#: The longest a process ending the job waits for its launcher to read what it printed.
_OUTPUT_READ_SECONDS = 1.0


def _wait_for_output_read(timeout: float = _OUTPUT_READ_SECONDS) -> None:
    """Wait, at most ``timeout`` seconds, until whoever reads this process's standard
    output and error through a pipe (``mpiexec``'s proxy, torchrun) has read every byte
    written to them (no wait where they are not pipes).

    Called just before this process ends the job: MPICH's launcher, killing every rank at
    an abort, drops what it has not read yet, which was the end of the traceback (the
    error's own line) in 1 job of 15 here.
    """
    deadline = time.monotonic() + timeout
    pipes = [fd for fd in (1, 2) if _is_pipe(fd)]
    while (pipes := [fd for fd in pipes if _unread_bytes(fd) > 0]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.005)


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def _unread_bytes(fd: int) -> int:
    """The bytes in the pipe behind ``fd`` that its reader has not read (0 where it
    cannot be told)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count)
    except OSError:
        return 0
    return count[0]


class Terminated(SystemExit):
    """Raised in the main thread by the SIGTERM a recorded training run received
    (:func:`end_cleanly_on_sigterm`). A ``SystemExit``, as the signal means "end": an
    ``except Exception`` of the program does not stop it, and Python prints no traceback.
    Its code is 143 (128 + SIGTERM); the process then ends by the signal itself."""


_SIGTERM = signal.SIGTERM
_sigterm_users = 0  # the runs between end_cleanly_on_sigterm and its release
_sigterm_received = False
_sigterm_exit_registered = False
_sigterm_pid = 0  # the process that set the handler (a forked child inherits it)


def end_cleanly_on_sigterm() -> Callable[[], None]:
    """Until the returned function is called: a SIGTERM raises :class:`Terminated` in the
    main thread (once; a second SIGTERM while the program unwinds is ignored), and at exit
    the :func:`before_abort` callbacks run and the process ends by SIGTERM.

    Nothing is changed (and the returned function does nothing) outside the main thread,
    or where SIGTERM's handler is not the default one (the program's own, a framework's,
    or an ignored signal). Calls may nest: the default handler comes back with the last
    release (a last release from another thread leaves the handler, which then acts as
    the default one). A main thread blocked inside a C call (a collective waiting for a dead peer)
    handles the signal when the call returns; SIGKILL, which schedulers send after their
    grace period, ends it at once."""
    global _sigterm_users, _sigterm_exit_registered, _sigterm_pid  # noqa: PLW0603 - one handler a process
    if threading.current_thread() is not threading.main_thread():
        return _nothing
    with _lock:
        current = signal.getsignal(_SIGTERM)
        if current is not _on_sigterm:
            if current is not signal.SIG_DFL:
                return _nothing
            signal.signal(_SIGTERM, _on_sigterm)
            _sigterm_pid = os.getpid()
        _sigterm_users += 1
        if not _sigterm_exit_registered:
            _sigterm_exit_registered = True
            atexit.register(_end_by_sigterm)
    released = False

    def release() -> None:
        global _sigterm_users  # noqa: PLW0603
        nonlocal released
        with _lock:
            if released:
                return
            released = True
            _sigterm_users -= 1
            # Python sets handlers from the main thread only: a release from another
            # thread (training ended there) leaves the handler, which then acts as the
            # default one (_on_sigterm).
            if (
                _sigterm_users == 0
                and threading.current_thread() is threading.main_thread()
                and signal.getsignal(_SIGTERM) is _on_sigterm
            ):
                signal.signal(_SIGTERM, signal.SIG_DFL)

    return release


def _nothing() -> None:
    """What :func:`end_cleanly_on_sigterm` returns where it changed nothing."""


def sigterm_received() -> bool:
    """Whether a SIGTERM stopped training in this process (:func:`end_cleanly_on_sigterm`):
    a :func:`before_abort` callback runs at an abort and at the end by SIGTERM alike, and
    tells them apart by it."""
    return _sigterm_received


def _on_sigterm(signum: int, frame: object) -> None:
    global _sigterm_received  # noqa: PLW0603
    if os.getpid() != _sigterm_pid or _sigterm_users == 0:
        # A forked child (a data loader's worker) inherited the handler, or no training
        # is recorded any more (it ended in another thread, which cannot put the default
        # back): the process ends as it would have, at once.
        signal.signal(_SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), _SIGTERM)
        return
    if _sigterm_received:
        return  # already unwinding: let the writing finish
    _sigterm_received = True
    # Straight to the descriptor: the signal may have come inside a write to sys.stderr,
    # whose buffer a second write from here would find busy (a RuntimeError, not this).
    with suppress(OSError):
        os.write(
            2,
            f"process {os.getpid()}: SIGTERM during training; stopping here and writing "
            f"what was recorded, then ending by SIGTERM\n".encode(),
        )
    raise Terminated(128 + signum)


def _end_by_sigterm() -> None:
    """At exit after a SIGTERM (:func:`end_cleanly_on_sigterm`): the :func:`before_abort`
    callbacks (records left open are closed), then the signal again, by its default
    action: the process's parent sees it end as the sender meant."""
    if not _sigterm_received:
        return
    _run_before_abort("ending on SIGTERM")
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    _wait_for_output_read()
    signal.signal(_SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), _SIGTERM)
    os._exit(128 + _SIGTERM)  # (the signal blocked in this thread: end as it would have)


#: A rank's mark: ``<job dir>/.rankscribe-terminated-<rank>``.
TERMINATED_MARK_PREFIX = ".rankscribe-terminated-"
#: How long a rank ended by SIGTERM waits for the others' marks: within the grace that
#: schedulers give between SIGTERM and SIGKILL (SLURM's KillWait, Kubernetes and torchrun:
#: 30 s by default), with the time to write what the rank held before it.
TERMINATED_WAIT_SECONDS = 10.0
_POLL_SECONDS = 0.02


def _mark(job_dir: str | os.PathLike[str], rank: int) -> str:
    return os.path.join(job_dir, f"{TERMINATED_MARK_PREFIX}{rank}")


def forget_terminated_mark(job_dir: str | os.PathLike[str], rank: int) -> None:
    """Remove ``rank``'s mark (:func:`mark_terminated_and_wait`) of an earlier run in
    ``job_dir``, if any (a link: the link itself)."""
    directory = check_path("job_dir", job_dir)
    number = check_rank("rank", rank, 2**31)
    with suppress(FileNotFoundError):
        os.unlink(_mark(directory, number))


def mark_terminated_and_wait(
    job_dir: str | os.PathLike[str],
    rank: int,
    world_size: int,
    *,
    timeout: float = TERMINATED_WAIT_SECONDS,
) -> list[int]:
    """Mark ``rank``'s files closed in ``job_dir``, then wait until every one of the
    ``world_size`` ranks has, at most ``timeout`` seconds; returns the ranks whose marks
    never came (none: every rank wrote what it held).

    Ranks sent SIGTERM together end together, each once its files are closed: ``mpiexec``
    kills a job's other ranks (SIGKILL) as soon as one ends on a signal, and the first
    rank done cut the others' writing short (a real 2-rank job left a rank's lineage file
    open in about one run of three). The collector calls it at its end by SIGTERM in a job
    of several ranks. A mark is ``<job dir>/.rankscribe-terminated-<rank>``, made without
    following a link; the others' are only looked for (``os.path.lexists``), never opened.
    A rank not sent SIGTERM never marks, and ranks that do not share the job's directory
    (nodes without a shared file system) never see each other's: the others then wait
    the whole bound."""
    directory = check_path("job_dir", job_dir)
    size = check_world_size("world_size", world_size)
    number = check_rank("rank", rank, size)
    seconds = check_timeout("timeout", timeout)
    # (Non-blocking: a FIFO planted at the name fails at once instead of waiting for a reader.)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(_mark(directory, number), flags, 0o600)
    os.close(descriptor)
    deadline = time.monotonic() + seconds
    waiting = [other for other in range(size) if other != number]
    while True:
        waiting = [other for other in waiting if not os.path.lexists(_mark(directory, other))]
        if not waiting or time.monotonic() >= deadline:
            return waiting
        time.sleep(_POLL_SECONDS)
