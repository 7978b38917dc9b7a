"""Malformed arguments of the offline merge: refused up front, named (the job view's:
tests/jobview/test_bad_arguments.py).

Each case is an argument of a public function given in a wrong form. The error
is the package's (:class:`LineageError`, also the built-in it refines), its
message names the argument, and nothing is written into the directory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import LineageError, merge_run_dir
from rankscribe.lineage.errors import (
    LineageMergeError,
    LineageParamTypeError,
    LineageParamValueError,
)
from rankscribe.writer import SummaryRecord

# (case, call on an empty dir, error class, words the message holds)
CASES: list[tuple[str, Callable[[Path], Any], type[Exception], str]] = [
    (
        "merge_run_dir world_size=1.5",
        lambda d: merge_run_dir(d, world_size=1.5),
        LineageParamTypeError,
        "world_size must be an int >= 1 or None, got 1.5",
    ),
    (
        "merge_run_dir world_size=0",
        lambda d: merge_run_dir(d, world_size=0),
        LineageParamValueError,
        "world_size must be an int >= 1 or None, got 0",
    ),
    (
        "merge_run_dir world_size=True",
        lambda d: merge_run_dir(d, world_size=True),
        LineageParamTypeError,
        "world_size must be an int >= 1 or None, got True",
    ),
    (
        "merge_run_dir run_dir=5",
        lambda d: merge_run_dir(5),
        LineageParamTypeError,
        "run_dir must be a path",
    ),
    (
        "merge_run_dir run_dir=None",
        lambda d: merge_run_dir(None),
        LineageParamTypeError,
        "run_dir must be a path",
    ),
    (
        "merge_run_dir run_dir with NUL",
        lambda d: merge_run_dir(f"{d}\0x"),
        LineageParamValueError,
        "run_dir must be a non-empty path without NUL",
    ),
    (
        "merge_run_dir timeout=inf",
        lambda d: merge_run_dir(d, timeout=math.inf),
        LineageMergeError,
        "timeout must be a finite number of seconds >= 0, got inf",
    ),
    (
        "merge_run_dir timeout='1'",
        lambda d: merge_run_dir(d, timeout="1"),
        LineageParamTypeError,
        "timeout must be a finite number of seconds",
    ),
    (
        "merge_run_dir host='a/b'",
        lambda d: merge_run_dir(d, host="a/b"),
        LineageParamValueError,
        "host must be a non-empty file-name part",
    ),
    (
        "merge_run_dir job_view=None",
        lambda d: merge_run_dir(d, job_view=None),
        LineageParamTypeError,
        "job_view must be a bool",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "words"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_malformed_argument_is_refused_by_name(
    tmp_path: Path, call: Callable[[Path], Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as caught:
        call(tmp_path)
    assert isinstance(caught.value, LineageError)
    assert words in str(caught.value)
    assert os.listdir(tmp_path) == []


def _rank_with_loss(directory: Path, rank: int) -> None:
    with SummaryRecord(directory / f"rank_{rank}", rank=rank) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", 1.0 / step)
            record.record(step)


def test_merge_with_a_world_size_below_the_ranks_found_names_both(tmp_path: Path) -> None:
    for rank in (0, 1):
        _rank_with_loss(tmp_path, rank)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(LineageMergeError) as caught:
        merge_run_dir(tmp_path, world_size=1)
    message = str(caught.value)
    assert "world_size 1 is too small" in message
    assert "ranks 0, 1" in message and "at least 2" in message
    assert sorted(os.listdir(tmp_path)) == before  # no job file, no merged lineage
    assert merge_run_dir(tmp_path, world_size=2).ranks_missing == [0, 1]  # scalars only
