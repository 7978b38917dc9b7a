"""The PyTorch adapter: modules, optimizers, data loaders and tensors as the collector reads them.

:class:`~rankscribe.collector.adapters.AdapterRegistry` imports this module
only when it meets an object whose class comes from ``torch`` (install
``rankscribe-collector[torch]`` and pin torch yourself). Each registry gets its
own :class:`TorchAdapter` (:func:`create_adapter`), which holds what it learnt
from the objects it read (parameter names, traced graphs). What it reads:

- :meth:`~TorchAdapter.network_view`, for an ``nn.Module``: the class name, the
  ``named_parameters()`` as detached CPU arrays, and the graph that
  ``torch.fx.symbolic_trace`` finds, traced once per module instance. A module
  fx cannot trace (data-dependent control flow, ...) has no graph: the first
  module of each class to fail says why in one warning, and the rest of the
  run is collected as usual. ``DataParallel``, ``DistributedDataParallel``
  and ``torch.compile``'s wrapper are read through to the module they wrap.
- :meth:`~TorchAdapter.optimizer_view`, for a ``torch.optim.Optimizer``: the class name, the
  parameters of every group with their names (see :class:`TorchOptimizer`),
  and ``param_groups[0]['lr']``.
- :meth:`~TorchAdapter.dataset_view`, for a ``DataLoader`` (or a bare ``Dataset`` iterated
  directly): batches per epoch, batch size, the dataset's ``root`` or ``path``,
  and a description of the pipeline for the lineage's dataset graph.
- :meth:`~TorchAdapter.to_numpy`, for tensors: detached, on the host, as NumPy arrays.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy.typing as npt
import torch
from torch.utils.weak import WeakIdKeyDictionary

from rankscribe.collector._checks import is_number
from rankscribe.collector.adapters._torch_data import dataset_view
from rankscribe.collector.adapters._torch_graph import GraphTracer
from rankscribe.collector.adapters._views import DatasetView
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.writer.pb import anf_ir_pb2

# One logger name for the whole PyTorch adapter, whichever private module speaks.
logger = logging.getLogger("rankscribe.collector.adapters.torch")

__all__ = ["TorchAdapter", "TorchNetwork", "TorchOptimizer", "create_adapter"]

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
        logger.info("%s tensors are recorded as %s: NumPy has no %s.",
                    lacking, str(substitute).removeprefix("torch."), lacking)


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


class TorchNetwork:
    """The :class:`~rankscribe.collector.adapters.NetworkView` of an ``nn.Module``."""

    def __init__(self, module: Any, adapter: TorchAdapter) -> None:
        self.module = _unwrapped(module)
        self.name: str = type(self.module).__name__
        self._adapter = adapter
        adapter.remember_parameter_names(self.module)

    def parameters(self) -> list[tuple[str, Any]]:
        """``named_parameters()``, detached, on the host (bfloat16 as float32)."""
        return [(name, self._adapter.host_array(value))
                for name, value in self.module.named_parameters()]

    def graph(self) -> anf_ir_pb2.GraphProto | None:
        """The fx graph, or None (with one warning per class) when fx cannot trace it."""
        return self._adapter.tracer.graph(self.module)


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

    def parameters(self) -> list[tuple[str, Any]]:
        """``(name, host array)`` of every parameter the optimizer updates."""
        pairs: list[tuple[str, Any]] = []
        for group_index, group in enumerate(self.optimizer.param_groups):
            given = group.get("param_names")
            for index, parameter in enumerate(group["params"]):
                if parameter in self._names:
                    name = self._names[parameter]
                else:
                    name = self._name(parameter, group_index, index, given)
                    self._names[parameter] = name
                pairs.append((name, self._adapter.host_array(parameter)))
        return pairs

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

    def optimizer_view(self, obj: object) -> TorchOptimizer | None:
        return TorchOptimizer(obj, self) if isinstance(obj, torch.optim.Optimizer) else None

    def dataset_view(self, obj: object) -> DatasetView | None:
        return dataset_view(obj)

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
