"""Reading the parameters a file stores: checkpoints and loss-landscape files.

:func:`network_parameters` is the one place that knows how to ask a model for
the weights written to disk; ``ModelCheckpoint``, ``save_checkpoint`` and the
collector's landscape files use it. Unlike the views (whose histograms accept
a close dtype), it keeps every dtype exactly and refuses one NumPy lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.collector.errors import CheckpointTypeError

__all__ = ["network_parameters", "to_numpy"]

#: The ways a network may expose its parameters, in the order they are tried.
PARAMETER_SOURCES = (
    "named_parameters()",
    "parameters_and_names()",
    "a 'parameters' mapping (or method returning one)",
    "state_dict()",
    "a mapping of name to array",
)


def network_parameters(network: Any) -> list[tuple[str, npt.NDArray[Any]]]:
    """Return the ``(name, array)`` pairs of ``network``'s parameters, in its own order.

    Tried in turn, first match wins:

    1. ``network.named_parameters()`` (PyTorch ``nn.Module``);
    2. ``network.parameters_and_names()`` (MindSpore ``Cell``);
    3. ``network.parameters``, a mapping of name to array, or a method returning one;
    4. ``network.state_dict()`` (a mapping);
    5. ``network`` itself, if it is a mapping of name to array.

    Each value goes through :func:`to_numpy`. The arrays may share memory with
    the network (a PyTorch CPU tensor's ``.numpy()`` does): copy them if you
    keep them past the current step. PyTorch buffers (e.g. BatchNorm running
    statistics) are not parameters and are not included.

    Raises :class:`CheckpointTypeError` (a ``TypeError``) when ``network`` offers
    none of these, or a value cannot be turned into an array.
    """
    pairs = _named_values(network)
    return [(str(name), to_numpy(value, str(name))) for name, value in pairs]


def to_numpy(value: Any, name: str = "value") -> npt.NDArray[Any]:
    """``value`` as a NumPy array: arrays as they are, framework tensors converted.

    PyTorch tensors via ``.detach().cpu().numpy()``, MindSpore tensors via
    ``.asnumpy()``, others via ``.numpy()`` or ``np.asarray``. ``name`` is used
    in the error message.
    """
    if isinstance(value, np.ndarray):
        return value
    try:
        if hasattr(value, "detach"):
            # PyTorch: leave the autograd graph and the device before .numpy().
            value = value.detach()
            if hasattr(value, "cpu"):
                value = value.cpu()
            return np.asarray(value.numpy())
        for method in ("asnumpy", "numpy"):
            convert = getattr(value, method, None)
            if callable(convert):
                return np.asarray(convert())
    except (TypeError, RuntimeError, ValueError) as error:
        # e.g. torch refuses .numpy() for bfloat16, which NumPy has no dtype for.
        raise CheckpointTypeError(
            f"parameter {name!r} ({type(value).__name__}) cannot be converted to a NumPy "
            f"array: {error}; convert it to a NumPy-supported dtype such as float32 first"
        ) from error
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise CheckpointTypeError(
            f"parameter {name!r} cannot be converted to a NumPy array: {error}"
        ) from error
    if array.dtype == object:
        raise CheckpointTypeError(
            f"parameter {name!r} must be an array or tensor of numbers or booleans, "
            f"got {type(value).__name__}"
        )
    return array


def _named_values(network: Any) -> Iterable[tuple[Any, Any]]:
    for method in ("named_parameters", "parameters_and_names"):
        produce = getattr(network, method, None)
        if callable(produce):
            return list(produce())
    parameters = getattr(network, "parameters", None)
    if callable(parameters) and not isinstance(parameters, Mapping):
        # torch's parameters() is a nameless generator and was handled above;
        # only a method returning a mapping is a name source.
        parameters = _call_for_mapping(parameters)
    if isinstance(parameters, Mapping):
        return list(parameters.items())
    state_dict = getattr(network, "state_dict", None)
    if callable(state_dict):
        state = state_dict()
        if isinstance(state, Mapping):
            return list(state.items())
    if isinstance(network, Mapping):
        return list(network.items())
    raise CheckpointTypeError(
        f"cannot read parameters from a {type(network).__name__}: expected a network with "
        f"{', '.join(PARAMETER_SOURCES[:-1])}, or {PARAMETER_SOURCES[-1]}"
    )


def _call_for_mapping(method: Any) -> Mapping[Any, Any] | None:
    try:
        result = method()
    except TypeError:
        return None
    return result if isinstance(result, Mapping) else None


def offers_parameters(network: Any) -> bool:
    """True when :func:`network_parameters` knows where to look on ``network``.

    Checked without calling anything, for validating ``saved_network`` up front.
    """
    if isinstance(network, Mapping):
        return True
    if isinstance(getattr(network, "parameters", None), Mapping):
        return True
    return any(
        callable(getattr(network, method, None))
        for method in ("named_parameters", "parameters_and_names", "parameters", "state_dict")
    )
