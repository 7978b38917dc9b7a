"""split_evenly: contiguous, disjoint, order-keeping shares whose sizes differ by at most one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.ranks import split_evenly
from rankscribe.ranks.errors import RanksTypeError, RanksValueError

items_lists = st.lists(st.integers(), max_size=300)
world_sizes = st.integers(min_value=1, max_value=64)


def all_shares(items: list[int], world_size: int) -> list[list[int]]:
    return [split_evenly(items, world_size, rank) for rank in range(world_size)]


@given(items_lists, world_sizes)
def test_union_in_rank_order_is_the_input(items: list[int], world_size: int) -> None:
    shares = all_shares(items, world_size)
    assert [item for share in shares for item in share] == items


@given(st.lists(st.integers(), unique=True, max_size=300), world_sizes)
def test_shares_are_disjoint(items: list[int], world_size: int) -> None:
    seen: set[int] = set()
    for share in all_shares(items, world_size):
        assert seen.isdisjoint(share)
        seen.update(share)


@given(items_lists, world_sizes)
def test_each_share_is_a_contiguous_run_in_input_order(items: list[int], world_size: int) -> None:
    start = 0
    for share in all_shares(items, world_size):
        assert share == items[start : start + len(share)]
        start += len(share)


@given(items_lists, world_sizes)
def test_sizes_differ_by_at_most_one_and_larger_shares_come_first(
    items: list[int], world_size: int
) -> None:
    sizes = [len(share) for share in all_shares(items, world_size)]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)
    assert len(sizes) == world_size


@given(st.integers(min_value=0, max_value=10_000), world_sizes)
def test_iterables_and_ranges_split_like_lists(count: int, world_size: int) -> None:
    rank = count % world_size
    expected = split_evenly(list(range(count)), world_size, rank)
    assert split_evenly(range(count), world_size, rank) == expected
    assert split_evenly(iter(range(count)), world_size, rank) == expected


def test_examples() -> None:
    assert all_shares(list(range(10)), 3) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert all_shares([1, 2], 4) == [[1], [2], [], []]
    assert split_evenly([], 1, 0) == []
    assert split_evenly("abcde", 2, 1) == ["d", "e"]


@pytest.mark.parametrize(
    ("world_size", "rank", "error", "message"),
    [
        (0, 0, RanksValueError, "world_size must be an int >= 1, got 0"),
        (2, 2, RanksValueError, "rank must be in range(world_size) = range(2), got 2"),
        (2, -1, RanksValueError, "rank must be an int >= 0, got -1"),
        (2.0, 0, RanksTypeError, "world_size must be an int >= 1, got 2.0 (float)"),
        (2, True, RanksTypeError, "rank must be an int >= 0, got True (bool)"),
        (2, "1", RanksTypeError, "rank must be an int >= 0, got '1' (str)"),
    ],
)
def test_bad_arguments(
    world_size: object, rank: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        split_evenly([1, 2, 3], world_size, rank)  # type: ignore[arg-type]
    assert str(caught.value) == message
