"""The name the train lineage shows for a network, an optimizer or a loss function.

One rule for every way a train lineage is built (``TrainLineage`` in a
training loop, the SummaryCollector, a ``TrainSession``), described in
``docs/collector-schedule.md`` ("Names in the train lineage"):

1. a ``str`` is its own name (``optimizer="Adam"``);
2. an object's own ``name`` attribute, when it is a non-empty ``str``
   (``ArrayOptimizer(..., name="Momentum")``, any object that names itself);
3. ``functools.partial`` names the function it wraps;
4. a function, method, builtin or class: its ``__name__`` (a lambda has none
   worth showing: ``<lambda>`` gives no name);
5. an instance of a built-in type or of a standard-library container or
   function wrapper (``dict``, ``list``, ``OrderedDict``, ``itemgetter``, ...):
   no name;
6. any other instance: its class name (``SoftmaxCrossEntropyWithLogits``).

"No name" (``None``) leaves the field out of the lineage: a bare type such as
``dict``, ``function`` or ``partial`` says nothing about the run and would
make every such run look alike to a lineage query.
"""

from __future__ import annotations

import functools

__all__ = ["object_name"]

# Modules whose types (containers, function wrappers, namespaces) say nothing about
# the object a script passed: an instance of one of them shows no name.
_CONTAINER_MODULES = frozenset(
    {"builtins", "collections", "array", "functools", "operator", "types"}
)


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _own_name(value: object) -> str | None:
    try:
        return _text(getattr(value, "name", None))
    except Exception:  # a property that fails is no name, not a failed lineage
        return None


def object_name(value: object) -> str | None:
    """The name the lineage shows for ``value``, or None to leave the field out."""
    for _ in range(8):  # partials of partials, bounded
        if not isinstance(value, functools.partial) or _own_name(value) is not None:
            break
        value = value.func
    if value is None or isinstance(value, str):
        return _text(value)
    own = _own_name(value)
    if own is not None or isinstance(value, functools.partial):
        return own
    if callable(value):
        name = _text(getattr(value, "__name__", None))
        if name is not None:
            return None if name == "<lambda>" else name
    kind = type(value)
    return None if kind.__module__ in _CONTAINER_MODULES else kind.__name__
