"""The parameter fingerprint each rank records: at the start of training and at collected steps.

In data-parallel training every rank holds the same parameters after each step,
so their fingerprints agree; a rank whose fingerprint leaves the majority has
diverged (the job view names it, see :mod:`rankscribe.jobview` and
``docs/job-view.md``).

What is hashed (``docs/job-view.md``, "Fingerprints within a budget"):

- the parameters' raw bytes, in the network's parameter order, seen as one
  byte string; the names do not count, so ranks agree whatever their
  parameters are called;
- when training begins (step 0, before any update) the whole string, once;
- at a collected step at most ``budget`` bytes of it (``fingerprint_budget``
  of the collector, :data:`DEFAULT_FINGERPRINT_BUDGET` by default): slice
  ``(step // collect_freq) % slices`` of the ``slices = ceil(total / budget)``
  consecutive slices. The slice is a function of the step only, so every rank
  hashes the same slice at the same step, and the whole model is covered
  every ``slices`` collected steps.

Host bytes (NumPy arrays, PyTorch CPU tensors) go through CRC-32C on the
CPU's CRC instruction (the ``crc32c`` package the writer also uses), read in
place; a part on an accelerator is reduced on the device by the framework's
adapter (:class:`rankscribe.collector.adapters._torch.TorchDevicePart`) to a
64-bit value, and only those 8 bytes join the CRC (they reach the host without a wait on
the training thread: :class:`LateFingerprint`). The fingerprint is the CRC
cut to its low 24 bits: the summary scalar type is a float32, which holds every
integer below 2**24 exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import crc32c
import numpy as np
import numpy.typing as npt

from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.writer.deferred import DeferredValue

__all__ = [
    "DEFAULT_FINGERPRINT_BUDGET",
    "FINGERPRINT_BITS",
    "FingerprintPart",
    "HostPart",
    "LateFingerprint",
    "check_budget",
    "host_parts",
    "late_slice_fingerprint",
    "parameter_fingerprint",
    "slice_bounds",
    "slice_fingerprint",
]

#: Bits kept: exact in a float32 scalar.
FINGERPRINT_BITS = 24
_MASK = (1 << FINGERPRINT_BITS) - 1
#: Bytes hashed at most per collected step by default: 4 MiB (about 0.3 ms with CRC-32C
#: on one core; tools/bench/fingerprint.py).
DEFAULT_FINGERPRINT_BUDGET = 4 << 20


class FingerprintPart(Protocol):
    """One parameter as raw bytes: its size, and a digest of a byte range of it.

    ``digest`` returns the bytes themselves (a buffer, hashed by CRC-32C) or a
    deferred device value whose class has a ``resolve(values) -> list[bytes]``
    static method turning many of them into bytes at once (one transfer, waited
    for), and a ``start(values)`` one that starts that transfer without a wait
    (its result has ``ready()`` and ``resolve()``: :func:`late_slice_fingerprint`).
    """

    nbytes: int

    def digest(self, start: int, stop: int) -> Any: ...


class HostPart:
    """A host array's bytes, read in place (no copy for a contiguous array)."""

    __slots__ = ("_bytes", "nbytes")

    def __init__(self, array: npt.NDArray[Any]) -> None:
        contiguous = np.ascontiguousarray(array)
        if contiguous.dtype.hasobject:
            raise CollectorTypeError(f"a parameter of dtype {contiguous.dtype} has no raw bytes")
        # A uint8 view: any dtype (even one the buffer protocol has no format for)
        # and a 0-d array give their raw bytes.
        self._bytes = contiguous.reshape(-1).view(np.uint8)
        self.nbytes = int(self._bytes.size)

    def digest(self, start: int, stop: int) -> memoryview:
        return self._bytes[start:stop].data


def host_parts(
    parameters: Iterable[tuple[str, Any]],
    to_numpy: Callable[[Any], npt.NDArray[Any]] = np.asarray,
) -> list[FingerprintPart]:
    """Each parameter value, read as a host array by ``to_numpy``, as a :class:`HostPart`."""
    return [HostPart(to_numpy(value)) for _, value in parameters]


