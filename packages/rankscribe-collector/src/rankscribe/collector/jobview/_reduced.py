"""The gradient norms of a loop of the user's own: ``SummaryCollector.allreduce_gradients``.

A loop that averages its gradients itself (NumPy arrays, ``comm.Allreduce`` under
MPI) has no DDP hook for the collector to probe; it hands the arrays to
:func:`allreduce_gradients` instead, which records each array's local L2 norm
(accumulated in float64), its peak (the largest norm of a row of :data:`_ROW`
consecutive elements, as the DDP probe's) and the seconds since the step's start,
then sums them across the ranks in place (and divides by the ranks,
``average=True``). Each array is a bucket: ``rankscribe/gradient/norm/<index>``
and ``rankscribe/gradient/peak/<index>`` in the order given, the tags the DDP
probe records (``docs/gradients.md``, "Your own loop").
:class:`ReducedGradients` keeps them until the step's end, with the interface of
the torch adapter's probe (``started``, ``take``, ``finish``, ``reset``,
``remove``), so :class:`~rankscribe.collector.jobview._timings.StepTimings`
records both alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.collector import _clock
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError

__all__ = ["ReducedGradients", "allreduce_gradients", "norm_and_peak"]

#: Elements summed in float32 before the float64 sum of the rows (a float64 copy costs
#: 5x), and the elements of a row whose norm the peak is the largest of (the DDP probe's).
_ROW = 256


def norm_and_peak(values: npt.NDArray[Any]) -> tuple[float, float]:
    """The L2 norm of an array, accumulated in float64 (float32 rows of :data:`_ROW`),
    and its peak: the largest norm of a row of :data:`_ROW` consecutive elements (the
    last row may be shorter; NaN if an element is)."""
    flat = values.reshape(-1)
    whole = flat.size // _ROW * _ROW
    rows = flat[:whole].reshape(-1, _ROW)
    tail = flat[whole:]
    wide = np.float64 if flat.dtype == np.float64 else np.float32
    squares = np.empty(len(rows) + 1, dtype=np.float64)
    squares[:-1] = np.einsum("ij,ij->i", rows, rows, dtype=wide)
    squares[-1] = np.einsum("i,i->", tail, tail, dtype=np.float64)
    norm = math.sqrt(float(squares.sum()))
    if math.isinf(norm):  # a row's float32 sum overflowed, or an element is infinite
        norm = math.sqrt(float(np.einsum("i,i->", flat, flat, dtype=np.float64)))
    return norm, math.sqrt(float(np.max(squares)))


class ReducedGradients:
    """The norms :func:`allreduce_gradients` recorded in this step, until its end."""

    #: The ready time is not taken as the rank's arrival: a loop's own reduce names its
    #: arrival with ``section("sync")`` (docs/gradients.md, "A slow backward").
    arrival = False

    def __init__(self) -> None:
        self._norms: list[tuple[int, float, float]] = []  # (bucket, norm, peak)
        self._ready_at: float | None = None
        self._spent = 0.0

    def record(self, norms: list[tuple[float, float]], entered: float) -> None:
        """A call's ``(norm, peak)`` per array (a second call in a step adds its arrays
        after the first's), computed from ``entered`` (a reading of the collector's
        clock) until now."""
        first = len(self._norms)
        self._norms.extend((first + index, norm, peak) for index, (norm, peak) in enumerate(norms))
        self._ready_at = ready = _clock.now()
        self._spent += ready - entered

    def take_spent(self) -> float:
        """Seconds spent on the norms since the last call (the collector's cost budget's)."""
        spent, self._spent = self._spent, 0.0
        return spent

    def take(
        self, step: int, started: float | None = None
    ) -> list[tuple[int, list[tuple[int, float, float]], float | None]]:
        """This step's norms, and the seconds from ``started`` to its last call."""
        norms, ready_at = self._norms, self._ready_at
        self._norms, self._ready_at = [], None
        ready = _clock.since(ready_at, started)
        return [(step, norms, ready)] if norms or ready is not None else []

    def finish(self) -> list[tuple[int, list[tuple[int, float, float]], float | None]]:
        return []

    def reset(self) -> None:
        self._norms, self._ready_at = [], None

    def remove(self) -> None:
        self.reset()


def _arrays(gradients: object) -> list[npt.NDArray[Any]]:
    """``gradients`` as a list of writeable, contiguous floating NumPy arrays, or a clear error."""
    listed = [gradients] if isinstance(gradients, np.ndarray) else gradients
    if not isinstance(listed, Sequence) or isinstance(listed, (str, bytes)) or not listed:
        raise CollectorTypeError(
            f"For 'allreduce_gradients', the argument 'gradients' should be a NumPy array or a "
            f"non-empty list of them, but got {type(gradients).__name__}."
        )
    for index, array in enumerate(listed):
        if not isinstance(array, np.ndarray) or array.dtype.kind != "f":
            raise CollectorTypeError(
                f"For 'allreduce_gradients', gradients[{index}] should be a NumPy array of "
                f"floats, but got {type(array).__name__} "
                f"{getattr(array, 'dtype', '')}".rstrip()
                + "."
            )
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise CollectorValueError(
                f"For 'allreduce_gradients', gradients[{index}] should be a writeable, "
                f"C-contiguous array (it is reduced in place), but it is not: pass "
                f"np.ascontiguousarray(...) and use the result."
            )
    return list(listed)


def allreduce_gradients(
    comm: object, gradients: object, *, average: bool, recorder: ReducedGradients | None
) -> None:
    """Record each array's local norm (``recorder``: None records nothing), then sum it
    across ``comm``'s ranks in place, and divide by their number when ``average``."""
    allreduce = getattr(comm, "Allreduce", None)
    size = getattr(comm, "Get_size", None)
    if not callable(allreduce) or not callable(size):
        raise CollectorTypeError(
            f"For 'allreduce_gradients', the argument 'comm' should be an MPI communicator "
            f"(mpi4py's MPI.COMM_WORLD: Allreduce and Get_size), but got "
            f"{type(comm).__name__}."
        )
    if not isinstance(average, bool):
        raise CollectorTypeError(
            f"For 'allreduce_gradients', the argument 'average' should be a bool, but got "
            f"{type(average).__name__}."
        )
    arrays = _arrays(gradients)
    if recorder is not None:
        entered = _clock.now()
        recorder.record([norm_and_peak(array) for array in arrays], entered)
    ranks = size()
    for array in arrays:
        total = np.empty_like(array)
        allreduce(array, total)
        if average:
            np.divide(total, ranks, out=array, casting="unsafe")
        else:
            array[...] = total
