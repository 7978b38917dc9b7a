"""Progress: plain lines when the output is not a terminal, a tqdm bar on one, rank 0 only."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from rankscribe.collector import Progress, RunContext, SummaryCollector, TrainLoop, TrainSession
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import RankInfo


class Clock:
    """Seconds that advance only when a step says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a tty does."""

    def isatty(self) -> bool:
        return True


def _rank(rank: int) -> RankInfo:
    return RankInfo(
        rank=rank, world_size=2, local_rank=rank, local_size=2, host="h", launcher="pmi"
    )


def _train(
    progress: Progress,
    clock: Clock | None = None,
    epochs: int = 2,
    batches: int = 5,
    seconds_per_step: float = 0.5,
) -> None:
    with TrainSession([progress], epochs=epochs, steps_per_epoch=batches) as session:
        for _ in session.epochs():
            for _ in range(batches):
                if clock is not None:
                    clock.now += seconds_per_step
                session.step(None, 1.0 / (session.params.cur_step_num + 1))


def test_lines_every_n_steps_with_epoch_step_loss_and_rate() -> None:
    stream, clock = io.StringIO(), Clock()
    _train(
        Progress(every_steps=4, every_seconds=None, stream=stream, rank_info=_rank(0), clock=clock),
        clock,
    )
    assert stream.getvalue().splitlines() == [
        "epoch 1/2  step 4/10  rank 0 loss 0.2500  2.0 steps/s",
        "epoch 2/2  step 8/10  rank 0 loss 0.1250  2.0 steps/s",
        "epoch 2/2  step 10/10  rank 0 loss 0.1000  2.0 steps/s",
        "trained 10 steps in 5.0 s (2.0 steps/s)",
    ]


def test_lines_every_n_seconds() -> None:
    stream, clock = io.StringIO(), Clock()
    _train(
        Progress(every_seconds=2.0, stream=stream, rank_info=_rank(0), clock=clock),
        clock,
        epochs=1,
        batches=6,
        seconds_per_step=0.75,
    )
    lines = stream.getvalue().splitlines()
    # 0.75 s a step: 2 s have passed at step 3 (2.25 s) and at step 6 (2.25 s later)
    assert lines == [
        "epoch 1/1  step 3/6  rank 0 loss 0.3333  1.3 steps/s",
        "epoch 1/1  step 6/6  rank 0 loss 0.1667  1.3 steps/s",
        "trained 6 steps in 4.5 s (1.3 steps/s)",
    ]


def test_a_terminal_gets_a_tqdm_bar() -> None:
    stream = Terminal()
    _train(Progress(stream=stream, rank_info=_rank(0)))
    output = stream.getvalue()
    assert "\r" in output  # a bar redrawn in place, not lines
    assert "10/10" in output
    assert "epoch=2/2" in output and "rank 0 loss=0.1000" in output
    assert "step/s" in output  # tqdm's rate, in steps
    assert "trained 10 steps" not in output


def test_write_goes_above_the_bar_and_a_subclass_adds_its_line() -> None:
    class WithAccuracy(Progress):
        def epoch_end(self, run_context: RunContext) -> None:
            self.write(f"epoch {run_context.original_args().cur_epoch_num} accuracy 0.9")

    for stream in (Terminal(), io.StringIO()):
        _train(WithAccuracy(every_seconds=None, stream=stream, rank_info=_rank(0)))
        assert "epoch 1 accuracy 0.9\n" in stream.getvalue()
        assert "epoch 2 accuracy 0.9\n" in stream.getvalue()


def test_the_loss_is_labelled_rank_0_only_on_a_job_of_several_ranks() -> None:
    """Rank 0's own loss, not the ranks' mean that the lineage records (docs/integrations.md)."""
    alone = RankInfo(rank=0, world_size=1, local_rank=0, local_size=1, host="h", launcher="single")
    stream, clock = io.StringIO(), Clock()
    progress = Progress(
        every_steps=10, every_seconds=None, stream=stream, rank_info=alone, clock=clock
    )
    _train(progress, clock)
    assert stream.getvalue().splitlines()[0] == "epoch 2/2  step 10/10  loss 0.1000  2.0 steps/s"


@pytest.mark.parametrize("stream_type", [io.StringIO, Terminal])
def test_other_ranks_show_nothing(stream_type: type[io.StringIO]) -> None:
    stream = stream_type()
    progress = Progress(every_steps=1, stream=stream, rank_info=_rank(1))
    _train(progress)
    progress.write("a line of a subclass")
    assert stream.getvalue() == ""
    assert not progress.enabled


def test_an_unreadable_loss_is_a_dash(tmp_path: Path) -> None:
    stream = io.StringIO()
    with TrainSession(
        [Progress(every_steps=1, stream=stream, rank_info=_rank(0))], epochs=1, steps_per_epoch=1
    ) as session:
        for _ in session.epochs():
            session.step(None, "not a number")
    assert stream.getvalue().splitlines()[0].startswith("epoch 1/1  step 1/1  rank 0 loss -  ")


def test_with_train_loop_and_the_collector(model: Any, tmp_path: Path) -> None:
    data = model(3)
    stream = io.StringIO()
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        1,
        data.dataset,
        callbacks=[
            SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": None}),
            Progress(every_steps=3, stream=stream, rank_info=_rank(0)),
        ],
    )
    assert stream.getvalue().splitlines()[0].startswith("epoch 1/1  step 3/3  rank 0 loss 0.5000  ")


@pytest.mark.parametrize(
    ("arguments", "error", "parts"),
    [
        ({"every_steps": 0}, CollectorValueError, ["'every_steps'", "greater than 0", "0"]),
        ({"every_steps": 1.5}, CollectorTypeError, ["'every_steps'", "int", "float"]),
        ({"every_seconds": -1}, CollectorValueError, ["'every_seconds'", "-1"]),
        ({"every_seconds": float("inf")}, CollectorValueError, ["'every_seconds'", "inf"]),
        ({"every_seconds": "10"}, CollectorTypeError, ["'every_seconds'", "float", "str"]),
        ({"stream": 3}, CollectorTypeError, ["'stream'", "int"]),
        ({"rank_info": 0}, CollectorTypeError, ["'rank_info'", "RankInfo", "int"]),
    ],
)
def test_bad_arguments(arguments: dict[str, Any], error: type, parts: list[str]) -> None:
    with pytest.raises(error) as raised:
        Progress(**arguments)
    for part in ["Progress", *parts]:
        assert part in str(raised.value)


def test_the_arguments_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Progress(10.0)  # type: ignore[misc]
