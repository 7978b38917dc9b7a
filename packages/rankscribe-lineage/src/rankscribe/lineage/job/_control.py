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

import json
import logging
import math
import os
import stat
from typing import Any

from rankscribe.lineage.job._protocol import CONTROL_NAME

logger = logging.getLogger(__name__)

__all__ = ["MAX_CONTROL_BYTES", "ControlFile"]

#: A control file larger than this is refused.
MAX_CONTROL_BYTES = 4096


def _seconds(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value > 0 else None


def _share(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and 0 <= value <= 1 else None


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
        """The new settings (a dict of known keys), or None: no file, no change, or bad content."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            descriptor = os.open(self.path, flags)
        except FileNotFoundError:
            self._seen = None
            return None
        except OSError as error:
            return self._refuse(None, f"it cannot be opened ({error})")
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
        if len(data) > MAX_CONTROL_BYTES:
            return self._refuse(seen, f"it is larger than {MAX_CONTROL_BYTES} bytes")
        try:
            content = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return self._refuse(seen, f"it is not JSON ({error})")
        if not isinstance(content, dict):
            return self._refuse(seen, "it is not a JSON object")
        settings: dict[str, Any] = {}
        for key, value in content.items():
            rule = _KEYS.get(key)
            if rule is None:
                return self._refuse(seen, f"{key!r} is not a setting (known: {', '.join(_KEYS)})")
            checked = rule[0](value)
            if checked is None:
                return self._refuse(seen, f"{key} should be {rule[1]}, but got {value!r}")
            settings[key] = checked
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
