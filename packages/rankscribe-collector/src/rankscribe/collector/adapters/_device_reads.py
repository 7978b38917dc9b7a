"""Values read from an accelerator without a wait on the training thread.

At a collected step the loss, the weight histograms and the parameter fingerprint of
tensors on an accelerator are not brought to the host there and then (``.item()``,
``.cpu()``: the training thread would wait for the device's whole queue, and the
device would idle while the host does the step's work). Instead, on the training thread:

- the loss and the fingerprint's 8-byte sums start a non-blocking copy into pinned host
  memory, and an event is recorded on the device's current stream after it
  (:class:`HostCopy`);
- the histograms' tensors are copied on the device (a device-to-device copy, queued like
  any kernel) and an event is recorded after it (:class:`DeviceHistograms`): the
  counting needs the values' range on the host first, so it runs later, off the
  training thread, on that copy (``_torch_histogram.py``, on a stream of its own).

The summary operators' values on an accelerator (``tensor_summary(name, tensor)`` ...)
are read the same way: once this module is loaded (the collector's torch adapter), the
operators hand such a value to :func:`operator_value`
(``rankscribe.writer.deferred.set_device_reader``), which starts its copy into pinned host
memory with an event after it (:class:`DeviceArray`), and nothing waits for it there.

Each becomes a :class:`~rankscribe.writer.deferred.DeferredValue` of its step: the
writer's threads resolve it when they encode the step (waiting for the event there),
so it is written with the step it was taken at. The collector's own series (the job
view) takes the loss and fingerprint when their events have passed (``query()``, which
never waits) at a later collected step, and waits for the rest at the end of training.
docs/collector-schedule.md, "Values read from a device".

How values leave the device is :class:`TorchDevices` (``backend``): which tensors are on
an accelerator, the copy and event of a read, the stream of the work done later. Tests
replace it (:func:`rankscribe.collector.testing.device_backend`) with a fake device that
counts every wait made on the training thread. CPU tensors never come here.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import numpy as np
import torch

from rankscribe.collector.adapters._torch_histogram import (
    device_event,
    device_histograms,
    start_host_copy,
)
from rankscribe.writer.deferred import DeferredArray, DeferredValue, set_device_reader

logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = [
    "DeviceArray",
    "DeviceBackend",
    "DeviceHistograms",
    "DeviceLoss",
    "HostCopy",
    "LateSums",
    "TorchDevices",
    "backend",
    "operator_value",
]


class DeviceEvent(Protocol):
    """What the reads use of a device event (``torch.Event``)."""

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...


class DeviceBackend(Protocol):
    """How values leave a device: :class:`TorchDevices`, or a test's fake device."""

    def on_device(self, tensor: Any) -> bool:
        """Whether ``tensor`` lives on an accelerator (its reads are deferred)."""
        ...

    def start_copy(self, tensor: Any) -> tuple[Any, DeviceEvent | None]:
        """A host tensor the value is being copied into, and the event after the copy."""
        ...

    def event(self, device: Any) -> DeviceEvent | None:
        """An event recorded now on ``device``'s current stream (None: nothing to wait for)."""
        ...

    def side_stream(self, device: Any) -> AbstractContextManager[Any]:
        """Where work done off the training thread runs on ``device``."""
        ...


class TorchDevices:
    """The real devices: pinned host buffers, device events (blocking ones on CUDA), a side
    stream per CUDA device."""

    def __init__(self) -> None:
        self._streams: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def on_device(self, tensor: Any) -> bool:
        return not tensor.is_cpu  # (no torch.device made: read at every collected step)

    def start_copy(self, tensor: Any) -> tuple[Any, DeviceEvent | None]:
        if tensor.device.type == "cpu":
            return tensor.clone(), None
        host, event = start_host_copy(tensor)
        # Annotated: where torch is not installed (the type env) its names are Any.
        recorded: DeviceEvent | None = event
        return host, recorded

    def event(self, device: Any) -> DeviceEvent | None:
        recorded: DeviceEvent | None = device_event(device)
        return recorded

    def side_stream(self, device: Any) -> AbstractContextManager[Any]:
        if device.type != "cuda":
            return nullcontext()
        with self._lock:
            stream = self._streams.get(device)
            if stream is None:
                stream = self._streams[device] = torch.cuda.Stream(device)  # type: ignore[no-untyped-call, unused-ignore]
        context: AbstractContextManager[Any] = torch.cuda.stream(stream)
        return context


