"""The forward time of a torch module: seconds inside its ``forward``, every step.

The timer sits on the module's own call path. Two ways, one record:

- **The module's** ``forward`` **attribute** (the default). ``nn.Module.__call__``
  calls ``self.forward``; the timer sets the instance's ``forward`` to a
  :class:`TimedForward` that reads the clock around the forward it found. A module
  with a forward hook takes torch's longer call path (the hooks' dicts walked, a
  closure built, each hook called: ``Module._call_impl``) at every call: on a
  ~1 ms CPU step, read after the step had turned the caches over, the two hooks cost
  about 9 us a step (0.6-0.8 %), the attribute none measurable
  (``docs/collector-cost.md``, "Where a quiet step's cost goes"). What the
  attribute keeps as it was: a copy of the module (``copy.deepcopy``, as an
  EMA or ``AveragedModel`` makes) gets the forward it copied, bound to the copy,
  untimed; pickling (``torch.save`` of the whole module) stores the forward it
  wraps, so the file needs no RankScribe to load; ``inspect.signature`` reads the
  wrapped forward's (``__wrapped__``: the HF Trainer picks its columns by it); any
  other attribute is the wrapped forward's, except ``__func__``, so a library that
  rewraps a bound forward by its function (accelerate's mixed precision) wraps this
  object and the timing goes on. When the run ends the module's ``forward`` is put
  back as it was; a forward someone set over ours after it stays, and ours in it
  only passes the calls on.
- **Forward hooks**, where an attribute of the module would not be its own:
  ``nn.DataParallel`` copies the module's attributes into each device's replica
  (a replica calling the original's forward would compute with the original's
  parameters), so a module given inside a ``DataParallel``, or in a process that
  sees more than one GPU without a ``DistributedDataParallel`` holding it (a
  ``DataParallel`` may replicate it later), keeps hooks; so does a module given
  inside ``torch.compile``'s wrapper (the compiler then sees what it saw before), and
  a ``ScriptModule`` (whose ``forward`` is compiled code: torch refuses the hooks, and
  the forward time is then not recorded, with one warning).

On the CPU, ``perf_counter`` around each call; each call's end and seconds are kept until
:meth:`ForwardTimer.take` adds them up for the step, or :meth:`ForwardTimer.take_logged`
files them by their end among steps a loop logged without calling the collector. On an
accelerator (or with
``event_factory`` given), a pair of timing events recorded on the device's stream
around each call; :meth:`ForwardTimer.take` files the step's pairs and returns the
steps whose events the device has passed (``query()``, which never waits), so a
step's forward time arrives a step or more later, and the training thread never
synchronises. Several forward calls in a step add up. The device passes a stream's
events in the order they were recorded: a step whose last event has passed has passed
its others, and when the newest step's has, every step's has (one query a step where
the device keeps up). An event whose time has been read is recorded again at a later
forward rather than made anew: each event made and freed is a call into the driver (on an
H200 under gVisor, the timer making new events at every forward took 74-81 us of the
training thread's CPU a step, on host-bound steps of 1-2 ms).
"""

from __future__ import annotations

import bisect
import logging
import operator
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch

from rankscribe.collector import _clock

logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = ["FORWARD_EVENTS_KEPT", "ForwardTimer", "TimedForward", "device_events", "keeps_hooks"]

#: Steps whose forward events may wait to be read; older ones are dropped (with a warning).
FORWARD_EVENTS_KEPT = 64


