"""A query reads a base dir's lineage index in time linear in the index, whatever it holds.

The index (``.rankscribe-lineage-index.npz``) is read by every query of its base dir: one
planted or damaged into a hostile shape must cost no more than its size. Each shape below
is an index of one real run and many runs that are not on disk, at 1, 4 and 16 MB (one
run of many metric keys, read a key at a time, at a quarter of those;
``tests/_support/growth.py``), written as the index the query last wrote, with its columns
multiplied: the query reads it whole, finds the missing runs gone and answers with the one
run there is. The shapes: many runs; a metric key of its own for every run (the sparse
columns: one key per run is the worst case of their layout); warnings on every run; one run
with a great many metric keys. The same index with its columns stored as ``.npy`` arrays is
timed in test_index_encoding.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._support.growth import MEGABYTE, SLOW_PARSE_BASE
from tests.lineage._index_bases import (
    HOSTILE_INDEX_SHAPES,
    assert_index_read_linearly,
    graph_base,
    index_bytes,
    one_run_of_many_metrics,
)

#: The shapes read a key at a time in Python (6 CPU s at 16 MB) start smaller.
SIZES: dict[Callable[[dict[str, Any], int], dict[str, Any]], int] = {
    one_run_of_many_metrics: SLOW_PARSE_BASE
}


@pytest.mark.growth
@pytest.mark.parametrize("shape", HOSTILE_INDEX_SHAPES)
def test_a_hostile_index_is_read_in_linear_time(
    tmp_path: Path, lw: Any, shape: Callable[[dict[str, Any], int], dict[str, Any]]
) -> None:
    assert_index_read_linearly(
        graph_base(tmp_path, lw, count=1),
        shape,
        index_bytes,
        size=SIZES.get(shape, MEGABYTE),
    )
