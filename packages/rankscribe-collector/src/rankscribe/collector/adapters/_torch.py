"""The PyTorch adapter: modules, optimizers, data loaders and tensors as the collector reads them.

:class:`~rankscribe.collector.adapters.AdapterRegistry` imports this module
only when it meets an object whose class comes from ``torch`` (install
``rankscribe-collector[torch]`` and pin torch yourself). Each registry gets its
own :class:`TorchAdapter` (:func:`create_adapter`), which holds what it learnt
from the objects it read (parameter names, traced graphs). What it reads:

- :meth:`~TorchAdapter.network_view`, for an ``nn.Module``: the class name, the
  ``named_parameters()`` as detached CPU arrays, and the graph that
  ``torch.fx`` traces, once per module instance, stepping over the summary
  operators a ``forward`` calls (``docs/collector-schedule.md``, "Summary
  operators in a network"). A module fx cannot trace (data-dependent control
  flow, a decorated ``forward``, ...) has no graph: the first module of each
  class to fail says why in one warning (on rank 0; the other ranks log it at
  DEBUG), and the rest of the run is collected as usual. ``DataParallel``,
  ``DistributedDataParallel`` and ``torch.compile``'s wrapper are read through to
  the module they wrap.
- :meth:`~TorchAdapter.optimizer_view`, for a ``torch.optim.Optimizer``: the class name, the
  parameters of every group with their names (see :class:`TorchOptimizer`),
  and ``param_groups[0]['lr']``; the histograms of those on an accelerator are
  counted on the device (``_torch_histogram.py``: a few numbers per tensor
  come back, not the tensor), off the training thread (``_device_reads.py``).
- :meth:`~TorchAdapter.late_loss`, for a loss on an accelerator: its copy to
  pinned host memory started, read later (``_device_reads.py``: nothing on the
  training thread waits for the device at a collected step).
- :meth:`~TorchAdapter.dataset_view`, for a ``DataLoader`` (or a bare ``Dataset`` iterated
  directly): batches per epoch, batch size, the dataset's ``root`` or ``path``,
  and a description of the pipeline for the lineage's dataset graph.
- :meth:`~TorchAdapter.to_numpy`, for tensors: detached, on the host, as NumPy arrays.
- :meth:`TorchNetwork.fingerprint_parts`: the parameters as raw bytes for the
  parameter fingerprint: a CPU tensor's bytes in place, a tensor on an
  accelerator as a :class:`TorchDevicePart`, reduced on its device by torch's
  own operations (only 8 bytes per tensor come back, in one transfer, which
  the collector starts without a wait: ``_DeviceDigest.start``).
- :meth:`~TorchAdapter.forward_timer`, for an ``nn.Module``: a
  :class:`ForwardTimer` timing its ``forward`` through the module's own ``forward``
  attribute, or forward hooks where a ``DataParallel`` or the compiler could meet it
  (``_torch_forward.py``; on an accelerator with the device's events, read a step or
  more later, never a synchronise per step). ``docs/job-view.md``, "Timings".
- :meth:`~TorchAdapter.gradient_probe`, for a ``DistributedDataParallel`` network: a
  communication hook recording each bucket's local gradient norm and ready time
  before the reduce (``_torch_gradients.py``; ``docs/job-view.md``, "Gradients").
"""

from __future__ import annotations

import logging
import struct
import threading
from typing import Any

import numpy.typing as npt
import torch
from torch.utils.weak import WeakIdKeyDictionary

from rankscribe.collector._checks import is_number
from rankscribe.collector._fingerprint import HostPart
from rankscribe.collector.adapters import _device_reads
from rankscribe.collector.adapters._device_reads import DeviceHistograms, LateSums, late_loss
from rankscribe.collector.adapters._torch_data import dataset_view
from rankscribe.collector.adapters._torch_forward import (
    FORWARD_EVENTS_KEPT,
    ForwardTimer,
    keeps_hooks,
)
from rankscribe.collector.adapters._torch_forward import device_events as _device_events
from rankscribe.collector.adapters._torch_gradients import GradientProbe, gradient_probe
from rankscribe.collector.adapters._torch_graph import GraphTracer
from rankscribe.collector.adapters._torch_histogram import device_histogram_dtype, to_host
from rankscribe.collector.adapters._views import DatasetView
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.writer.pb import anf_ir_pb2