def check_budget(budget: object) -> int:
    """``fingerprint_budget``: an int of bytes >= 1024, or a clear error naming it."""
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise CollectorTypeError(
            f"For 'fingerprint_budget', the value should be an int number of bytes "
            f"(e.g. {DEFAULT_FINGERPRINT_BUDGET} for 4 MiB), but got {type(budget).__name__} "
            f"{budget!r:.40}."
        )
    if budget < 1024:
        raise CollectorValueError(
            f"For 'fingerprint_budget', the value should be at least 1024 bytes, but got {budget}."
        )
    return budget


def slice_bounds(total: int, budget: int, step: int, collect_freq: int) -> tuple[int, int]:
    """The byte range ``[start, stop)`` hashed at ``step``: a function of the step only."""
    if total <= budget:
        return 0, total
    slices = -(-total // budget)
    index = (step // max(collect_freq, 1)) % slices
    start = index * budget
    return start, min(start + budget, total)


def slice_fingerprint(parts: Sequence[FingerprintPart], start: int, stop: int) -> int:
    """CRC-32C of bytes ``[start, stop)`` of the parts laid end to end, ``& 0xFFFFFF``."""
    digests = _digests(parts, start, stop)
    deferred = [item for item in digests if not isinstance(item, (bytes, memoryview))]
    if deferred:
        resolved = iter(type(deferred[0]).resolve(deferred))
        digests = [
            item if isinstance(item, (bytes, memoryview)) else next(resolved) for item in digests
        ]
    return _crc(digests)


def _crc(digests: list[Any]) -> int:
    crc = 0
    for item in digests:
        crc = crc32c.crc32c(item, value=crc)
    return crc & _MASK


def _digests(parts: Sequence[FingerprintPart], start: int, stop: int) -> list[Any]:
    """Each part's digest of its share of bytes ``[start, stop)``, in order."""
    digests: list[Any] = []
    offset = 0
    for part in parts:
        size = part.nbytes
        low, high = max(start - offset, 0), min(stop - offset, size)
        if low < high:
            digests.append(part.digest(low, high))
        offset += size
        if offset >= stop:
            break
    return digests


class LateFingerprint(DeferredValue):
    """A fingerprint whose device sums are on their way to the host.

    ``ready()`` never waits; ``resolve()`` (the writer's thread, or the end of
    training) waits for the sums and returns the fingerprint as the float recorded.
    The host parts' bytes of the slice were copied when it was made (at most the
    budget), so a later update of the parameters does not change it.
    """

    def __init__(self, items: list[bytes | None], sums: Any) -> None:
        self._items, self._sums = items, sums
        self._lock = threading.Lock()
        self._value: float | None = None

    def ready(self) -> bool:
        return bool(self._sums.ready())

    def resolve(self) -> float:
        with self._lock:
            if self._value is None:
                arrived = iter(self._sums.resolve())
                crc = 0
                for item in self._items:
                    crc = crc32c.crc32c(item if item is not None else next(arrived), value=crc)
                self._value = float(crc & _MASK)
            return self._value


def late_slice_fingerprint(
    parts: Sequence[FingerprintPart], start: int, stop: int
) -> int | LateFingerprint:
    """:func:`slice_fingerprint`, without a wait for a device: parts on an accelerator
    start their sums' copy to the host (their class's ``start(values)``, whose result
    has ``ready()`` and ``resolve()``) and the fingerprint comes as a
    :class:`LateFingerprint`. Host parts alone give the int at once."""
    digests = _digests(parts, start, stop)
    deferred = [item for item in digests if not isinstance(item, (bytes, memoryview))]
    if not deferred:
        return _crc(digests)
    sums = type(deferred[0]).start(deferred)
    items = [bytes(item) if isinstance(item, (bytes, memoryview)) else None for item in digests]
    return LateFingerprint(items, sums)


def parameter_fingerprint(
    parameters: Iterable[tuple[str, Any]],
    to_numpy: Callable[[Any], npt.NDArray[Any]] = np.asarray,
) -> int:
    """The fingerprint of every byte of ``parameters`` (read on the host by ``to_numpy``)."""
    parts = host_parts(parameters, to_numpy)
    return slice_fingerprint(parts, 0, sum(part.nbytes for part in parts))
