"""Lazy package attributes (PEP 562): a package's names imported on first use.

A sibling-facing module (``docs/contributing.md``, "Sibling modules"), not part of
``rankscribe.ranks.__all__``. A package whose ``__init__`` would otherwise import every
module for its public names (numpy, protobuf and Pillow with them) lists where each
name lives and lets this module import it when it is first read::

    _HOMES = {"SummaryRecord": "rankscribe.writer.record._record", ...}
    __getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())

so that ``from rankscribe.lineage import filter_runs`` loads the query modules and
nothing the query does not use (``docs/lineage-queries.md``, "The command line"), and
``rankscribe.ranks.arguments`` loads no coordinator.

Imports the standard library only.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, homes: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``).

    ``homes`` maps each lazy name to the module that defines it; ``namespace`` is the
    package's ``globals()``, where a name is kept once imported (so ``__getattr__`` is
    called once per name). A name without a home that is a submodule of the package
    (``package.reader``) is imported as that submodule; any other name raises
    ``AttributeError`` as a missing attribute does.
    """

    def attribute(name: str) -> Any:
        home = homes.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*namespace, *homes})

    return attribute, names