# One logger name for the whole PyTorch adapter, whichever private module speaks.
logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = [
    "FORWARD_EVENTS_KEPT",
    "ForwardTimer",
    "GradientProbe",
    "TorchAdapter",
    "TorchDevicePart",
    "TorchNetwork",
    "TorchOptimizer",
    "create_adapter",
    "keeps_hooks",
]

#: Tests set this to fingerprint CPU tensors through the device path (the same torch code).
FINGERPRINT_CPU_ON_DEVICE = False
#: Tests set this to count CPU tensors' histograms through the device path (the same code).
HISTOGRAM_CPU_ON_DEVICE = False
#: Bytes reduced per torch call by the device fingerprint (bounds its temporaries: 8x this).
_DEVICE_CHUNK = 1 << 20
# Odd multipliers of the position-weighted sum (from the 64-bit golden ratio and splitmix64).
_WEIGHT_STEP = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64
_WEIGHT_BASE = -4658895280553007687  # 0xBF58476D1CE4E5B9 as int64

# Dtypes already logged as converted, once per process as the warnings module does: this
# only keeps the log short and changes nothing any run records.
_substituted_dtypes: set[str] = set()


def _host_array(tensor: Any) -> npt.NDArray[Any]:
    """``tensor`` detached, dense, on the host, in a dtype NumPy has."""
    tensor = tensor.detach()
    try:
        if tensor.layout != torch.strided:
            tensor = tensor.to_dense()
        if tensor.is_quantized:
            tensor = tensor.dequantize()
        substitute = _numpy_substitute(tensor.dtype)
        if substitute is not None:
            _note_substitute(tensor.dtype, substitute)
            tensor = tensor.to(substitute)
        # force=True also resolves the conjugate and negative views .numpy() refuses.
        array: npt.NDArray[Any] = tensor.numpy(force=True)
    except (TypeError, RuntimeError) as error:  # NotImplementedError is a RuntimeError
        raise CollectorTypeError(
            f"a {tensor.dtype} tensor cannot be read as a NumPy array: {error}"
        ) from error
    return array


def _note_substitute(dtype: Any, substitute: Any) -> None:
    lacking = str(dtype).removeprefix("torch.")
    if lacking not in _substituted_dtypes:
        _substituted_dtypes.add(lacking)
        logger.info(
            "%s tensors are recorded as %s: NumPy has no %s.",
            lacking,
            str(substitute).removeprefix("torch."),
            lacking,
        )


def _numpy_substitute(dtype: Any) -> Any:
    """The dtype to convert to first, for dtypes NumPy lacks (bfloat16, float8, complex32)."""
    if dtype.is_floating_point and dtype not in (torch.float16, torch.float32, torch.float64):
        return torch.float32  # exact for bfloat16 and the float8 formats
    if dtype == torch.complex32:
        return torch.complex64
    return None


def _unwrapped(module: Any) -> Any:
    """The module a parallel or compiled wrapper holds (names and graph come from it)."""
    parallel = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    for _ in range(4):
        if isinstance(module, parallel):
            module = module.module
        elif isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
            module = module._orig_mod  # torch.compile's OptimizedModule
        else:
            break
    return module


