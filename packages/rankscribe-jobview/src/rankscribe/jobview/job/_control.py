"""The control file: thresholds and the interval, changed while a job runs.

Rank 0 reads ``<job>/.rankscribe-control.json`` each round of the live view
(``docs/job-view.md``, "Changing the settings while the job runs"). A JSON
object with any of::

    {"job_view_interval": 30, "cost_floor": 0.01, "confidence": 7, "window_steps": 400}

Read safely, as a file of a shared folder: opened with ``O_NOFOLLOW |
O_NONBLOCK`` (a planted link is not followed, a planted FIFO never blocks),
a regular file of this user only, at most :data:`MAX_CONTROL_BYTES`, a flat
object of known keys with values in range. Anything else is one warning
(per content) and the settings stay as they were.
"""

from __future__ import annotations

import logging
import math
import os
import stat
from typing import Any

from rankscribe.jobview.job._protocol import CONTROL_NAME
from rankscribe.ranks.jsondata import JSONDataError, parse_json

logger = logging.getLogger(__name__)

__all__ = ["MAX_CONTROL_BYTES", "ControlFile"]

#: A control file larger than this is refused.
MAX_CONTROL_BYTES = 4096


def _number(value: Any) -> float | None:
    """``value`` as a finite float; None for anything else (an int past float's range too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _seconds(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number > 0 else None


def _share(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and 0 <= number <= 1 else None


def _window(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool)
    return value if ok and 20 <= value <= 100_000 else None


#: key -> (checker, what it expects).
_KEYS = {
    "job_view_interval": (_seconds, "a number of seconds > 0"),
    "cost_floor": (_share, "a share of the step from 0 to 1"),
    "confidence": (_seconds, "a number of standard errors > 0"),
    "window_steps": (_window, "an int of steps from 20 to 100000"),
}


class ControlFile:
    """The control file of ``job_dir``; :meth:`read` gives its settings when they changed."""

    def __init__(self, job_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.fspath(job_dir), CONTROL_NAME)
        self._seen: tuple[int, int, int] | None = None  # (inode, size, mtime_ns) last read
        self._warned = ""  # the last problem warned about (said once)

    def read(self) -> dict[str, Any] | None:  # noqa: PLR0911 - one return per refusal
        """The new settings (a dict of known keys), or None: no file, no change, or bad content.

        Never raises: whatever the file holds, the live view goes on.
        """
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            descriptor = os.open(self.path, flags)
        except FileNotFoundError:
            self._seen = None
            return None
        except OSError as error:
            return self._refuse(None, f"it cannot be opened ({error})")
        try:
            with os.fdopen(descriptor, "rb") as handle:
                info = os.fstat(handle.fileno())
                seen = (info.st_ino, info.st_size, info.st_mtime_ns)
                if seen == self._seen:
                    return None
                self._seen = seen
                if not stat.S_ISREG(info.st_mode):
                    return self._refuse(seen, "it is not a regular file")
                if hasattr(os, "getuid") and info.st_uid != os.getuid():
                    return self._refuse(seen, "another user owns it")
                data = handle.read(MAX_CONTROL_BYTES + 1)
        except OSError as error:
            return self._refuse(self._seen, f"it cannot be read ({error})")
        try:
            settings = _settings(data)
        except _RefusedError as refusal:
            return self._refuse(seen, str(refusal))
        except Exception as error:  # whatever the content, the live view goes on
            return self._refuse(seen, f"it cannot be read as settings ({error!r:.200})")
        self._warned = ""
        logger.info("job view: settings from %s: %s", self.path, settings)
        return settings

    def _refuse(self, seen: tuple[int, int, int] | None, why: str) -> dict[str, Any] | None:
        self._seen = seen
        if why == self._warned:
            return None
        self._warned = why
        logger.warning(
            "job view: %s is ignored (%s); the settings stay as they were", self.path, why
        )
        return None


class _RefusedError(Exception):
    """Content that is no settings; the message says why."""


def _settings(data: bytes) -> dict[str, Any]:
    """The settings ``data`` holds; :class:`_RefusedError` saying why it holds none."""
    if len(data) > MAX_CONTROL_BYTES:
        raise _RefusedError(f"it is larger than {MAX_CONTROL_BYTES} bytes")
    try:
        # A flat object: one level; deeper nesting is refused before it is parsed.
        content = parse_json(data, what="it", max_bytes=MAX_CONTROL_BYTES, max_depth=1)
    except JSONDataError as error:
        raise _RefusedError(str(error)) from None
    if not isinstance(content, dict):
        raise _RefusedError("it is not a JSON object")
    settings: dict[str, Any] = {}
    for key, value in content.items():
        rule = _KEYS.get(key)
        if rule is None:
            raise _RefusedError(f"{key!r:.80} is not a setting (known: {', '.join(_KEYS)})")
        checked = rule[0](value)
        if checked is None:
            raise _RefusedError(f"{key} should be {rule[1]}, but got {_shown(value)}")
        settings[key] = checked
    return settings


def _shown(value: Any) -> str:
    """``value`` for a message: a number of thousands of digits is named by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an int of {value.bit_length()} bits"
    return f"{value!r:.80}"