class TimedForward:
    """A module's ``forward`` attribute while its :class:`ForwardTimer` is on: the forward
    it found, called between two clock reads (or two device events)."""

    __slots__ = ("__wrapped__", "replaced", "timer")

    def __init__(self, forward: Callable[..., Any], timer: ForwardTimer, *, replaced: bool) -> None:
        self.__wrapped__ = forward
        self.timer: ForwardTimer | None = timer
        #: Whether the module had a ``forward`` of its own (in its ``__dict__``) when this
        #: one was set: what putting it back restores.
        self.replaced = replaced

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        timer = self.timer
        if timer is None:  # the run ended and someone's forward still holds this one
            return self.__wrapped__(*args, **kwargs)
        if timer._factory is None:
            started = _clock.now()
            result = self.__wrapped__(*args, **kwargs)
            ended = _clock.now()
            timer._ends.append(ended)
            timer._spans.append(ended - started)
            return result
        timer._device_begin()
        result = self.__wrapped__(*args, **kwargs)
        timer._device_end()
        return result

    def __getattr__(self, name: str) -> Any:
        # (``__wrapped__`` unset: not a forward's attribute; ``__func__``: the docstring's.)
        if name in ("__wrapped__", "__func__"):
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled, and deep-copied, as the forward it wraps (``operator.getitem`` of a
        # one-item tuple): what loads it needs no RankScribe, and a copy of the module
        # gets its forward bound to the copy (``copy.deepcopy`` copies the bound method).
        return (operator.getitem, ((self.__wrapped__,), 0))


class ForwardTimer:
    """Seconds a module spends in ``forward`` (the module's docstring: its own ``forward``
    attribute, or with ``hooks`` a forward pre-hook and a forward hook)."""

    def __init__(
        self,
        module: Any,
        event_factory: Callable[[], Any] | None = None,
        *,
        hooks: bool = False,
    ) -> None:
        self._factory = event_factory if event_factory is not None else device_events(module)
        # On the CPU, each forward call's end and seconds, in order, until taken.
        self._ends: list[float] = []
        self._spans: list[float] = []
        self._started = 0.0
        self._start_event: Any = None
        self._pairs: list[tuple[Any, Any]] = []
        self._waiting: deque[tuple[int, list[tuple[Any, Any]]]] = deque()
        self._free: list[Any] = []  # events read already, to be recorded again
        self._dropped = False
        self._handles: tuple[Any, ...] = ()
        self._wrapper: TimedForward | None = None
        self._module: weakref.ref[Any] | None = None
        if hooks:
            self._handles = (
                module.register_forward_pre_hook(self._before),
                module.register_forward_hook(self._after),
            )
            return
        self._wrapper = TimedForward(module.forward, self, replaced="forward" in vars(module))
        self._module = weakref.ref(module)
        # ``object.__setattr__``: nn.Module's own sorts parameters and submodules; a
        # callable goes to the instance's dict either way.
        object.__setattr__(module, "forward", self._wrapper)

    @property
    def on_device(self) -> bool:
        return self._factory is not None

    def _before(self, module: Any, inputs: Any) -> None:
        if self._factory is None:
            self._started = _clock.now()
        else:
            self._device_begin()

    def _after(self, module: Any, inputs: Any, outputs: Any) -> None:
        if self._factory is None:
            ended = _clock.now()
            self._ends.append(ended)
            self._spans.append(ended - self._started)
        else:
            self._device_end()

    def _device_begin(self) -> None:
        assert self._factory is not None
        event = self._free.pop() if self._free else self._factory()
        event.record()
        self._start_event = event

    def _device_end(self) -> None:
        assert self._factory is not None
        if self._start_event is None:
            return
        event = self._free.pop() if self._free else self._factory()
        event.record()
        self._pairs.append((self._start_event, event))
        self._start_event = None

    def mark(self) -> Any:
        """A timing event recorded now on the device's stream (None on the CPU): what the
        collector's cost budget times its windows with on a device."""
        if self._factory is None:
            return None
        event = self._factory()
        event.record()
        return event

    def reset(self) -> None:
        """Forget forward calls since the last :meth:`take` (an epoch's end, an evaluation)."""
        self._ends, self._spans, self._pairs = [], [], []

    def take(self, step: int) -> list[tuple[int, float]]:
        """``(step, seconds)`` of the forward times known now; this step's calls are filed."""
        if self._factory is None:
            if not self._spans:
                return []
            seconds = sum(self._spans)
            self._ends, self._spans = [], []
            return [(step, seconds)]
        if self._pairs:
            self._waiting.append((step, self._pairs))
            self._pairs = []
            if len(self._waiting) > FORWARD_EVENTS_KEPT:
                self._waiting.popleft()
                if not self._dropped:
                    self._dropped = True
                    logger.warning(
                        "The device has not passed the forward events of %d steps; "
                        "the oldest forward times are not recorded.",
                        FORWARD_EVENTS_KEPT,
                    )
        waiting = self._waiting
        if not waiting:
            return []
        # (Stream order: the module's docstring.)
        if waiting[-1][1][-1][1].query():
            passed = len(waiting)
        else:
            passed = 0
            while passed < len(waiting) - 1 and waiting[passed][1][-1][1].query():
                passed += 1
        return [self._read(*waiting.popleft()) for _ in range(passed)]

    def _read(self, step: int, pairs: list[tuple[Any, Any]]) -> tuple[int, float]:
        """A step's forward time from its passed events, which are then free again."""
        seconds = sum(start.elapsed_time(end) for start, end in pairs) / 1000.0
        free = self._free
        for start, end in pairs:
            free.append(start)
            free.append(end)
        return step, seconds

    def take_logged(
        self, first: int, ends: Sequence[float]
    ) -> tuple[Sequence[int], Sequence[float]]:
        """The steps among ``first``, ``first + 1``, ... that ended at ``ends``
        (``perf_counter``, in order) without a :meth:`take` (steps a loop logged:
        ``rankscribe.collector._callback.QuietSteps``) that had forward calls, and their
        forward seconds, in step order: each call goes to the step it ended in; calls after
        the last of ``ends`` stay for the next :meth:`take`. On the CPU only: a device's
        events are filed by :meth:`take`, a step at a time."""
        if self._factory is not None:
            raise RuntimeError("the forward times of logged steps are read on the CPU only")
        calls, spans = self._ends, self._spans
        count = len(ends)
        if not count or not calls:
            return (), ()
        # Most loops: one forward call a step. Each call then ended in its own step.
        if (
            len(calls) >= count
            and (len(calls) == count or calls[count] > ends[-1])
            and all(map(operator.le, calls[:count], ends))
            and all(map(operator.gt, calls[1:count], ends))
        ):
            seconds = spans[:count]
            del calls[:count], spans[:count]
            return range(first, first + count), seconds
        found: dict[int, float] = {}
        last = ends[-1]
        taken = 0
        for ended, spent in zip(calls, spans, strict=True):
            if ended > last:
                break
            step = first + bisect.bisect_left(ends, ended)
            found[step] = found.get(step, 0.0) + spent
            taken += 1
        del calls[:taken], spans[:taken]
        return list(found), list(found.values())

    def finish(self) -> list[tuple[int, float]]:
        """At the end of training: the forward times still waiting (one wait, at most)."""
        if self._factory is None or not self._waiting:
            return []
        self._waiting[-1][1][-1][1].synchronize()
        done = [self._read(*self._waiting.popleft()) for _ in range(len(self._waiting))]
        self._free = []  # the run is over: the events go with it
        return done

    def remove(self) -> None:
        """The module as it was: its hooks removed, or its ``forward`` put back (a forward
        set over ours since stays; ours inside it then only passes calls on). A timer's
        forward that another's, set later, wrapped (two collectors on one network) stays
        in that one until it is put back too: the two go together, whichever ends last."""
        for handle in self._handles:
            handle.remove()
        self._handles = ()
        wrapper, self._wrapper = self._wrapper, None
        if wrapper is None:
            return
        wrapper.timer = None
        module = self._module() if self._module is not None else None
        if module is None or vars(module).get("forward") is not wrapper:
            return
        # Below ours, the forwards of timers put back already only pass calls on: the
        # module gets what it had before the first of them.
        restored, replaced = wrapper.__wrapped__, wrapper.replaced
        while isinstance(restored, TimedForward) and restored.timer is None:
            replaced = restored.replaced
            restored = restored.__wrapped__
        if replaced:
            object.__setattr__(module, "forward", restored)
        else:
            del vars(module)["forward"]


def keeps_hooks(given: Any) -> bool:
    """Whether the module ``given`` holds (or is) is timed with hooks (the module's docstring)."""
    held_by_ddp = False
    for _ in range(4):
        if isinstance(given, torch.nn.DataParallel):
            return True
        if isinstance(given, torch.nn.parallel.DistributedDataParallel):
            held_by_ddp = True
            given = given.module
        elif isinstance(getattr(given, "_orig_mod", None), torch.nn.Module):
            return True  # torch.compile's OptimizedModule
        else:
            break
    if isinstance(given, torch.jit.ScriptModule):
        return True
    return not held_by_ddp and torch.cuda.device_count() > 1


def device_events(module: Any) -> Callable[[], Any] | None:
    """A timing-event factory for the module's device, or None on the CPU."""
    parameter = next(module.parameters(), None)
    if parameter is None or parameter.device.type == "cpu":
        return None
    device = parameter.device

    def event() -> Any:
        return torch.Event(device=device, enable_timing=True)

    return event
