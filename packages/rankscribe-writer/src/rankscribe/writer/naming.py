"""File names of summary, lineage and TensorBoard event files.

The viewer (MindInsight) finds summary files by the pattern ``summary\\.(\\d+)``
and orders them by that number, the creation time ``T``; lineage files are the
same names ending in ``_lineage`` instead of the summary suffix. Names must
never collide, so each (directory, T) pair is claimed once per process and a
claimed or already-present T is bumped to the next free second: the name keeps
the original's exact shape and the viewer's ordering stays the creation order.
"""

from __future__ import annotations

import itertools
import os
import platform
import re
import threading
import time

LINEAGE_SUFFIX = "_lineage"
_AFFIX = re.compile(r"^\w+[0-9a-zA-Z_.]*$", re.ASCII)
_TIMESTAMP = re.compile(r"summary\.(\d+)")

_claim_lock = threading.Lock()
_claimed: dict[str, set[int]] = {}
_tensorboard_counter = itertools.count()


def host_name() -> str:
    """The host part of file names (the original uses ``platform.node()``)."""
    return platform.node() or "localhost"


def is_valid_affix(value: object) -> bool:
    """Whether ``value`` is a usable ``file_prefix``/``file_suffix``."""
    return isinstance(value, str) and bool(_AFFIX.match(value))


def summary_file_name(prefix: str, timestamp: int, rank: int | str, host: str, suffix: str) -> str:
    """``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}``, as MindSpore >= 1.2 names them."""
    return f"{prefix}.out.events.summary.{timestamp}.{rank}.{host}{suffix}"


def claim_timestamp(directory: str, not_before: int | None = None) -> int:
    """Return a creation time for new files in ``directory`` that no other file uses.

    Starts at the current second (or ``not_before``, when later) and moves
    forward past every second already claimed in this process or already used by
    a summary file in the directory.
    """
    key = os.path.realpath(directory)
    candidate = max(int(time.time()), not_before or 0)
    with _claim_lock:
        taken = _claimed.setdefault(key, set()) | _timestamps_on_disk(key)
        while candidate in taken:
            candidate += 1
        _claimed[key].add(candidate)
    return candidate


def _timestamps_on_disk(directory: str) -> set[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    found = set()
    for name in names:
        match = _TIMESTAMP.search(name)
        if match:
            found.add(int(match.group(1)))
    return found


def _new_lock_in_child() -> None:
    """A lock that a thread of the parent (a rotating writer) held at fork stays held."""
    global _claim_lock  # noqa: PLW0603
    _claim_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def tensorboard_file_name(timestamp: int, host: str) -> str:
    """``events.out.tfevents.{T}.{host}.{pid}.{n}``; TensorBoard reads any name with 'tfevents'.

    The pid and a process-wide counter keep two writers in one second apart.
    """
    return f"events.out.tfevents.{timestamp}.{host}.{os.getpid()}.{next(_tensorboard_counter)}"
