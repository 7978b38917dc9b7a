"""What a failed write in the writer thread does: raise on the caller's next call, or log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rankscribe.writer.errors import RecordTooLargeError, WriterError

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
        if self._raise_exception:
            self._report(error)
            return
        if isinstance(error, RecordTooLargeError):
            logger.warning("%s data of step %s was not written: %s", target, step, error)
            return
        # One log line per kind of failure: a full disk fails every file alike.
        kind = f"{type(error).__name__}:{getattr(error, 'errno', None)}"
        if kind not in self._errors_logged:
            self._errors_logged.add(kind)
            logger.error("writing %s data failed (further such errors are not logged): %s",
                         target, error)
