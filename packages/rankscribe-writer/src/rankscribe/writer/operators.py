"""Summary operators: record a value from anywhere in the model or optimizer code.

    from rankscribe.writer import scalar_summary, histogram_summary

    def forward(x):
        ...
        histogram_summary("fc1/activation", hidden)   # buffered into the current step

The original's ``ScalarSummary``/``TensorSummary``/``ImageSummary``/
``HistogramSummary`` operators, as plain functions. Values are buffered under
the original's names ``TAG[:Scalar]``, ``TAG[:Tensor]``, ``TAG[:Image]``,
``TAG[:Histogram]`` and the next ``SummaryRecord.record`` in train mode takes
them into its step (so a collector's plugin filter applies to them as to
everything else). While no SummaryRecord is open, a call returns at once and
keeps nothing; so does a call in a step the SummaryCollector (the one record
open) has said it will not record (:func:`discard_pending` with
``skip_next_step``): a network that calls the operators every step copies their
values at the collected steps only. Likewise a call of a kind the next recorded
step would drop (``keep_next``: a collector's step that records no tensors
returns at once from ``tensor_summary``; a tensor off the host is not read back
for it). Within one step a name recorded twice keeps its last value, with one
warning. A value on an accelerator is not read on the caller's thread where a device
reader is installed (``rankscribe.writer.deferred.set_device_reader``; the collector's
torch adapter installs one): its copy to the host is started, and the writer's threads
read it when they encode the step.

A sibling-facing module (docs/contributing.md, "Sibling modules"): users import the
operators from :mod:`rankscribe.writer`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from rankscribe.writer.deferred import DeferredValue
from rankscribe.writer.encoding._values import Snapshot, check_name, device_snapshot, snapshot

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# How many SummaryRecords are open: a one-element list, so the hot check needs
# no global statement and no call.
_open_records = [0]
# Whether the step under way will not be recorded (discard_pending's skip_next_step):
# a one-element list for the same reason.
_skipping = [False]
#: The kinds (``"Tensor"``, ...) whose calls return at once in the step under way, which
#: the step's record would drop (discard_pending's ``keep_next``).
_NONE_DROPPED: frozenset[str] = frozenset()
_dropped = [_NONE_DROPPED]
_KINDS = ("Scalar", "Tensor", "Image", "Histogram")
_buffer: dict[str, Snapshot] = {}
_warned: set[str] = set()


def scalar_summary(name: str, value: Any) -> None:
    """Record a scalar (a number or a one-element array) in the current step."""
    _buffer_value("Scalar", name, value)


def tensor_summary(name: str, value: Any) -> None:
    """Record a tensor in the current step (kept only at tensor-collection steps)."""
    _buffer_value("Tensor", name, value)


def image_summary(name: str, value: Any) -> None:
    """Record an NCHW image batch (C = 1 or 3) in the current step."""
    _buffer_value("Image", name, value)


def histogram_summary(name: str, value: Any) -> None:
    """Record the histogram of an array in the current step."""
    _buffer_value("Histogram", name, value)


def _buffer_value(kind: str, name: str, value: Any) -> None:
    if not _open_records[0] or _skipping[0] or kind in _dropped[0]:
        return  # nobody records it: cost no more than this check
    check_name(name)
    key = f"{name}[:{kind}]"
    plugin = kind.lower()
    snap = device_snapshot(plugin, name, value)  # on an accelerator: read when encoded
    if snap is None:
        snap = snapshot(plugin, name, value)
    with _lock:
        if key in _buffer and key not in _warned:
            _warned.add(key)
            logger.warning(
                "Summary operator '%s' was called more than once in one step; "
                "only the last value is recorded.",
                key,
            )
        _buffer[key] = snap


# The operators' one spelling is the package's (``from rankscribe.writer import
# scalar_summary``); what this module gives the sibling packages is the collector's
# discard of values buffered outside a recorded step (docs/contributing.md).
__all__ = ["discard_dropped", "discard_pending", "has_deferred", "keep_next", "skip_flag"]


def skip_flag() -> list[bool]:
    """The one-element list whose item is True while the operators return at once (the
    step under way will not be recorded: :func:`discard_pending`). For a loop that
    finishes such steps without calling the collector: it reads the item, never sets it."""
    return _skipping


def has_buffered() -> bool:
    return bool(_buffer)


def has_deferred() -> bool:
    """Whether a value buffered for the step under way is still on its way from a device
    (``rankscribe.writer.deferred.set_device_reader``): a flush that waits for the step
    to be written would wait for the device."""
    with _lock:
        return any(isinstance(snap.data, DeferredValue) for snap in _buffer.values())


def discard_pending(
    *, skip_next_step: bool = False, keep_next: Callable[[str], bool] | None = None
) -> None:
    """Forget the operators' values buffered for a step that will not be recorded.

    A training loop calls this when a step ends without ``SummaryRecord.record``
    (the original overwrote them at the next step); without it they would pile
    up until the next recorded step and warn about duplicates.

    ``skip_next_step``: the next step will not be recorded either, so until the
    next call of this function (or a record taking the operators' values, or
    another SummaryRecord opening) the operators return at once, without copying
    their values. Only while one SummaryRecord is open (the caller's): a second
    one, the user's own, records at steps the caller does not know.

    ``keep_next``: the plugin filter the next step's ``SummaryRecord.record`` will be
    given (``keep(plugin)``, as :func:`discard_dropped` takes it): until the same
    points, the operators of the plugins it drops return at once, without reading
    their values (a tensor on an accelerator is not copied to the host for a step
    that will not write it). Only while one SummaryRecord is open, as above.
    """
    if _buffer:
        take_buffered()
    _skipping[0] = skip_next_step and _open_records[0] == 1
    _dropped[0] = _kinds_dropped(keep_next)


def keep_next(keep: Callable[[str], bool] | None) -> None:
    """Say the next recorded step's plugin filter (:func:`discard_pending`'s ``keep_next``)
    without forgetting what is buffered; None: the operators read every value again."""
    _dropped[0] = _kinds_dropped(keep)


def _kinds_dropped(keep: Callable[[str], bool] | None) -> frozenset[str]:
    """The kinds ``keep`` drops, while the caller's record is the one open (a second
    one, the user's own, may keep them at steps the caller does not know); else none."""
    if keep is None or _open_records[0] != 1:
        return _NONE_DROPPED
    return _dropped_by(keep)


