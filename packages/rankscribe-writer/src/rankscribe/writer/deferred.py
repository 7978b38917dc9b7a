"""Values a sibling hands the writer before they exist on the host.

    from rankscribe.writer.deferred import DeferredValue

A sibling-facing module (docs/contributing.md, "Sibling modules"). The collector reads an
accelerator's loss, histograms and fingerprints without making the training thread wait
for the device: at a collected step it starts their copies to the host and hands
``SummaryRecord.add_value`` a :class:`DeferredValue` for each (a ``scalar`` or a
``histogram``). The record keeps it in its step, in step order, and the writer's own
threads call :meth:`DeferredValue.resolve` when they encode that step (waiting there for
the device is fine: it is not the training thread). docs/file-format.md, "Values read
from a device".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["DeferredArray", "DeferredValue", "set_device_reader"]


class DeferredValue(ABC):
    """A value of one step, known later: what :meth:`resolve` returns is recorded.

    ``resolve`` is called off the training thread, at least once and possibly from
    several threads (the writer, the collector at the end of training), so it must
    return the same value each time. It returns what ``add_value`` takes for the
    plugin: a number for a scalar; a NumPy array or a
    :class:`~rankscribe.writer.histograms.HistogramData` for a histogram. When it
    raises, the value is logged and left out of its step, as a value that fails to
    encode.
    """

    @abstractmethod
    def resolve(self) -> Any:
        """The value itself (may wait for it)."""


class DeferredArray(DeferredValue):
    """A deferred array whose ``shape`` and ``dtype`` (a native NumPy dtype) are known now:
    a value a summary operator was given on an accelerator, its copy to the host under
    way. :meth:`~DeferredValue.resolve` returns the host array of that shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]


#: What the summary operators read a value given on an accelerator through (the reader
#: ``set_device_reader`` installed; None: none, every value is read on the host there and
#: then). An item of a one-element list: the operators' hot path reads it with no call.
device_reader: list[Callable[[object], DeferredArray | None] | None] = [None]


def set_device_reader(
    reader: Callable[[object], DeferredArray | None] | None,
) -> Callable[[object], DeferredArray | None] | None:
    """Install ``reader`` (returns the previous one): the summary operators
    (``scalar_summary`` ..., at the steps that record them) hand it each value that is
    not a NumPy array or a Python number; it returns a :class:`DeferredArray` for a
    value on an accelerator, whose copy to the host it has started without waiting, or
    None for a value the host reads at once. The collector's torch adapter installs
    one for torch tensors: an operator's value on a GPU never makes the training
    thread wait for the device (docs/file-format.md, "Values read from a device")."""
    previous = device_reader[0]
    device_reader[0] = reader
    return previous
