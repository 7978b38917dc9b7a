"""A query reads a base dir's lineage index in time linear in the index, whatever it holds.

The index (``.rankscribe-lineage-index.npz``) is read by every query of its base dir: one
planted or damaged into a hostile shape must cost no more than its size. Each shape below
is an index of one real run and many runs that are not on disk, at 1, 4 and 16 MB
(``tests/_support/growth.py``), written as the index the query last wrote, with its columns
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

from tests._support.growth import MEGABYTE
from tests.lineage._index_bases import (
    HOSTILE_INDEX_SHAPES,
    assert_index_read_linearly,
    graph_base,
    index_bytes,
)


@pytest.mark.growth
@pytest.mark.parametrize("shape", HOSTILE_INDEX_SHAPES)
def test_a_hostile_index_is_read_in_linear_time(
    tmp_path: Path, lw: Any, shape: Callable[[dict[str, Any], int], dict[str, Any]]
) -> None:
    assert_index_read_linearly(
        graph_base(tmp_path, lw, count=1),
        shape,
        index_bytes,
        # Every shape from 1 MB, the one of many metric keys too (3.3 CPU s at 16 MB): from
        # a quarter of that, its step out of the processor's cache (256 KB to 1 MB here,
        # 6.8x; 1 to 4 MB on CI's machine, 6.05x) fell in the step the test checks.
        size=MEGABYTE,
    )
