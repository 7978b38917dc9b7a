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
from typing import Any

__all__ = ["DeferredValue"]


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
