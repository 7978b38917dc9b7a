"""Malformed arguments of the job view: refused up front, named.

Each case is an argument of a public function given in a wrong form. The error
is the job view's (:class:`JobViewError`, also the built-in it refines), its
message names the argument, and nothing is written into the directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.jobview import JobStatistics, RankSeries, series_from_dir, write_job_view
from rankscribe.jobview.errors import JobViewError, JobViewParamTypeError, JobViewParamValueError

SERIES = {0: RankSeries(0, {"loss": [(1, 0.5), (2, 0.25)]})}


def _view(directory: Path, **overrides: Any) -> Any:
    arguments: dict[str, Any] = {"world_size": 1, **overrides}
    return write_job_view(directory, SERIES, **arguments)


class _Points:
    """A series whose rank is fine and whose scalars are given per case."""

    def __init__(self, scalars: Any, rank: Any = 0) -> None:
        self.rank = rank
        self.scalars = scalars


# (case, call on an empty dir, error class, words the message holds)
CASES: list[tuple[str, Callable[[Path], Any], type[Exception], str]] = [
    (
        "write_job_view missing=None",
        lambda d: _view(d, missing=None),
        JobViewParamTypeError,
        "missing must be a sequence of ranks",
    ),
    (
        "write_job_view missing=5",
        lambda d: _view(d, missing=5),
        JobViewParamTypeError,
        "missing must be a sequence of ranks",
    ),
    (
        "write_job_view missing='1'",
        lambda d: _view(d, missing="1"),
        JobViewParamTypeError,
        "missing must be a sequence of ranks",
    ),
    (
        "write_job_view failed=None",
        lambda d: _view(d, failed=None),
        JobViewParamTypeError,
        "failed must be a sequence of ranks",
    ),
    (
        "write_job_view failed=[True]",
        lambda d: _view(d, failed=[True]),
        JobViewParamValueError,
        "failed must hold ranks",
    ),
    (
        "write_job_view host='../x'",
        lambda d: _view(d, host="../x"),
        JobViewParamValueError,
        "host must be a non-empty file-name part",
    ),
    (
        "write_job_view host with NUL",
        lambda d: _view(d, host="node\0x"),
        JobViewParamValueError,
        "host must be a non-empty file-name part",
    ),
    (
        "write_job_view host=''",
        lambda d: _view(d, host=""),
        JobViewParamValueError,
        "host must be a non-empty file-name part",
    ),
    (
        "write_job_view host=5",
        lambda d: _view(d, host=5),
        JobViewParamTypeError,
        "host must be a str or None",
    ),
    (
        "write_job_view world_size=0",
        lambda d: write_job_view(d, {}, world_size=0),
        JobViewParamValueError,
        "world_size must be an int >= 1, got 0",
    ),
    (
        "write_job_view world_size='2'",
        lambda d: _view(d, world_size="2"),
        JobViewParamValueError,
        "world_size must be an int >= 1",
    ),
    (
        "write_job_view tensorboard='yes'",
        lambda d: _view(d, tensorboard="yes"),
        JobViewParamTypeError,
        "tensorboard must be a bool",
    ),
    (
        "write_job_view hparams=5",
        lambda d: _view(d, hparams=5),
        JobViewParamTypeError,
        "hparams must be a mapping or None",
    ),
    (
        "write_job_view metrics=[1]",
        lambda d: _view(d, metrics=[1]),
        JobViewParamTypeError,
        "metrics must be a mapping or None",
    ),
    (
        "write_job_view straggler_evidence=5",
        lambda d: _view(d, straggler_evidence=5),
        JobViewParamTypeError,
        "straggler_evidence must be a StragglerEvidence or None",
    ),
    (
        "write_job_view job_dir=None",
        lambda d: write_job_view(None, SERIES, world_size=1),
        JobViewParamTypeError,
        "job_dir must be a path",
    ),
    (
        "write_job_view job_dir with NUL",
        lambda d: write_job_view(f"{d}\0x", SERIES, world_size=1),
        JobViewParamValueError,
        "job_dir must be a non-empty path without NUL",
    ),
    (
        "series_from_dir rank='x'",
        lambda d: series_from_dir(d, "x"),
        JobViewParamTypeError,
        "rank must be an int >= 0, got 'x'",
    ),
    (
        "series_from_dir rank=-1",
        lambda d: series_from_dir(d, -1),
        JobViewParamValueError,
        "rank must be an int >= 0, got -1",
    ),
    (
        "series_from_dir rank=True",
        lambda d: series_from_dir(d, True),
        JobViewParamTypeError,
        "rank must be an int >= 0, got True",
    ),
    (
        "series_from_dir rank_dir=None",
        lambda d: series_from_dir(None, 0),
        JobViewParamTypeError,
        "rank_dir must be a path",
    ),
    (
        "JobStatistics.add not a series",
        lambda d: JobStatistics().add(5),
        JobViewParamTypeError,
        "series must have a rank and scalars",
    ),
    (
        "JobStatistics.add scalars a list",
        lambda d: JobStatistics().add(_Points([(1, 1.0)])),
        JobViewParamTypeError,
        "series.scalars must be a mapping",
    ),
    (
        "JobStatistics.add points not iterable",
        lambda d: JobStatistics().add(_Points({"a": 5})),
        JobViewParamTypeError,
        "series.scalars['a'] must be a list of (step, value) pairs",
    ),
    (
        "JobStatistics.add a tag not a str",
        lambda d: JobStatistics().add(_Points({5: []})),
        JobViewParamTypeError,
        "series.scalars keys must be str tags",
    ),
    (
        "JobStatistics.add a point of one item",
        lambda d: JobStatistics().add(_Points({"a": [(1,)]})),
        JobViewParamValueError,
        "series.scalars['a'] must hold (step, value) pairs",
    ),
    (
        "JobStatistics.add str step and value",
        lambda d: JobStatistics().add(_Points({"a": [("1", "2.0")]})),
        JobViewParamValueError,
        "series.scalars['a'] must hold (step, value) pairs",
    ),
    (
        "JobStatistics.add a float step",
        lambda d: JobStatistics().add(_Points({"a": [(1.5, 2.0)]})),
        JobViewParamValueError,
        "series.scalars['a'] must hold (step, value) pairs",
    ),
    (
        "JobStatistics.add a bool value",
        lambda d: JobStatistics().add(_Points({"a": [(1, True)]})),
        JobViewParamValueError,
        "series.scalars['a'] must hold (step, value) pairs",
    ),
    (
        "JobStatistics.add a str rank",
        lambda d: JobStatistics().add(_Points({}, rank="0")),
        JobViewParamValueError,
        "a series' rank must be an int >= 0",
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
    assert isinstance(caught.value, JobViewError)
    assert words in str(caught.value)
    assert os.listdir(tmp_path) == []


def test_job_statistics_keep_nothing_of_a_refused_series() -> None:
    statistics = JobStatistics()
    with pytest.raises(JobViewParamValueError, match=r"scalars\['b'\]"):
        statistics.add(_Points({"a": [(1, 1.0)], "b": [(2, "x")]}))
    assert statistics.tags == {} and statistics.ranks == []
    statistics.add(RankSeries(0, {"a": [(1, 1.0)]}))  # the rank can still be added, once
    assert statistics.ranks == [0] and list(statistics.tags) == ["a"]


def test_job_statistics_take_numpy_numbers_and_list_pairs() -> None:
    import numpy as np

    statistics = JobStatistics()
    statistics.add(_Points({"a": [[np.int64(1), np.float32(0.5)], (2, 1)]}))
    assert statistics.tags["a"].steps.tolist() == [1, 2]
    assert statistics.tags["a"].mean.tolist() == [0.5, 1.0]
