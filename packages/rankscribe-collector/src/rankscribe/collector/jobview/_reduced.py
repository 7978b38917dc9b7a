"""The gradient norms of a loop of the user's own: ``SummaryCollector.allreduce_gradients``.

A loop that averages its gradients itself (NumPy arrays, ``comm.Allreduce`` under
MPI) has no DDP hook for the collector to probe; it hands the arrays to
:func:`allreduce_gradients` instead, which records each array's local L2 norm
(accumulated in float64) and the seconds since the step's start, then sums them
across the ranks in place (and divides by the ranks, ``average=True``). Each
array is a bucket: ``rankscribe/gradient/norm/<index>`` in the order given, the
tags the DDP probe records (``docs/gradients.md``, "Your own loop").
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

__all__ = ["ReducedGradients", "allreduce_gradients", "local_norm"]

#: Elements summed in float32 before the float64 sum of the rows (a float64 copy costs 5x).
_ROW = 4096


def local_norm(values: npt.NDArray[Any]) -> float:
    """The L2 norm of an array, accumulated in float64 (float32 rows of :data:`_ROW`)."""
    flat = values.reshape(-1)
    if flat.dtype == np.float64 or flat.size < _ROW:
        return math.sqrt(float(np.einsum("i,i->", flat, flat, dtype=np.float64)))
    whole = flat.size // _ROW * _ROW
    rows = flat[:whole].reshape(-1, _ROW)
    squares = np.einsum("ij,ij->i", rows, rows, dtype=np.float32).sum(dtype=np.float64)
    tail = flat[whole:]
    norm = math.sqrt(float(squares) + float(np.einsum("i,i->", tail, tail, dtype=np.float64)))
    if math.isinf(norm):  # a row's float32 sum overflowed, or an element is infinite
        norm = math.sqrt(float(np.einsum("i,i->", flat, flat, dtype=np.float64)))
    return norm


class ReducedGradients:
    """The norms :func:`allreduce_gradients` recorded in this step, until its end."""

    #: The ready time is not taken as the rank's arrival: a loop's own reduce names its
    #: arrival with ``section("sync")`` (docs/gradients.md, "A slow backward").
    arrival = False

    def __init__(self) -> None:
        self._norms: list[tuple[int, float]] = []
        self._ready_at: float | None = None
        self._spent = 0.0

    def record(self, norms: list[tuple[int, float]], entered: float) -> None:
        """A call's norms (a second call in a step adds its arrays after the first's),
        computed from ``entered`` (a reading of the collector's clock) until now."""
        first = len(self._norms)
        self._norms.extend((first + index, norm) for index, norm in norms)
        self._ready_at = ready = _clock.now()
        self._spent += ready - entered

    def take_spent(self) -> float:
        """Seconds spent on the norms since the last call (the collector's cost budget's)."""
        spent, self._spent = self._spent, 0.0
        return spent

    def take(
        self, step: int, started: float | None = None
    ) -> list[tuple[int, list[tuple[int, float]], float | None]]:
        """This step's norms, and the seconds from ``started`` to its last call."""
        norms, ready_at = self._norms, self._ready_at
        self._norms, self._ready_at = [], None
        ready = _clock.since(ready_at, started)
        return [(step, norms, ready)] if norms or ready is not None else []

    def finish(self) -> list[tuple[int, list[tuple[int, float]], float | None]]:
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
        recorder.record([(index, local_norm(array)) for index, array in enumerate(arrays)], entered)
    ranks = size()
    for array in arrays:
        total = np.empty_like(array)
        allreduce(array, total)
        if average:
            np.divide(total, ranks, out=array, casting="unsafe")
        else:
            array[...] = total
