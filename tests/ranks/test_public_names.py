"""The ranks' names: one spelling each; the sibling modules stay out of the package's list."""

from __future__ import annotations

import types

import pytest

import rankscribe.ranks
from rankscribe.ranks import errors, files, jsondata, launchers, testing, tree

# Listed at the package top, where the docs spell them; every other error only in errors.
PACKAGE_ERRORS = {"RanksError", "JobDirClaimedError"}


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_in_errors_and_only_the_base_and_the_claims_at_the_top(name: str) -> None:
    if name in PACKAGE_ERRORS:
        assert name in rankscribe.ranks.__all__
        assert getattr(rankscribe.ranks, name) is getattr(errors, name)
    else:
        assert name not in rankscribe.ranks.__all__
        assert not hasattr(rankscribe.ranks, name)  # no second spelling


@pytest.mark.parametrize(
    "module", [files, jsondata, launchers, testing, tree], ids=lambda m: m.__name__
)
def test_a_sibling_modules_names_are_not_the_packages(module: types.ModuleType) -> None:
    exported = set(module.__all__)
    assert exported
    assert not exported & set(rankscribe.ranks.__all__)


def test_the_tree_test_doubles_live_in_testing() -> None:
    assert {"MemoryTreeHub", "MemoryTreeChannel"} <= set(testing.__all__)
    assert not hasattr(rankscribe.ranks, "MemoryTreeHub")


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("tree_channel", tree),
        ("TreeChannel", tree),
        ("JSONDataError", jsondata),
        ("UnsafeFileError", files),
    ],
)
def test_a_name_siblings_need_has_one_spelling_in_its_sibling_module(
    name: str, home: types.ModuleType
) -> None:
    assert name in home.__all__
    assert not hasattr(rankscribe.ranks, name)
    assert name not in errors.__all__


def test_the_store_a_store_coordinator_takes_is_public() -> None:
    assert "Store" in rankscribe.ranks.__all__
    assert "set" in vars(rankscribe.ranks.Store) and "add" in vars(rankscribe.ranks.Store)