#: How values leave a device (tests put a fake device here: testing.device_backend).
backend: DeviceBackend = TorchDevices()


class HostCopy:
    """A tensor's copy to the host, under way; :meth:`ready` never waits."""

    __slots__ = ("_event", "_host")

    def __init__(self, tensor: Any) -> None:
        self._host, self._event = backend.start_copy(tensor)

    def ready(self) -> bool:
        event = self._event
        if event is not None and event.query():
            self._event = None  # passed: reading the host tensor now waits for nothing
        return self._event is None

    def wait(self) -> Any:
        """The host tensor, once the copy is done (waits: not on the training thread).

        The event is forgotten only once it has passed: while another thread waits here
        (the writer's, for a device some steps behind), :meth:`ready` still says False,
        so the training thread does not go on to read the value and wait behind it.
        """
        event = self._event
        if event is not None:
            event.synchronize()
            self._event = None
        return self._host


class _Once(DeferredValue):
    """A deferred value computed once, whichever thread asks first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._value: Any = None

    def resolve(self) -> Any:
        with self._lock:
            if not self._done:
                self._value = self._compute()
                self._done = True
            return self._value

    def _compute(self) -> Any:
        raise NotImplementedError


class DeviceLoss(_Once):
    """A device loss: ``np.mean`` of the tensor's host copy, as the host path reads it."""

    def __init__(self, tensor: Any) -> None:
        super().__init__()
        self._copy = HostCopy(tensor)

    def ready(self) -> bool:
        return self._copy.ready()

    def _compute(self) -> float:
        return float(np.mean(self._copy.wait().numpy()))


class DeviceArray(_Once, DeferredArray):
    """A summary operator's tensor on an accelerator: its copy into pinned host memory
    under way, its shape and NumPy dtype known now; resolved to the host array."""

    def __init__(self, tensor: Any) -> None:
        super().__init__()
        self.shape = tuple(tensor.shape)
        self.dtype = _numpy_dtype(tensor.dtype)
        self._copy = HostCopy(tensor)

    def _compute(self) -> Any:
        return self._copy.wait().numpy()


_NUMPY_DTYPES: dict[Any, np.dtype[Any]] = {}


