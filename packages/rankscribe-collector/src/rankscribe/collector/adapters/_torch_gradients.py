"""The gradient probe of a DDP network: each rank's gradient, bucket by bucket, before the reduce.

Under DDP the all-reduce averages every rank's gradient inside ``backward``, so
afterwards every replica holds the same gradient and the same backward time: a
rank whose gradient was wrong, or whose backward was slow, can no longer be
told apart. Before the reduce it can. DDP hands each bucket of gradients to a
communication hook when the bucket is ready; the probe is such a hook
(``docs/job-view.md``, "Gradients"). For each bucket it records

- the local gradient's L2 norm, accumulated in float64 (the bucket's rows of
  :data:`_ROW` elements are summed in float32 and the rows in float64: a float64
  copy of a 25 MB bucket would cost more than the reduce; on the CPU a norm that
  overflows float32 there is taken again in float64, and where the probe reduces,
  the same pass over the bucket scales it, :func:`_host_norm`; on an accelerator,
  :meth:`GradientProbe.device_norm`),
- its peak: the largest norm of a row of :data:`_ROW` consecutive elements (the
  rows the norm sums anyway), which the gradient rule judges against the
  rest of the bucket: a flipped exponent grows one element, which takes its row's
  norm, and a factor of the whole bucket cancels in the ratio, and
- when the hook was called, in seconds since the step's start (the collector's
  ``step_begin``); the last bucket's is when the rank's backward had every
  gradient ready;

and learns each bucket's parameter names (:attr:`GradientProbe.bucket_parameters`,
the names in the wrapped module's ``named_parameters()``) for the verdict that names a
bucket;

and then runs the reduction DDP runs without a hook (each element multiplied by
``1 / size`` of the group, then summed by ``all_reduce``: the reduced gradients
are bit-identical, :func:`_reduce`), or the user's own hook.

DDP takes one hook per network and cannot remove it: the probe's hook is
registered once per network and stays; when the collector's run ends it only
passes the buckets on. A hook the user registers after the probe
(``model.register_comm_hook(state, hook)``) is chained: the probe records,
then calls it (the probe wraps the network's ``register_comm_hook``). A hook
registered before the probe cannot be wrapped: the probe is then off for that
network, with one warning.

No device synchronisation on the training thread: on an accelerator a bucket's
norm and peak stay device tensors; at the step's end the step's are stacked and
copied to the host without a wait (``_device_reads.HostCopy``), and
:meth:`GradientProbe.take` returns them a step or more later, once the copy is done.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections import deque
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

import torch
import torch.distributed as dist

from rankscribe.collector import _clock
from rankscribe.collector.adapters._device_reads import HostCopy

logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = ["GRADIENT_STEPS_KEPT", "BucketNorm", "GradientPoint", "GradientProbe", "gradient_probe"]

#: A bucket's ``(index, local norm, local peak)``: the peak is the largest norm of a row of
#: :data:`_ROW` consecutive elements (module docstring).
BucketNorm = tuple[int, float, float]
#: What the probe hands on: ``(step, [bucket norms], ready)``, ``ready`` the seconds from
#: the step's start until its last bucket's hook ran (None: not known).
GradientPoint = tuple[int, list[BucketNorm], float | None]
#: Steps whose device norms may wait to be read; older ones are dropped (with a warning).
GRADIENT_STEPS_KEPT = 64
#: Steps during which each bucket's parameter names are learnt again (DDP's rebuild).
_LAYOUT_STEPS = 3
#: Elements summed in float32 before the float64 sum of the rows (on the CPU), and the
#: elements of a row whose norm the peak is the largest of. 256: one element grown x2^16
#: holds ~2^16 / sqrt(size) of a bucket's norm, a row of clean elements sqrt(256 / size);
#: the row kernel took 34.5 us a MB at 256 against 31.4 at 4096 (43 at 64).
_ROW = 256
#: Buckets smaller than this are normed in float64 directly (the rows would cost more).
_ROWS_FROM = 1 << 16
#: Elements normed then scaled at a time (1 MB of float32: in a core's L2 cache between the
#: two). On a 16.8 MB bucket the two took 1.8 ms fused against 3.3 ms as two passes on a
#: lightly loaded machine, and about the same either way on a crowded one, where the block
#: leaves the cache between them (docs/gradients.md, "What it costs").
_BLOCK = 1 << 18

# One probe per DDP network, for the network's life: DDP cannot take a second hook; and the
# networks whose hook place was taken already (said once).
_probes: WeakKeyDictionary[Any, GradientProbe] = WeakKeyDictionary()
_refused: WeakSet[Any] = WeakSet()


def _scale(group: Any) -> float | None:
    """What DDP multiplies each gradient by before its all-reduce: ``1 / size`` of the
    group, or None with one rank (``x * 1.0`` is ``x``: one pass over the bucket less).

    A multiply, as DDP does without a hook (whether the gradients are copied into
    the bucket or are views of it), not a division as torch's ``allreduce_hook``:
    ``x * (1 / 3)`` is not always ``x / 3`` in floating point.
    """
    group = group if group is not None else dist.group.WORLD
    size = group.size() if group is not None else 1
    return 1.0 / size if size != 1 else None


def _reduce(group: Any, buffer: Any, scale: float | None) -> torch.futures.Future[torch.Tensor]:
    """DDP's own reduction of a bucket: a multiply by ``scale`` (:func:`_scale`; None:
    done already, or none to do), then a sum by all-reduce."""
    group = group if group is not None else dist.group.WORLD
    if scale is not None:
        buffer.mul_(scale)
    work = dist.all_reduce(buffer, group=group, async_op=True)
    future: torch.futures.Future[torch.Tensor] = work.get_future().then(_first)
    return future


def _first(future: Any) -> Any:
    return future.value()[0]


def _row_peak(flat: Any) -> Any:
    """The largest norm of a row of :data:`_ROW` consecutive elements of ``flat`` (the
    last row may be shorter), as a tensor on ``flat``'s device (no synchronisation); NaN
    if an element is NaN (``amax`` propagates it)."""
    whole = flat.numel() // _ROW * _ROW
    parts = [torch.linalg.vector_norm(flat[whole:]).reshape(1)]
    if whole:
        parts.append(torch.linalg.vector_norm(flat[:whole].view(-1, _ROW), dim=1))
    return torch.cat(parts).amax()


def _host_norm(buffer: Any, scale: float | None = None) -> tuple[float, float]:
    """The L2 norm of a CPU bucket, accumulated in float64, and its peak (the largest
    norm of a row of :data:`_ROW` elements; module docstring); with ``scale``, the
    bucket is then multiplied by it in place, as DDP's reduction does (:func:`_scale`).

    The scaling is fused with the norm: each :data:`_BLOCK` of the bucket is scaled
    right after its rows' norms are taken, while it is still in the core's cache,
    so the bucket is read from memory once, not twice (a float32 row kernel, the
    rows and their float64 sum are the same with or without ``scale``). The peak is
    the largest of the rows the norm sums.
    """
    flat = buffer.reshape(-1)
    count = flat.numel()
    if count < _ROWS_FROM:
        norm = float(torch.linalg.vector_norm(flat, dtype=torch.float64))
        peak = float(_row_peak(flat))
        if scale is not None:
            flat.mul_(scale)
        return norm, peak
    whole = count // _ROW * _ROW
    rows = torch.empty(whole // _ROW + 1, dtype=torch.float32)
    for first in range(0, whole, _BLOCK):
        block = flat[first : min(first + _BLOCK, whole)]
        row = first // _ROW
        torch.linalg.vector_norm(
            block.view(-1, _ROW), dim=1, out=rows[row : row + block.numel() // _ROW]
        )
        if scale is not None:
            block.mul_(scale)
    tail = flat[whole:]
    rows[-1] = torch.linalg.vector_norm(tail)  # the last row: the tail (0 when none)
    if scale is not None:
        tail.mul_(scale)
    norm = float(torch.linalg.vector_norm(rows, dtype=torch.float64))
    if math.isinf(norm):  # a row's float32 sum overflowed, or an element is infinite
        norm = float(torch.linalg.vector_norm(flat, dtype=torch.float64))
        if scale is not None:  # of the scaled bucket: each element within float32's rounding
            norm /= scale
    return norm, float(rows.amax())


class GradientProbe:
    """The communication hook of one DDP network, and the norms it recorded (module docstring).

    ``active``: whether the hook records (False between runs); :attr:`arrival`: its ready
    time is the rank's ``rankscribe/arrival_time`` too. The hook notes when the
    step's last bucket was ready (``_clock.now()``); :meth:`take` makes it a time since
    the step's start, which the collector knows for certain only at the step's end (a
    ``TrainSession`` calls ``step_begin`` after the step).
    """

    #: The ready time is the rank's arrival at DDP's reduce (docs/gradients.md).
    arrival = True

    def __init__(self, network: Any) -> None:
        self.active = False
        self._group = network.process_group
        self._scale = _scale(self._group)
        self._user: tuple[Any, Any] | None = None  # (hook, state) registered after ours
        self._norms: list[tuple[int, Any, Any]] = []  # (bucket index, norm, peak) this step
        self._ready_at: float | None = None
        self._spent = 0.0  # seconds in the hook's own work since the last take_spent
        self._waiting: deque[tuple[int, list[int], HostCopy]] = deque()
        self._dropped = False
        # Each bucket's parameter names, learnt from the buckets DDP hands the hook: DDP
        # rebuilds its buckets once, after the first step, so they are learnt again until
        # the probe has seen _LAYOUT_STEPS steps, then only for a bucket not seen yet.
        self._parameter_names = {
            id(value): name for name, value in network.module.named_parameters()
        }
        self.bucket_parameters: dict[int, list[str]] = {}
        self._steps_taken = 0
        # Weakly: the probe is the value of a weak-keyed table of networks, and a value that
        # held its key would keep every network alive.
        self._network = weakref.ref(network)

        # Unannotated: DDP checks a hook's annotations, and this module's are strings.
        def hook(state, bucket):  # type: ignore[no-untyped-def]
            return self._hook(state, bucket)

        if network._comm_hooks:  # a hook of the user's holds DDP's one place already
            raise RuntimeError("a communication hook is registered already")
        try:
            network.register_comm_hook(None, hook)
        except (RuntimeError, ValueError):
            network._comm_hooks.clear()  # DDP lists a hook before its reducer refuses it
            raise
        # Later registrations are chained behind the probe (DDP takes one hook).
        network.register_comm_hook = self._chain

    def _chain(self, state: object, hook: Any) -> None:
        network = self._network()
        if network is not None:
            network._check_comm_hook(hook)  # DDP's own checks of a hook (callable, annotations)
        if self._user is not None:
            raise RuntimeError(
                "register_comm_hook can only be called once (the RankScribe gradient probe "
                "chains the first hook registered after it)"
            )
        self._user = (hook, state)

    def _hook(self, state: object, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        user = self._user
        scale = self._scale  # still to be done by _reduce, unless the norm's pass did it
        if self.active:
            entered = _clock.now()
            buffer = bucket.buffer()
            index = bucket.index()
            if buffer.device.type == "cpu":
                # Without a user's hook the probe reduces: its norm's pass scales too.
                norm, peak = _host_norm(buffer, scale if user is None else None)
                scale = None
                self._norms.append((index, norm, peak))
            else:  # stays on the device: read a step or more later (no synchronisation)
                self._norms.append((index, *self.device_norm(buffer.detach().reshape(-1))))
            if self._steps_taken < _LAYOUT_STEPS or index not in self.bucket_parameters:
                names = self._parameter_names
                self.bucket_parameters[index] = [
                    names.get(id(parameter), "?") for parameter in bucket.parameters()
                ]
            self._ready_at = ready = _clock.now()
            # The hook's own time (with the scaling its norm's pass does for the reduce:
            # in cache, a small part of it), for the collector's cost budget.
            self._spent += ready - entered
        if user is not None:
            future: torch.futures.Future[torch.Tensor] = user[0](user[1], bucket)
            return future
        return _reduce(self._group, bucket.buffer(), scale)

    @staticmethod
    def device_norm(flat: Any) -> tuple[Any, Any]:
        """The L2 norm of a bucket on an accelerator, accumulated in float64, and its peak, as
        float64 tensors on its device (no synchronisation; module docstring).

        As on the CPU, a bucket of :data:`_ROWS_FROM` elements or more is read once: its rows'
        norms in float32 (a half-precision bucket's too; a float64 bucket's in float64), then
        their float64 norm. ``vector_norm`` with ``dtype=float64`` of the bucket itself casts
        its whole input first: a float64 copy of the bucket, twice its size, written and read
        again. A smaller bucket is normed in float64 directly. The CPU's second pass where a
        row's float32 sum of squares overflows (an element beyond about 1.8e19) would need
        the host to see the norm first: on a device such a bucket's norm and peak read
        infinite, which the gradient rule names at once, as it names NaN (docs/gradients.md).
        """
        count = flat.numel()
        if count < _ROWS_FROM:
            return torch.linalg.vector_norm(flat, dtype=torch.float64), _row_peak(flat).to(
                torch.float64
            )
        whole = count // _ROW * _ROW
        kind = torch.promote_types(flat.dtype, torch.float32)  # half buckets' rows in float32
        rows = torch.empty(whole // _ROW + 1, dtype=kind, device=flat.device)
        torch.linalg.vector_norm(flat[:whole].view(-1, _ROW), dim=1, dtype=kind, out=rows[:-1])
        # The last row: the tail (0 when none).
        torch.linalg.vector_norm(flat[whole:], dtype=kind, out=rows[-1])
        norm = torch.linalg.vector_norm(rows, dtype=torch.float64)
        return norm, rows.amax().to(torch.float64)

    def take_spent(self) -> float:
        """Seconds the hook spent on its own work (the norms, the bucket's names) since the
        last call: the training thread's, when backward runs there (the collector's cost
        budget counts them; the reduce is DDP's)."""
        spent, self._spent = self._spent, 0.0
        return spent

    def reset(self) -> None:
        """Forget what the hook recorded since the last :meth:`take` (an epoch's end)."""
        self._norms, self._ready_at = [], None

    def take(self, step: int, started: float | None = None) -> list[GradientPoint]:
        """The :data:`GradientPoint` s known now; this step's norms are filed.

        On the CPU, this step's norms and ready time at once; on an accelerator the
        norms of the steps whose copies to the host are done (``ready()`` never waits),
        and this step's ready time now: seconds from ``started`` (the step's start) to
        the hook of its last bucket (None without ``started``).
        """
        norms, ready_at = self._norms, self._ready_at
        self._norms, self._ready_at = [], None
        ready = _clock.since(ready_at, started)
        self._steps_taken += 1
        found: list[GradientPoint] = []
        while self._waiting and self._waiting[0][2].ready():
            found.append(self._read(*self._waiting.popleft()))
        if norms and type(norms[0][1]) is not float:
            self._file(step, norms)
            norms = []
        if norms or ready is not None:
            found.append((step, norms, ready))
        return found

    def finish(self) -> list[GradientPoint]:
        """At the end of training: the device norms still on their way (waits for them)."""
        found = []
        while self._waiting:
            found.append(self._read(*self._waiting.popleft()))
        return found

    def _file(self, step: int, norms: list[tuple[int, Any, Any]]) -> None:
        # A DDP network's buckets live on its one device: one stack (the norms, then the
        # peaks), one copy per step.
        stacked = torch.stack([norm for _, norm, _ in norms] + [peak for _, _, peak in norms])
        self._waiting.append((step, [index for index, _, _ in norms], HostCopy(stacked)))
        if len(self._waiting) > GRADIENT_STEPS_KEPT:
            self._waiting.popleft()
            if not self._dropped:
                self._dropped = True
                logger.warning(
                    "The device has not passed the gradient norms of %d steps; the oldest "
                    "are not recorded.",
                    GRADIENT_STEPS_KEPT,
                )

    @staticmethod
    def _read(step: int, indices: list[int], copy: HostCopy) -> GradientPoint:
        numbers = [float(number) for number in copy.wait().tolist()]
        norms, peaks = numbers[: len(indices)], numbers[len(indices) :]
        return step, list(zip(indices, norms, peaks, strict=True)), None

    def remove(self) -> None:
        """The run ends: the hook stays (DDP cannot remove it) and only passes buckets on."""
        self.active = False
        self.reset()
        self._waiting.clear()


def gradient_probe(network: object) -> GradientProbe | None:
    """The probe of a ``DistributedDataParallel`` network, made active; None for other networks.

    None too (with one warning) when the network has a communication hook
    registered before the probe's, which DDP cannot take a second of.
    """
    if not isinstance(network, torch.nn.parallel.DistributedDataParallel):
        return None
    probe = _probes.get(network)
    if probe is None:
        if network in _refused or not dist.is_available() or not dist.is_initialized():
            return None
        try:
            probe = GradientProbe(network)
        except (RuntimeError, ValueError, AttributeError) as error:
            _refused.add(network)
            logger.warning(
                "The gradient probe is off for this network: DDP refused its "
                "communication hook (%s). A hook of your own registered before the "
                "collector's training begins takes DDP's one place; registered once training "
                "has begun (before the first backward), the probe chains it.",
                str(error).splitlines()[0] if str(error) else type(error).__name__,
            )
            return None
        _probes[network] = probe
    probe.reset()
    probe.active = True
    return probe
