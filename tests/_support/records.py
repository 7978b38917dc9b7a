"""Two ways of judging the same steps give the same verdict records.

Imports only pytest: the package envs that test one package alone use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest


def assert_same_records(
    ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]]
) -> None:
    """The same verdict records, each float to 1e-9 (sums added in another order differ in
    their last bits); ``top`` left out (its ranks tie at such differences)."""
    assert len(ours) == len(theirs), (ours, theirs)
    for one, other in zip(ours, theirs, strict=True):
        assert one.keys() == other.keys()
        for key, value in other.items():
            if isinstance(value, float):
                assert one[key] == pytest.approx(value, rel=1e-9), key
            elif key != "top":
                assert one[key] == value, key
