"""Malformed arguments of the collector's classes: refused at construction, named.

A wrong argument that is only noticed at the first step stops a training run
minutes or hours in; these are refused when the object is made, with the
package's error (also the built-in it refines) naming the argument.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from rankscribe.collector import Progress, TrainLoop, TrainSession
from rankscribe.collector.errors import CollectorError, CollectorTypeError, CollectorValueError
from rankscribe.ranks import RankInfo


def _step(batch: Any) -> float:
    return 0.0


# (case, construction, error class, words the message holds)
CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "Progress clock=None",
        lambda: Progress(clock=None),
        CollectorTypeError,
        "the argument 'clock' must be a function, but got None (NoneType).",
    ),
    (
        "Progress clock=5",
        lambda: Progress(clock=5),
        CollectorTypeError,
        "the argument 'clock' must be a function, but got 5 (int).",
    ),
    (
        "TrainSession callbacks=None",
        lambda: TrainSession(None),
        CollectorTypeError,
        "the argument 'callbacks' must be a Callback or a list of them",
    ),
    (
        "TrainSession callbacks=5",
        lambda: TrainSession(5),
        CollectorTypeError,
        "the argument 'callbacks' must be a Callback or a list of them",
    ),
    (
        "TrainSession parallel_mode=5",
        lambda: TrainSession([], parallel_mode=5),
        CollectorTypeError,
        "the argument 'parallel_mode' must be a str or None, but got 5 (int).",
    ),
    (
        "TrainSession parallel_mode=''",
        lambda: TrainSession([], parallel_mode=""),
        CollectorValueError,
        "the argument 'parallel_mode' must be a non-empty str or None",
    ),
    (
        "TrainSession train_dataset=5",
        lambda: TrainSession([], train_dataset=5),
        CollectorTypeError,
        "the argument 'train_dataset' must be an iterable or None, but got 5 (int).",
    ),
    (
        "TrainSession epochs=True",
        lambda: TrainSession([], epochs=True),
        CollectorValueError,
        "the argument 'epochs' must be an int >= 1, but got True",
    ),
    (
        "TrainLoop parallel_mode=5",
        lambda: TrainLoop(_step, parallel_mode=5),
        CollectorTypeError,
        "the argument 'parallel_mode' must be a str or None, but got 5 (int).",
    ),
    (
        "TrainLoop step_fn=None",
        lambda: TrainLoop(None),
        CollectorTypeError,
        "the argument 'step_fn' must be a function",
    ),
]


@pytest.mark.parametrize(
    ("make", "error", "words"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_malformed_argument_is_refused_at_construction(
    make: Callable[[], Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as caught:
        make()
    assert isinstance(caught.value, CollectorError)
    assert words in str(caught.value)


def test_a_good_clock_and_session_still_work() -> None:
    ticks = iter(float(second) for second in range(100))
    stream = io.StringIO()
    rank_0 = RankInfo(rank=0, world_size=1, local_rank=0, local_size=1, host="h", launcher="pmi")
    progress = Progress(
        every_steps=1,
        every_seconds=None,
        stream=stream,
        rank_info=rank_0,
        clock=lambda: next(ticks),
    )
    with TrainSession(
        [progress], train_dataset=[1, 2], parallel_mode="data_parallel", device_number=1
    ) as session:
        assert session.params.parallel_mode == "data_parallel"
        assert session.params.batch_num == 2
        for _ in session.epochs():
            for batch in (1, 2):
                session.step(batch, 0.5)
    assert stream.getvalue().splitlines()[:2] == [
        "epoch 1/1  step 1/2  loss 0.5000  1.0 steps/s",
        "epoch 1/1  step 2/2  loss 0.5000  1.0 steps/s",
    ]
