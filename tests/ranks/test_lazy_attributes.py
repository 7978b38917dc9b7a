"""rankscribe.ranks.imports.lazy_attributes: a package's names imported on first use (PEP 562)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from rankscribe.ranks.imports import lazy_attributes


def lazy_package(homes: dict[str, str], name: str = "email") -> types.ModuleType:
    """A stand-in package module named ``name`` whose attributes come from ``homes``."""
    module = types.ModuleType(name)
    module.__getattr__, module.__dir__ = lazy_attributes(name, homes, vars(module))  # type: ignore[method-assign]
    return module


def test_a_name_is_imported_from_its_home_on_first_use_and_kept() -> None:
    package = lazy_package({"dumps": "json"})
    assert "dumps" not in vars(package)
    import json

    assert package.dumps is json.dumps
    assert vars(package)["dumps"] is json.dumps  # kept: __getattr__ is not asked again


def test_a_name_is_not_imported_before_it_is_read() -> None:
    sys.modules.pop("tabnanny", None)
    package = lazy_package({"check": "tabnanny"})
    assert "tabnanny" not in sys.modules
    assert callable(package.check)
    assert "tabnanny" in sys.modules


def test_a_submodule_without_a_home_is_imported_as_the_submodule() -> None:
    package = lazy_package({})
    import email.utils

    assert package.utils is email.utils


def test_an_unknown_name_is_a_missing_attribute() -> None:
    package = lazy_package({"dumps": "json"})
    with pytest.raises(AttributeError, match="module 'email' has no attribute 'nothing_here'"):
        package.nothing_here  # noqa: B018
    with pytest.raises(AttributeError):
        package.__wrapped__  # noqa: B018
    assert not hasattr(package, "nothing_here")


def test_dir_lists_the_lazy_names_before_they_are_read() -> None:
    package: Any = lazy_package({"dumps": "json", "loads": "json"})
    assert {"dumps", "loads"} <= set(dir(package))