class _DeviceDigest:
    """A device fingerprint not yet brought to the host (a 0-d int64 tensor)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    @staticmethod
    def resolve(digests: list[_DeviceDigest]) -> list[bytes]:
        """Every digest as 8 bytes, in one transfer per device."""
        sums = to_host([digest.value for digest in digests])
        return [struct.pack("<q", int(number)) for number in sums]

    @staticmethod
    def start(digests: list[_DeviceDigest]) -> LateSums:
        """Every digest on its way to the host (one copy per device, nothing waits):
        ``ready()`` says when it arrived, ``resolve()`` gives the bytes (waiting)."""
        return LateSums([digest.value for digest in digests])


class TorchDevicePart:
    """A tensor's raw bytes, fingerprinted where the tensor lives.

    A byte range becomes a position-weighted sum in int64 arithmetic (which
    wraps): ``sum(byte[i] * (((start + i) * A + B) | 1))``. Each weight is
    odd, so a change of any single byte always changes the sum; the work is
    a few elementwise operations and a reduction on the device, in chunks of
    ``_DEVICE_CHUNK`` bytes, and only the 8-byte result travels (once per
    collected step for every device part together, see :class:`_DeviceDigest`).
    """

    __slots__ = ("_bytes", "nbytes")

    def __init__(self, tensor: Any) -> None:
        self._bytes = tensor.detach().reshape(-1).view(torch.uint8)
        self.nbytes = int(self._bytes.numel())

    def digest(self, start: int, stop: int) -> _DeviceDigest:
        data = self._bytes[start:stop]
        device = data.device
        total = torch.zeros((), dtype=torch.int64, device=device)
        for low in range(0, len(data), _DEVICE_CHUNK):
            chunk = data[low : low + _DEVICE_CHUNK].to(torch.int64)
            position = torch.arange(
                start + low, start + low + len(chunk), dtype=torch.int64, device=device
            )
            weight = torch.bitwise_or(position * _WEIGHT_STEP + _WEIGHT_BASE, 1)
            total = total + (chunk * weight).sum()
        return _DeviceDigest(total)


def _fingerprint_part(tensor: Any) -> Any:
    """A CPU tensor's bytes in place, or a :class:`TorchDevicePart` (the device does the work)."""
    if FINGERPRINT_CPU_ON_DEVICE or _device_reads.backend.on_device(tensor):
        return TorchDevicePart(tensor)
    try:
        flat = tensor.detach().reshape(-1).view(torch.uint8)
        return HostPart(flat.numpy())
    except (TypeError, RuntimeError):  # a sparse or quantized tensor has no plain bytes
        return HostPart(_host_array(tensor))


class TorchNetwork:
    """The :class:`~rankscribe.collector.adapters.NetworkView` of an ``nn.Module``."""

    def __init__(self, module: Any, adapter: TorchAdapter) -> None:
        self.module = _unwrapped(module)
        self.name: str = type(self.module).__name__
        self._adapter = adapter
        adapter.remember_parameter_names(self.module)

    def parameters(self) -> list[tuple[str, Any]]:
        """``named_parameters()``, detached, on the host (bfloat16 as float32)."""
        return [
            (name, self._adapter.host_array(value))
            for name, value in self.module.named_parameters()
        ]

    def fingerprint_parts(self) -> list[Any]:
        """Every parameter as raw bytes for the fingerprint (``_fingerprint.py``)."""
        return [_fingerprint_part(value) for _, value in self.module.named_parameters()]

    def graph(self) -> anf_ir_pb2.GraphProto | None:
        """The fx graph, or None (with one warning per class) when fx cannot trace it."""
        return self._adapter.tracer.graph(self.module)

    @property
    def graph_failure_reported(self) -> bool:
        """True when tracing failed and the tracer's one warning already said why."""
        return self._adapter.tracer.failed(self.module)


