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

A wait for an event takes as long as a real device would take to get there: on the
training thread it is counted and returns at once (the device is made to catch up), but
another thread (the writer's) waits until the training thread has ticked the device
past the event, or until the test says training is over (``counting`` turned off). A
wait on another thread that is still waiting after ``max_wait`` seconds of training
ends anyway and is counted in :attr:`FakeDevice.stalls`: the training thread stopped
ticking while a thread waited for the device, which is what a training thread blocked
behind that wait (a lock the waiting thread holds) looks like.

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
        self._device.reach(self._copies, self._tick)

    def record(self) -> None:  # recorded when made
        return None


class FakeDevice:
    """The fake accelerator: its copies, its events, and the waits counted on one thread."""

    def __init__(self, lag: int = 2, max_wait: float = 5.0) -> None:
        self.lag = lag
        self.max_wait = max_wait
        self.training_thread = threading.get_ident()
        self.waits: list[str] = []  # what the training thread waited with, in order
        #: Waits of other threads that outlived ``max_wait`` seconds of training (module
        #: docstring): the training thread stopped ticking while they waited.
        self.stalls = 0
        self.copies_started = 0
        self.copies_done = 0
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (host, value)
        self._ticks = 0
        self._lock = threading.RLock()
        self._moved = threading.Condition(self._lock)
        self._counting = True
        self._finishing = False  # training is over: the device finishes its queue
        self._caught_up = -1  # the latest tick a wait made the device reach

    @property
    def counting(self) -> bool:
        """Whether waits are counted now (a test turns it off where waiting is fine: the
        end of training, which reads the final loss for the lineage; the device then
        finishes its queue, and other threads' waits end)."""
        return self._counting

    @counting.setter
    def counting(self, value: bool) -> None:
        with self._moved:
            self._counting = value
            self._finishing = not value
            self._moved.notify_all()

    # -- the test's side -----------------------------------------------------------

    def tensor(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` on the fake device."""
        return value.as_subclass(FakeDeviceTensor)

    def tick(self) -> None:
        """The device advances a step: events ``lag`` ticks old pass (their copies land)."""
        with self._moved:
            self._ticks += 1
            self._moved.notify_all()

    @contextmanager
    def uncounted(self) -> Iterator[None]:
        """Reads the test makes to know the exact values (not the code under test's)."""
        with self._lock:  # (not the setter: the training goes on, the device does not catch up)
            counting, self._counting = self._counting, False
        try:
            yield
        finally:
            with self._lock:
                self._counting = counting

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
            if self._ticks < tick + self.lag and self._caught_up < tick:
                return False
            self.complete(copies)
            return True

    def reach(self, copies: int, tick: int) -> None:
        """A wait for the event after ``copies`` (recorded at ``tick``): at once on the
        training thread; on another, once the device got there (module docstring)."""
        with self._moved:
            if threading.get_ident() != self.training_thread:
                reached = self._moved.wait_for(
                    lambda: (
                        self._finishing or self._ticks >= tick + self.lag or self._caught_up >= tick
                    ),
                    timeout=self.max_wait,
                )
                if not reached:
                    self.stalls += 1
            # The device got to the event: to every event recorded up to its tick.
            self._caught_up = max(self._caught_up, tick)
            self.complete(copies)

    def complete(self, copies: int) -> None:
        """The copies up to ``copies`` land in their host tensors."""
        with self._moved:
            while self.copies_done < copies:
                host, value = self._pending.pop(0)
                host.copy_(value)
                self.copies_done += 1
            self._moved.notify_all()
