"""What a failed write in the writer thread does: raise on the caller's next call, or log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rankscribe.writer.errors import RecordTooLargeError, WriterError, WriterOSError

logger = logging.getLogger(__name__)


class WriteErrorPolicy:
    """``raise_exception`` applied to writes: no write error ends the writer thread.

    With ``raise_exception`` every error goes to ``report`` (the pipeline hands
    it to the caller's next call); without it every refused record is logged,
    and a failing disk once per kind of failure.
    """

    def __init__(self, raise_exception: bool, report: Callable[[BaseException], None]) -> None:
        self._raise_exception = raise_exception
        self._report = report
        self._errors_logged: set[str] = set()
        #: Failed writes so far (written by the writer thread only); a record refused as
        #: too large for max_file_size is a refusal by rule, logged, and not counted.
        self.failures = 0
        self._failures_seen = 0  # as of the last flush

    def flush_succeeded(self, state: tuple[int, int, int]) -> bool:
        """Whether a flush put everything on disk, given (failed writes so far, bytes kept
        after a failed write, records given up) as of its sync; logs what is missing."""
        failures, unwritten, lost = state
        new_failures, self._failures_seen = failures - self._failures_seen, failures
        if not (new_failures or unwritten or lost):
            return True
        # A warning: the failed write itself is logged once, as an error.
        logger.warning(
            "flush: not everything recorded is on disk: %d failed writes since the last "
            "flush, %d bytes waiting for a write that succeeds, %d records given up",
            new_failures,
            unwritten,
            lost,
        )
        return False

    def guarded(
        self, target: str, step: int | None, action: Callable[..., Any], *args: Any
    ) -> None:
        """Run a write; apply ``raise_exception`` to what fails, keep going either way."""
        try:
            action(*args)
        except (OSError, WriterError) as error:  # never the writer thread's end
            self.failed(target, error, step)

    def failed(self, target: str, error: Exception, step: int | None) -> None:
        """Raise on the caller's next call, or log: every refused record, a failing disk once."""
        if not isinstance(error, RecordTooLargeError):
            self.failures += 1
        if self._raise_exception:
            self._report(_own_error(target, step, error))
            return
        if isinstance(error, RecordTooLargeError):
            logger.warning("%s data of step %s was not written: %s", target, step, error)
            return
        # One log line per kind of failure: a full disk fails every file alike.
        kind = f"{type(error).__name__}:{getattr(error, 'errno', None)}"
        if kind not in self._errors_logged:
            self._errors_logged.add(kind)
            logger.error(
                "writing %s data failed (further such errors are not logged): %s", target, error
            )


def _own_error(target: str, step: int | None, error: Exception) -> Exception:
    """The writer's own error for an operating system's one (it stays an OSError)."""
    if isinstance(error, WriterError) or not isinstance(error, OSError):
        return error
    where = f"{target} data" if step is None else f"{target} data of step {step}"
    own = WriterOSError(
        error.errno, f"writing {where} failed: {error.strerror or error}", error.filename
    )
    own.__cause__ = error
    return own