class TorchOptimizer:
    """The :class:`~rankscribe.collector.adapters.OptimizerView` of a ``torch.optim.Optimizer``.

    Parameters are those of every param group, in order. Each one's name is,
    first found:

    1. the name the optimizer was given: ``Optimizer(model.named_parameters())``
       keeps them in the group's ``param_names`` (torch >= 2.6);
    2. its name in the last ``nn.Module`` the same adapter read (the collector
       reads the training network for its graph before the first histograms);
       another collector's reads never count, so the tags of one run do not
       depend on what else the process read before;
    3. otherwise ``param_groups.<g>.params.<i>``, where it sits in the optimizer,
       with one warning saying how to get real names.

    A name is fixed when the parameter is first seen, so a tag does not change
    in the middle of a run.
    """

    def __init__(self, optimizer: Any, adapter: TorchAdapter) -> None:
        self.optimizer = optimizer
        self._adapter = adapter
        self.name: str = type(optimizer).__name__
        self._names: Any = WeakIdKeyDictionary()  # parameter -> name, fixed at first sight
        self._warned = False

    def _name(self, parameter: Any, group: int, index: int, given: object) -> str:
        if isinstance(given, (list, tuple)) and index < len(given):
            name = given[index]
            if isinstance(name, str):
                return name
        known = self._adapter.parameter_name(parameter)
        if isinstance(known, str):
            return known
        if not self._warned:
            self._warned = True
            logger.warning(
                "%s does not know the names of its parameters and no network read so far holds "
                "them, so they are named param_groups.<group>.params.<index>. Build the "
                "optimizer from model.named_parameters() to record the parameter names.",
                self.name,
            )
        return f"param_groups.{group}.params.{index}"

    def named_tensors(self) -> list[tuple[str, Any]]:
        """``(name, tensor)`` of every parameter the optimizer updates, where it lives."""
        pairs: list[tuple[str, Any]] = []
        for group_index, group in enumerate(self.optimizer.param_groups):
            given = group.get("param_names")
            for index, parameter in enumerate(group["params"]):
                if parameter in self._names:
                    name = self._names[parameter]
                else:
                    name = self._name(parameter, group_index, index, given)
                    self._names[parameter] = name
                pairs.append((name, parameter))
        return pairs

    def parameters(self) -> list[tuple[str, Any]]:
        """``(name, host array)`` of every parameter the optimizer updates."""
        return [(name, self._adapter.host_array(value)) for name, value in self.named_tensors()]

    def histogram_values(self, tensors: list[Any]) -> list[Any]:
        """What the record takes for each tensor's histogram (chosen from ``named_tensors``).

        An accelerator's floating tensors are copied on their device and counted there
        later, off the training thread (``_device_reads.DeviceHistograms``: the record
        gets a deferred value per tensor, which the writer resolves); the others are
        read on the host and bucketed by the writer. When the device cannot count (an
        operation refused, e.g. under a deterministic-algorithms setting, or float64
        on a device without it, such as Apple's MPS), the device copies are read on
        the host instead from then on, with one warning.
        """
        on_device = [
            index
            for index, tensor in enumerate(tensors)
            if (HISTOGRAM_CPU_ON_DEVICE or _device_reads.backend.on_device(tensor))
            and device_histogram_dtype(tensor) is not None
        ]
        values: list[Any] = [None] * len(tensors)
        if on_device:
            batch = DeviceHistograms(
                [tensors[index] for index in on_device],
                counting=lambda: not self._adapter.device_histograms_failed,
                on_failure=self._adapter.device_histograms_refused,
                to_host=self._adapter.host_array,
            )
            for index, histogram in zip(on_device, batch.values(), strict=True):
                values[index] = histogram
        for index, tensor in enumerate(tensors):
            if values[index] is None:
                values[index] = self._adapter.host_array(tensor)
        return values

    def learning_rate(self) -> float | None:
        """``param_groups[0]['lr']`` (a float or a tensor), or None."""
        groups = self.optimizer.param_groups
        rate = groups[0].get("lr") if groups else None
        if isinstance(rate, torch.Tensor):
            flat = rate.detach().reshape(-1)
            return float(flat[0]) if flat.numel() else None
        if is_number(rate):
            return float(rate)
        return None


