"""Finding the optimizer a network holds, when a training loop was given none.

MindSpore's SummaryCollector and MindInsight's TrainLineage, given no
optimizer, look for one among the network's cells: the first cell that is an
optimizer, or that holds one in its ``optimizer`` attribute (a train-one-step
wrapper does). One rule here for the lineage callbacks and the collector
(``docs/collector-schedule.md``, "The optimizer"):

- the objects looked at are the network itself, then its sub-modules in their
  own order (``cells_and_names()`` of a MindSpore cell, ``named_modules()`` of a
  torch module), then what a wrapper holds (``network``, ``_backbone``,
  ``backbone``, ``module``, ``_orig_mod``, ``model``), each once;
- the first of them that is an optimizer, or whose ``optimizer`` attribute is
  one, gives it;
- an optimizer is an object whose class (or a base of it) is named
  ``Optimizer`` (torch's, MindSpore's, Keras'), or that has a ``step()`` method
  and either ``param_groups`` or a ``learning_rate`` (the NumPy
  ``ArrayOptimizer``, an optimizer of one's own).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from rankscribe.lineage._checks import check_mapping

__all__ = ["is_optimizer", "network_optimizer", "optimizer_of"]

#: Attributes where a wrapper keeps the network it runs.
_HELD_NETWORKS = ("network", "_backbone", "backbone", "module", "_orig_mod", "model")
#: Objects looked at, at most: a network of ten thousand modules is searched whole.
_MOST_OBJECTS = 10_000


def _attribute(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # a property that fails holds nothing
        return None


def is_optimizer(obj: object) -> bool:
    """Whether ``obj`` is an optimizer, by the rule of this module's docstring."""
    if obj is None or isinstance(obj, (str, bytes, int, float, Mapping, list, tuple)):
        return False
    if any(cls.__name__ == "Optimizer" for cls in type(obj).__mro__):
        return True
    if not callable(_attribute(obj, "step")):
        return False
    return _attribute(obj, "param_groups") is not None or (
        _attribute(obj, "learning_rate") is not None
    )


def _sub_modules(obj: object) -> list[Any]:
    for method, pairs in (("cells_and_names", True), ("named_modules", True), ("modules", False)):
        walk = _attribute(obj, method)
        if not callable(walk):
            continue
        try:
            items = list(walk())
        except Exception:  # not a framework's walk after all
            continue
        if pairs:
            return [item[1] for item in items if isinstance(item, tuple) and len(item) == 2]
        return items
    return []


def _candidates(network: object) -> Iterator[Any]:
    """The network, its sub-modules and what wrappers hold, each once, breadth first.

    A module reached through a walk of sub-modules is not walked again (the first
    walk gave its descendants already), so a deep network costs one walk.
    """
    seen: set[int] = set()
    pending: deque[tuple[Any, bool]] = deque([(network, True)])
    while pending and len(seen) < _MOST_OBJECTS:
        obj, walk = pending.popleft()
        if obj is None or isinstance(obj, str) or id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if walk:
            pending.extend((item, False) for item in _sub_modules(obj) if item is not obj)
        pending.extend((_attribute(obj, name), True) for name in _HELD_NETWORKS)


def network_optimizer(network: object) -> Any:
    """The optimizer ``network`` holds (itself, a sub-module, a wrapper's), or None."""
    if network is None:
        return None
    for obj in _candidates(network):
        if is_optimizer(obj):
            return obj
        held = _attribute(obj, "optimizer")
        if held is not obj and is_optimizer(held):
            return held
    return None


def optimizer_of(args: Mapping[str, Any]) -> Any:
    """The run's optimizer: ``args["optimizer"]``, else the one its network holds.

    The network searched is the train network in a training run and the
    evaluation network in an evaluation, as the original does, then ``network``.
    """
    check_mapping("args", args)
    optimizer = args.get("optimizer")
    if optimizer is not None:
        return optimizer
    first = "eval_network" if args.get("mode") == "eval" else "train_network"
    for key in (first, "network"):
        found = network_optimizer(args.get(key))
        if found is not None:
            return found
    return None