@lru_cache(maxsize=16)
def _dropped_by(keep: Callable[[str], bool]) -> frozenset[str]:
    """The operator kinds whose plugin ``keep`` drops (the collector's few filters)."""
    return frozenset(kind for kind in _KINDS if not keep(kind.lower()))


def discard_dropped(keep: Callable[[str], bool]) -> bool:
    """Forget the values buffered for the step under way when ``keep(plugin)`` is False
    for every one of them, and return True (also when none are buffered); else keep
    them all and return False.

    ``keep`` is the plugin filter the step's ``SummaryRecord.record`` would be given:
    when it drops them all, that record would write nothing of them, so a caller that
    writes the step's other values by a shorter way (the collector's light steps, whose
    tensors only some steps keep) loses nothing by forgetting them.
    """
    if not _buffer:  # the usual case (a light step's): no lock, no call of ``keep``
        _skipping[0] = False
        _dropped[0] = _NONE_DROPPED
        return True
    with _lock:
        if any(keep(snap.plugin) for snap in _buffer.values()):
            return False
        _buffer.clear()
        _warned.clear()
        _skipping[0] = False
        _dropped[0] = _NONE_DROPPED
    return True


def take_buffered() -> list[Snapshot]:
    """Everything buffered since the last call, in call order (for SummaryRecord.record)."""
    with _lock:
        taken = list(_buffer.values())
        _buffer.clear()
        _warned.clear()
        _skipping[0] = False
        _dropped[0] = _NONE_DROPPED
    return taken


def record_opened() -> None:
    with _lock:
        _open_records[0] += 1
        _skipping[0] = False  # its steps are its own
        _dropped[0] = _NONE_DROPPED


def reset_in_child() -> None:
    """After a fork: nothing is recording in the child, and the lock may be held."""
    global _lock  # noqa: PLW0603 - a lock held by a parent thread at fork stays held
    _lock = threading.Lock()
    _open_records[0] = 0
    _skipping[0] = False
    _dropped[0] = _NONE_DROPPED
    _buffer.clear()
    _warned.clear()


def record_closed() -> None:
    with _lock:
        _open_records[0] = max(0, _open_records[0] - 1)
        _skipping[0] = False
        _dropped[0] = _NONE_DROPPED
        if not _open_records[0]:
            _buffer.clear()
            _warned.clear()