class TorchAdapter:
    """The PyTorch adapter of one :class:`~rankscribe.collector.adapters.AdapterRegistry`.

    Holds what it learnt while reading: each parameter's name in the last
    network read (optimizer tags come from it) and the traced graphs.
    """

    def __init__(self) -> None:
        # Keyed by tensor identity and held weakly: torch tensors compare element-wise,
        # so an ordinary dict or WeakKeyDictionary cannot hold them, and a finished
        # run's model must not be kept alive by the collector.
        self._parameter_names: Any = WeakIdKeyDictionary()  # parameter -> name
        self.tracer = GraphTracer()
        self.device_histograms_failed = False  # then histograms are read on the host
        self._lock = threading.Lock()  # the writer's threads count the histograms

    def device_histograms_refused(self, error: BaseException) -> None:
        """The device could not count a histogram: the device copies go to the host from now."""
        with self._lock:
            if self.device_histograms_failed:
                return
            self.device_histograms_failed = True
        logger.warning(
            "Histograms of device tensors are read on the host instead: the device "
            "could not count them (%s).",
            str(error).splitlines()[0] if str(error) else type(error).__name__,
        )

    def remember_parameter_names(self, module: Any) -> None:
        for name, parameter in module.named_parameters():
            self._parameter_names[parameter] = name

    def parameter_name(self, parameter: Any) -> str | None:
        """``parameter``'s name in the last network this adapter read, or None."""
        name = self._parameter_names.get(parameter)
        return name if isinstance(name, str) else None

    def host_array(self, tensor: Any) -> npt.NDArray[Any]:
        return _host_array(tensor)

    def network_view(self, obj: object) -> TorchNetwork | None:
        return TorchNetwork(obj, self) if isinstance(obj, torch.nn.Module) else None

    def forward_timer(self, obj: object) -> ForwardTimer | None:
        """A timer of the forward of a module (of the module a wrapper holds):
        ``_torch_forward.py`` says how it is timed."""
        if not isinstance(obj, torch.nn.Module):
            return None
        module = _unwrapped(obj)
        return ForwardTimer(module, _device_events(module), hooks=keeps_hooks(obj))

    def gradient_probe(self, obj: object) -> GradientProbe | None:
        """The gradient probe of a ``DistributedDataParallel`` network (``_torch_gradients.py``)."""
        return gradient_probe(obj)

    def optimizer_view(self, obj: object) -> TorchOptimizer | None:
        return TorchOptimizer(obj, self) if isinstance(obj, torch.optim.Optimizer) else None

    def dataset_view(self, obj: object) -> DatasetView | None:
        return dataset_view(obj)

    def host_number(self, value: object) -> float | None:
        """A CPU tensor of one real number as a float (the loss's usual form), else None."""
        if (
            isinstance(value, torch.Tensor)
            and not _device_reads.backend.on_device(value)
            and value.numel() == 1
            and value.layout == torch.strided
            and not value.is_quantized
            and not value.dtype.is_complex
        ):
            return float(value.item())  # (item: no warning for a tensor that needs grad)
        return None

    def late_loss(self, value: object) -> Any:
        """A deferred loss for a tensor on an accelerator (``_device_reads.py``), or None:
        its copy to pinned host memory is started, and nothing waits for it here."""
        if not isinstance(value, torch.Tensor):
            return None
        return late_loss(value, _numpy_substitute)

    def to_numpy(self, value: object) -> npt.NDArray[Any] | None:
        """A tensor (or ``nn.Parameter``) as a host NumPy array; None for other torch objects.

        bfloat16 and the float8 formats become float32 (exactly: float32 holds every
        value they can), complex32 becomes complex64. A CPU tensor's array may share
        its memory: copy it to keep it past the current step.
        """
        if not isinstance(value, torch.Tensor):
            return None
        return self.host_array(value)


def create_adapter() -> TorchAdapter:
    """A fresh adapter, with nothing learnt yet (one per registry)."""
    return TorchAdapter()