def _numpy_dtype(dtype: Any) -> np.dtype[Any]:
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _NUMPY_DTYPES[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
    return found


def operator_value(value: object) -> DeviceArray | None:
    """A summary operator's ``value`` on an accelerator, its copy to the host started
    (:class:`DeviceArray`); None for anything the host reads at once (not a tensor, a
    CPU tensor, an empty, sparse, quantized or complex one)."""
    if not isinstance(value, torch.Tensor) or not backend.on_device(value):
        return None
    if value.numel() == 0 or value.dtype.is_complex:
        return None
    if value.layout != torch.strided or value.is_quantized:
        return None
    tensor = value.detach()
    if tensor.dtype.is_floating_point and tensor.dtype not in (
        torch.float16,
        torch.float32,
        torch.float64,
    ):
        tensor = tensor.to(torch.float32)  # on the device, exact (bfloat16, float8)
    return DeviceArray(tensor)


set_device_reader(operator_value)


def late_loss(tensor: Any, substitute: Callable[[Any], Any]) -> DeviceLoss | None:
    """The deferred loss of a device tensor, or None when the host path must read it
    (a CPU tensor, an empty one, a sparse or quantized one, a complex one).

    ``substitute(dtype)``: the dtype NumPy reads instead (bfloat16 as float32).
    """
    if not backend.on_device(tensor) or tensor.numel() == 0 or tensor.dtype.is_complex:
        return None
    if tensor.layout != torch.strided or tensor.is_quantized:
        return None
    value = tensor.detach()
    wanted = substitute(value.dtype)
    if wanted is not None:
        value = value.to(wanted)  # on the device, exact (as the host path converts)
    return DeviceLoss(value)


class LateSums(_Once):
    """The 8-byte sums of a fingerprint's device parts, on their way to the host."""

    def __init__(self, values: list[Any]) -> None:
        super().__init__()
        self._copies = [HostCopy(torch.stack(group)) for group in _by_device(values)]
        self._order = [index for group in _indices_by_device(values) for index in group]
        self._count = len(values)

    def ready(self) -> bool:
        return all(copy.ready() for copy in self._copies)

    def _compute(self) -> list[bytes]:
        sums: list[int] = [0] * self._count
        numbers = [int(number) for copy in self._copies for number in copy.wait().tolist()]
        for index, number in zip(self._order, numbers, strict=True):
            sums[index] = number
        return [struct.pack("<q", number) for number in sums]


def _indices_by_device(values: list[Any]) -> list[list[int]]:
    groups: dict[Any, list[int]] = {}
    for index, value in enumerate(values):
        groups.setdefault(value.device, []).append(index)
    return list(groups.values())


def _by_device(values: list[Any]) -> list[list[Any]]:
    return [[values[index] for index in group] for group in _indices_by_device(values)]


class DeviceHistograms:
    """The histograms of one collected step's device tensors, counted off the training thread.

    Made on the training thread: a device copy of each tensor (flat; bfloat16 and the
    float8 formats as float32) and an event after them. :meth:`result` (the writer's
    thread) waits for the event and counts them all on the device, on a side stream
    (``device_histograms``: two waits, there), or reads them on the host when the
    device cannot count (``on_failure`` says why, and the run's later steps go to the
    host at once: ``counting()``).
    """

    def __init__(
        self,
        tensors: list[Any],
        counting: Callable[[], bool],
        on_failure: Callable[[BaseException], None],
        to_host: Callable[[Any], Any],
    ) -> None:
        self._flats: list[Any] | None = [_device_copy(tensor) for tensor in tensors]
        device = self._flats[0].device if self._flats else None
        self._device = device
        self._event = backend.event(device) if device is not None else None
        self._counting, self._on_failure, self._to_host = counting, on_failure, to_host
        self._lock = threading.Lock()
        self._results: list[Any] | None = None

    def result(self, index: int) -> Any:
        with self._lock:
            if self._results is None:
                self._results = self._count()
            return self._results[index]

    def _count(self) -> list[Any]:
        flats, self._flats = self._flats, None  # the device copies are freed after this
        assert flats is not None
        event, self._event = self._event, None
        if event is not None:
            event.synchronize()
        if self._counting():
            try:
                with backend.side_stream(self._device):
                    counted: list[Any] = device_histograms(flats)
                return counted
            except (RuntimeError, TypeError) as error:
                self._on_failure(error)
        return [self._to_host(flat) for flat in flats]

    def values(self) -> list[DeviceHistogram]:
        """One deferred histogram per tensor, for the record."""
        return [DeviceHistogram(self, index) for index in range(len(self._flats or ()))]


class DeviceHistogram(DeferredValue):
    """One tensor's histogram of a :class:`DeviceHistograms` (counted with the others)."""

    def __init__(self, batch: DeviceHistograms, index: int) -> None:
        self._batch, self._index = batch, index

    def resolve(self) -> Any:
        return self._batch.result(self._index)


def _device_copy(tensor: Any) -> Any:
    """``tensor`` flat, in a dtype the counting takes, copied on its device (queued)."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype in (torch.float16, torch.float32, torch.float64):
        return flat.clone()
    return flat.to(torch.float32)  # a new tensor already (exact for bfloat16, float8)
