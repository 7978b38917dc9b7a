"""Choosing the adapter for an object, and the state adapters keep for one run.

An :class:`AdapterRegistry` belongs to whoever reads training objects (a
``SummaryCollector``, a ``TrainLoop``): the adapters it loads, what it learnt
about each type, and what those adapters remember (the torch adapter's
parameter names and traced graphs) live in it, so two collectors in one
process never see each other's reads.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

import rankscribe.collector.adapters._duck as duck_typing
from rankscribe.collector._checks import is_number
from rankscribe.collector._fingerprint import host_parts
from rankscribe.collector.adapters._views import DatasetView, NetworkView, OptimizerView

logger = logging.getLogger("rankscribe.collector.adapters")

__all__ = ["ADAPTER_MODULES", "Adapter", "AdapterRegistry", "register_adapter"]

#: Top-level module of an object's class -> the adapter module that reads it.
ADAPTER_MODULES: dict[str, str] = {"torch": "rankscribe.collector.adapters._torch"}

# Bumped by register_adapter so that every registry drops the choices it made before.
_configuration = [0]
_configuration_lock = threading.Lock()


class Adapter(Protocol):
    """One framework's readers; each returns None for objects it does not handle."""

    def network_view(self, obj: Any) -> NetworkView | None: ...

    def optimizer_view(self, obj: Any) -> OptimizerView | None: ...

    def dataset_view(self, obj: Any) -> DatasetView | None: ...

    def to_numpy(self, value: Any) -> npt.NDArray[Any] | None: ...


def register_adapter(framework: str, module: str) -> None:
    """Read objects whose class comes from top-level module ``framework`` with ``module``.

    ``module`` defines ``network_view``, ``optimizer_view``, ``dataset_view`` and
    ``to_numpy``, or a ``create_adapter()`` returning an object with those
    methods (one per registry, for adapters that remember what they read).
    """
    with _configuration_lock:
        ADAPTER_MODULES[framework] = module
        _configuration[0] += 1


def _numpy_number(value: Any) -> float | None:
    """A NumPy scalar or one-element array of a real number as a float, else None."""
    if value.size != 1 or value.dtype.kind not in "biuf":
        return None
    return float(value.reshape(-1)[0])


def _no_number(_value: Any) -> None:
    """No reader for such values: None (``late_loss`` or ``to_numpy`` read them)."""
    return None


