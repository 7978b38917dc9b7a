"""Errors raised by rankscribe.ranks.

Every error derives from :class:`RanksError` and from the built-in exception it
refines, so callers that catch ``ValueError``, ``TypeError``, ``TimeoutError``,
``ImportError``, ``OSError`` or ``RuntimeError`` keep working. The two raised only by
the sibling-facing modules are exported there, beside the functions that raise them:
:class:`JSONDataError` by :mod:`rankscribe.ranks.jsondata`, :class:`UnsafeFileError`
and :class:`LockTimeoutError` by :mod:`rankscribe.ranks.files` (``docs/contributing.md``,
"Errors").
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BackendUnavailableError",
    "BarrierTimeoutError",
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "CoordinatorClosedError",
    "JobDirClaimedError",
    "JobDirError",
    "MessageError",
    "RankEnvironmentError",
    "RanksError",
    "RanksTypeError",
    "RanksValueError",
    "RendezvousError",
    "StoreError",
]


class RanksError(Exception):
    """Base class of every error raised by rankscribe.ranks."""


class RanksValueError(RanksError, ValueError):
    """An argument has the right type but an unusable value."""


class RanksTypeError(RanksError, TypeError):
    """An argument has the wrong type, or an object given to a collective is not data."""


class RankEnvironmentError(RanksError, ValueError):
    """A launcher variable is malformed or contradicts another one.

    ``variable`` is the environment variable at fault, ``value`` what it held
    (``None`` when it is missing) and ``expected`` the form it should have.
    """

    def __init__(self, variable: str, value: str | None, expected: str) -> None:
        shown = "is not set" if value is None else f"is {value!r}"
        super().__init__(f"environment variable {variable} {shown}: expected {expected}")
        self.variable = variable
        self.value = value
        self.expected = expected


class BackendUnavailableError(RanksError, ImportError):
    """The requested coordination backend cannot be used here (e.g. no MPI library)."""


class RendezvousError(RanksError, OSError):
    """The file backend's rendezvous folder cannot be used for this job."""


class MessageError(RanksError, ValueError):
    """A message from another rank (a file, a store value) is not one this package writes.

    Messages carry data only (see ``docs/layout.md``); nothing in one is ever executed.
    """


class LockTimeoutError(RanksError, TimeoutError):
    """A lock file stayed held by another process past the timeout
    (:func:`rankscribe.ranks.files.exclusive_lock`)."""


class JSONDataError(RanksError, ValueError):
    """JSON read from a file or a message is not what the package reads: too large, nested
    too deep, not UTF-8 or not JSON (:func:`rankscribe.ranks.jsondata.parse_json`)."""


class JobDirError(RanksError, OSError):
    """The job's directory cannot be claimed (see ``claim_job_dir``)."""


class JobDirClaimedError(JobDirError, FileExistsError):
    """The job directory belongs to another job already (``claim_job_dir(on_exists="error")``).

    ``directory`` is the directory and ``claim`` what its claim file says (empty when the
    directory holds a run recorded without a claim).
    """

    def __init__(self, message: str, directory: str, claim: dict[str, object]) -> None:
        super().__init__(message)
        self.directory = directory
        self.claim = claim


class UnsafeFileError(RanksError, OSError):
    """A file to read from a directory others may write is not one to read.

    A link, a FIFO, a socket, a device or a directory where a regular file should be;
    with an ownership rule, a file of another user or one others may write; or a file
    longer than its reader expects (``rankscribe.ranks.files.open_regular``). ``path``
    names the file and ``reason`` says what was found. An ``OSError``: code that skips
    an unreadable file skips this one too.
    """

    def __init__(self, path: str, reason: str, action: str = "read") -> None:
        super().__init__(f"refusing to {action} {path}: {reason}")
        self.path = path
        self.reason = reason


class StoreError(RanksError, RuntimeError):
    """The store backend's key-value store failed a request (e.g. its host process ended)."""


class CoordinatorClosedError(RanksError, RuntimeError):
    """A collective was called on a coordinator after ``close()``."""


class CollectiveMismatchError(RanksError, RuntimeError):
    """Ranks called different collectives at the same position in their sequence.

    Every rank must call every collective in the same order; this is raised when
    the message or file of another rank shows that it did not.
    """


class CollectiveTimeoutError(RanksError, TimeoutError):
    """A collective did not complete within its timeout.

    ``missing`` lists the ranks this rank did not hear from in time (for a rank
    other than the root that is usually just the root).
    """

    def __init__(self, operation: str, timeout: float, missing: Sequence[int], detail: str) -> None:
        super().__init__(
            f"{operation} timed out after {timeout:g} s: {detail} "
            f"(missing ranks: {', '.join(map(str, missing)) or 'none known'})"
        )
        self.operation = operation
        self.timeout = timeout
        self.missing: tuple[int, ...] = tuple(missing)


class BarrierTimeoutError(CollectiveTimeoutError):
    """A barrier did not complete within its timeout; ``missing`` names the absent ranks."""
