"""The ranks' errors: the package lists the base and the claim's, errors lists them all."""

from __future__ import annotations

import pytest

import rankscribe.ranks
from rankscribe.ranks import errors


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_still_imports_from_the_package(name: str) -> None:
    assert getattr(rankscribe.ranks, name) is getattr(errors, name)
    listed = name in rankscribe.ranks.__all__
    assert listed == (name in {"RanksError", "JobDirClaimedError"})


def test_the_store_a_store_coordinator_takes_is_public() -> None:
    assert "Store" in rankscribe.ranks.__all__
    assert "set" in vars(rankscribe.ranks.Store) and "add" in vars(rankscribe.ranks.Store)
