"""A fake accelerator on the CPU that counts every wait for it made on the training thread.

Its tensors are :class:`FakeDeviceTensor` (a ``torch.Tensor`` subclass: torch computes on
them as on CPU tensors, at once, as a device would in stream order). What would make the
host wait for a real device is counted when the training thread does it: reading a value
(``item``, ``tolist``, ``numpy``, ``cpu``, ``float(t)``, ``bool(t)``, ``np.asarray``,
printing), a blocking copy to the host (``to("cpu")``, ``copy_`` into a host tensor
without ``non_blocking``), the operations whose result size the host must read
(``nonzero``, ``unique``, ``bincount``, ``masked_select``), and ``synchronize()`` of
its events. Other threads may wait: they are not counted.

Copies to the host are like a real device's: :meth:`FakeDevice.start_copy` returns a host
tensor full of NaN (or of ``SENTINEL``) that receives the value only when the event after
it passes. An event passes ``lag`` calls of :meth:`FakeDevice.tick` after it was
recorded (a test ticks once a step: the device runs ``lag`` steps behind), or when
someone waits for it. A read that does not wait for its event reads the NaN.

Installed with :func:`rankscribe.collector.testing.device_backend`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, ClassVar

import torch

SENTINEL = -123456789
_READS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "cpu",
        "__float__",
        "__int__",
        "__bool__",
        "__index__",
        "__complex__",
        "__array__",
        "__repr__",
        "__format__",
        "nonzero",
        "unique",
        "bincount",
        "masked_select",
    }
)


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", ""))


def _to_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``to(...)`` call moves the tensor to the host (and waits for it)."""
    targets = [*args[1:], kwargs.get("device")]
    for target in targets:
        if isinstance(target, str) and target.startswith("cpu"):
            return not kwargs.get("non_blocking", False)
        if isinstance(target, torch.device) and target.type == "cpu":
            return not kwargs.get("non_blocking", False)
    return False


class FakeDeviceTensor(torch.Tensor):
    """A tensor of the fake device: computed on the CPU, its reads counted."""

    device_of: ClassVar[FakeDevice | None] = None

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        device = cls.device_of
        if device is not None:
            name = _name(func)
            if name in _READS or (name == "to" and _to_host(args, kwargs)):
                device.note_wait(name)
            elif name == "copy_" and not isinstance(args[0], FakeDeviceTensor):
                non_blocking = kwargs.get("non_blocking", len(args) > 2 and args[2] is True)
                if not non_blocking:
                    device.note_wait("copy_")
        return super().__torch_function__(func, types, args, kwargs)


class FakeEvent:
    """An event of the fake device: passes ``lag`` ticks after it was recorded."""

    def __init__(self, device: FakeDevice, copies: int, tick: int) -> None:
        self._device, self._copies, self._tick = device, copies, tick

    def query(self) -> bool:
        return self._device.passed(self._copies, self._tick)

    def synchronize(self) -> None:
        self._device.note_wait("event.synchronize")
        self._device.complete(self._copies)

    def record(self) -> None:  # recorded when made
        return None


class FakeDevice:
    """The fake accelerator: its copies, its events, and the waits counted on one thread."""

    def __init__(self, lag: int = 2) -> None:
        self.lag = lag
        self.training_thread = threading.get_ident()
        self.waits: list[str] = []  # what the training thread waited with, in order
        self.copies_started = 0
        self.copies_done = 0
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (host, value)
        self._ticks = 0
        self._lock = threading.RLock()
        #: Whether waits are counted now (a test turns it off where waiting is fine:
        #: the end of training, which reads the final loss for the lineage).
        self.counting = True

    # -- the test's side -----------------------------------------------------------

    def tensor(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` on the fake device."""
        return value.as_subclass(FakeDeviceTensor)

    def tick(self) -> None:
        """The device advances a step: events ``lag`` ticks old pass (their copies land)."""
        with self._lock:
            self._ticks += 1

    @contextmanager
    def uncounted(self) -> Iterator[None]:
        """Reads the test makes to know the exact values (not the code under test's)."""
        with self._lock:
            counting, self.counting = self.counting, False
        try:
            yield
        finally:
            with self._lock:
                self.counting = counting

    @contextmanager
    def installed(self) -> Iterator[FakeDevice]:
        FakeDeviceTensor.device_of = self
        try:
            yield self
        finally:
            FakeDeviceTensor.device_of = None

    # -- the backend the collector uses ----------------------------------------------

    def note_wait(self, what: str) -> None:
        if self.counting and threading.get_ident() == self.training_thread:
            self.waits.append(what)

    def on_device(self, tensor: Any) -> bool:
        return isinstance(tensor, FakeDeviceTensor)

    def start_copy(self, tensor: Any) -> tuple[torch.Tensor, FakeEvent]:
        with torch._C.DisableTorchFunctionSubclass():
            value = torch.Tensor.clone(tensor).as_subclass(torch.Tensor)
            filler: float = float("nan") if value.dtype.is_floating_point else SENTINEL
            host = torch.full(value.shape, filler, dtype=value.dtype)
        with self._lock:
            self._pending.append((host, value))
            self.copies_started += 1
            return host, FakeEvent(self, self.copies_started, self._ticks)

    def event(self, device: Any) -> FakeEvent:
        with self._lock:
            return FakeEvent(self, self.copies_started, self._ticks)

    def side_stream(self, device: Any) -> Any:
        return nullcontext()

    # -- the events' side --------------------------------------------------------------

    def passed(self, copies: int, tick: int) -> bool:
        with self._lock:
            if self._ticks < tick + self.lag:
                return False
            self.complete(copies)
            return True

    def complete(self, copies: int) -> None:
        """The copies up to ``copies`` land in their host tensors."""
        with self._lock:
            while self.copies_done < copies:
                host, value = self._pending.pop(0)
                host.copy_(value)
                self.copies_done += 1
