"""A column's width, measured without making its cells, is the width of its cells.

The query command sizes the columns it may leave out from their smallest
and largest numbers alone (``docs/lineage-queries.md``, "The command line");
the table must come out as if every cell had been made.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

# private: the terminal column-width rule, no public door
from rankscribe.lineage.cli._table import column_texts, column_width


def _widest(values: list[Any]) -> int:
    return max(map(len, column_texts(values)), default=0)


def _measured(values: list[Any]) -> int:
    """The width as the command line takes it: measured if it can be, else from the cells."""
    width = column_width(values)
    return _widest(values) if width is None else width


@pytest.mark.parametrize(
    "values",
    [
        [0],
        [5, -12, 300],
        [-(10**30), 10**25],
        [9.99996, 0.5],  # rounds up to one more digit: 10.0000
        [-0.00001, 0.25],  # a minus sign on a zero: -0.0000
        [-99.99999, 3.0],
        [1, 2.5, -3],  # ints among floats are printed as floats
        [1e-9, 2.0],  # an exponent format
        [1e12, -5.0],
        [float("nan"), 1.5],
        [float("inf"), -1.0],
        [0.0, 0.0],
        [True, 2],
        ["a", "long text", "\x1b[31m"],
        [None, 1.5, "x"],
        [{"a": 1}, [1, 2]],
    ],
)
def test_the_width_of_a_column_is_its_widest_cell(values: list[Any]) -> None:
    assert _measured(values) == _widest(values)


_numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
)


@given(st.lists(_numbers, min_size=1, max_size=40))
def test_any_column_of_numbers_is_measured_as_its_cells(values: list[Any]) -> None:
    assert _measured(values) == _widest(values)


def test_plain_numbers_in_a_fixed_point_format_are_measured_without_their_cells() -> None:
    assert column_width([5, -12, 300]) == 3
    assert column_width([9.99996, 0.5]) == len("10.0000")
    assert column_width(["text"]) is None  # only its cells tell
    assert column_width([1e-9, 2.0]) is None  # an exponent format: made into cells
    assert column_width([]) is None