class AdapterRegistry:
    """The adapter for each object's framework, loaded on first use and kept per registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._configuration = -1
        self._by_type: dict[type, Adapter | None] = {}
        self._by_module: dict[str, Adapter | None] = {}
        #: The reader of one number on the host, by type (:meth:`host_number`), as chosen
        #: under configuration ``_readers_of``.
        self._readers: dict[type, Callable[[Any], float | None]] = {}
        self._readers_of = -1
        self._fingerprint_view: tuple[object, NetworkView | None] | None = None

    def adapter_for(self, obj: object) -> Adapter | None:
        """The adapter for ``obj``'s framework, or None (the built-in duck typing then)."""
        kind = type(obj)
        with self._lock:
            if self._configuration != _configuration[0]:
                self._configuration = _configuration[0]
                self._by_type.clear()
                self._by_module.clear()
            if kind in self._by_type:
                return self._by_type[kind]
            chosen: Adapter | None = None
            # A wrapper may present itself as the class it wraps through ``__class__``
            # (Accelerate's prepared data loaders say they are torch DataLoaders).
            classes = (*kind.__mro__, *getattr(obj.__class__, "__mro__", ()))
            for cls in classes:
                module_name = ADAPTER_MODULES.get(cls.__module__.partition(".")[0])
                if module_name is not None:
                    chosen = self._load(module_name)
                    break
            self._by_type[kind] = chosen
            return chosen

    def _load(self, module_name: str) -> Adapter | None:
        if module_name in self._by_module:
            return self._by_module[module_name]
        adapter: Adapter | None
        try:
            module: Any = importlib.import_module(module_name)
        except ImportError as error:
            logger.warning(
                "The adapter %s cannot be imported (%s); such objects are read "
                "as plain Python objects.",
                module_name,
                error,
            )
            adapter = None
        else:
            create = getattr(module, "create_adapter", None)
            adapter = create() if callable(create) else module
        self._by_module[module_name] = adapter
        return adapter

    def network_view(self, obj: object) -> NetworkView | None:
        """The view of a network, or None when ``obj`` is None or offers nothing readable."""
        if obj is None:
            return None
        adapter = self.adapter_for(obj)
        view = adapter.network_view(obj) if adapter is not None else None
        return view if view is not None else duck_typing.network_view(obj)

    def optimizer_view(self, obj: object) -> OptimizerView | None:
        """The view of an optimizer, or None."""
        if obj is None:
            return None
        adapter = self.adapter_for(obj)
        view = adapter.optimizer_view(obj) if adapter is not None else None
        return view if view is not None else duck_typing.optimizer_view(obj)

    def dataset_view(self, obj: object) -> DatasetView | None:
        """The view of a dataset, or None."""
        if obj is None:
            return None
        adapter = self.adapter_for(obj)
        view = adapter.dataset_view(obj) if adapter is not None else None
        return view if view is not None else duck_typing.dataset_view(obj)

    def forward_timer(self, obj: object) -> Any:
        """Hooks timing ``obj``'s forward (a torch module), or None when its adapter has none.

        An adapter offers them with a ``forward_timer(obj)`` method returning an
        object with ``take(step)``, ``reset()``, ``finish()`` and ``remove()``, and
        optionally ``mark()`` (a timing event recorded on the device's stream, None on
        the CPU: the cost budget times its windows with it).
        """
        if obj is None:
            return None
        adapter = self.adapter_for(obj)
        make = getattr(adapter, "forward_timer", None) if adapter is not None else None
        return make(obj) if callable(make) else None

    def gradient_probe(self, obj: object) -> Any:
        """A probe of ``obj``'s gradients before their reduce (a DDP network), or None.

        An adapter offers it with a ``gradient_probe(obj)`` method returning an
        object with a ``started`` attribute (the step's start, set at each step),
        ``take(step)`` and ``finish()`` (``(step, [(tag, value)])`` lists),
        ``reset()`` and ``remove()``.
        """
        if obj is None:
            return None
        adapter = self.adapter_for(obj)
        make = getattr(adapter, "gradient_probe", None) if adapter is not None else None
        return make(obj) if callable(make) else None

    def fingerprint_parts(self, obj: object) -> list[Any] | None:
        """``obj``'s parameters as raw-byte parts for the fingerprint, or None (no network).

        A network view with a ``fingerprint_parts()`` method gives its own (the
        torch one keeps accelerator tensors on their device); otherwise each
        parameter is read on the host.
        """
        cached = self._fingerprint_view
        if cached is not None and cached[0] is obj:
            view = cached[1]
        else:
            # Kept for the next collected step: a torch view learns every parameter's
            # name when it is made, which a large model should not pay at each step.
            view = self.network_view(obj)
            self._fingerprint_view = (obj, view)
        if view is None:
            return None
        own = getattr(view, "fingerprint_parts", None)
        if callable(own):
            parts: list[Any] = own()
            return parts
        return host_parts(view.parameters(), self.to_numpy)

    def host_number(self, value: object) -> float | None:
        """``value`` as a float when it is one number on the host, else None.

        The usual loss (a Python number, a NumPy scalar or one-element array, a host
        tensor of one element) read the cheapest way: the same float ``np.mean`` of
        it gives. An adapter offers it for its tensors with a ``host_number(value)``
        method; a value on an accelerator, an empty or a complex one is None here
        (:meth:`late_loss` or ``to_numpy`` read those).
        """
        kind = type(value)
        if kind is float:
            return value  # type: ignore[return-value]
        # Chosen once per type (a loss is read at every collected step, on a CPU whose
        # caches the step evicted: the fewer calls the better).
        read = self._readers.get(kind)
        if read is None or self._readers_of != _configuration[0]:
            read = self._host_reader(value)
        return read(value)

    def _host_reader(self, value: object) -> Callable[[Any], float | None]:
        """:meth:`host_number`'s reader of ``value``'s type, kept for that type."""
        if self._readers_of != _configuration[0]:
            self._readers.clear()
            self._readers_of = _configuration[0]
        read: Callable[[Any], float | None] = _no_number
        if isinstance(value, np.ndarray | np.generic):
            read = _numpy_number
        else:
            adapter = self.adapter_for(value)
            own = getattr(adapter, "host_number", None) if adapter is not None else None
            if callable(own):
                read = own
        self._readers[type(value)] = read
        return read

    def late_loss(self, value: object) -> Any:
        """A loss read from an accelerator without a wait, or None (read it on the host).

        An adapter offers it with a ``late_loss(value)`` method returning a
        :class:`~rankscribe.writer.deferred.DeferredValue` (with a non-blocking
        ``ready()``) whose copy to the host is under way, or None.
        """
        adapter = self.adapter_for(value) if not isinstance(value, np.ndarray) else None
        late = getattr(adapter, "late_loss", None) if adapter is not None else None
        return late(value) if callable(late) else None

    def to_numpy(self, value: object) -> npt.NDArray[Any]:
        """``value`` as a NumPy array (framework tensors are moved to the host).

        Raises TypeError (a :class:`~rankscribe.collector.errors.CollectorTypeError`)
        when ``value`` holds no numbers.
        """
        if isinstance(value, np.ndarray):
            return value
        if is_number(value):
            return np.asarray(value)
        adapter = self.adapter_for(value)
        if adapter is not None:
            converted = adapter.to_numpy(value)
            if converted is not None:
                return np.asarray(converted)
        return duck_typing.to_numpy(value)
