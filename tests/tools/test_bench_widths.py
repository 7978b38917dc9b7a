"""tools/bench/collector.py: the torch MLP rows' widths, found so that the bare step takes
what the row says (``width_for``), or given (``--widths``)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from tests._support.tool_modules import load_tool


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_tool("bench/collector.py", "collector_bench_widths")


def _machine(overhead: float, per_work: float) -> tuple[Callable[[int], float], list[int]]:
    """A machine whose MLP step takes ``overhead + per_work * w (w + 794)`` seconds, and the
    widths it was asked to time."""
    asked: list[int] = []

    def measure(width: int) -> float:
        asked.append(width)
        return overhead + per_work * width * (width + 794)

    return measure, asked


def _step(overhead: float, per_work: float, width: int) -> float:
    return overhead + per_work * width * (width + 794)


def test_a_width_whose_step_is_far_from_the_target_is_moved_to_it_in_two_timings(
    bench: ModuleType,
) -> None:
    # A machine on which width 1408 takes 5 ms, with a per-step overhead (the DataLoader,
    # the optimizer's Python) of a fifth of the target.
    per_work = 0.003 / (1408 * (1408 + 794))
    measure, asked = _machine(0.002, per_work)
    width = bench.width_for(0.010, measure, 1408)
    assert len(asked) == 2
    assert width % bench.WIDTH_GRAIN == 0
    # The line through the two timings is the machine's: the width is the target's, to a
    # grain, w (w + 794) = 0.008 / per_work, w = 2506 (the first timing alone, its overhead
    # taken for work, gives 2125: a step of 8.0 ms).
    assert abs(_step(0.002, per_work, width) - 0.010) <= (
        _step(0.002, per_work, width + bench.WIDTH_GRAIN) - _step(0.002, per_work, width)
    )
    assert width in (2496, 2528)


def test_a_width_about_its_target_stays(bench: ModuleType) -> None:
    # 1.4 ms for a "~1 ms" row: within the tolerance, timed once, kept.
    measure, asked = _machine(0.0014 - 2.6e-10 * 384 * (384 + 794), 2.6e-10)
    assert bench.width_for(0.001, measure, 384) == 384
    assert asked == [384]
    # 1.6 ms is not about 1 ms: moved (narrower).
    measure, asked = _machine(0.0016 - 2.6e-10 * 384 * (384 + 794), 2.6e-10)
    assert bench.width_for(0.001, measure, 384) < 384
    assert len(asked) == 2
    # Nor is 0.6 ms: moved (wider).
    measure, asked = _machine(0.0006 - 2.6e-10 * 384 * (384 + 794), 2.6e-10)
    assert bench.width_for(0.001, measure, 384) > 384
    assert len(asked) == 2


def test_a_found_width_stays_within_its_range_of_the_fixed_one(bench: ModuleType) -> None:
    # A step that is mostly the loop's overhead: 1.6 ms at width 384, 1.55 ms at the first
    # estimate; the line through them reaches 1 ms at no width. Kept at 384 / 2.
    timings = iter([0.0016, 0.00155])
    assert bench.width_for(0.001, lambda _width: next(timings), 384) == 192
    # A far slower machine: the width is at most twice the fixed one.
    measure, _ = _machine(0.0, 2.6e-9)
    assert bench.width_for(0.010, measure, 384) == 768


def test_a_second_timing_no_slower_than_the_first_keeps_the_first_estimate(
    bench: ModuleType,
) -> None:
    # Noise: the wider run read as fast as the first; no line can be drawn through them.
    timings = iter([0.005, 0.005])
    width = bench.width_for(0.010, lambda _width: next(timings), 1408)
    # The first estimate: twice the work of width 1408, at no overhead.
    work = 2 * 1408 * (1408 + 794)
    expected = (((794**2 + 4 * work) ** 0.5 - 794) / 2) / bench.WIDTH_GRAIN
    assert width == round(expected) * bench.WIDTH_GRAIN


def test_a_target_that_is_not_a_step_is_refused(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="target must be a step's seconds > 0"):
        bench.width_for(0.0, lambda _width: 0.001, 384)


def test_widths_given_on_the_command_line_are_used_and_checked(bench: ModuleType) -> None:
    settings = bench.arguments(["--rows", "mlp-1ms,mlp-10ms", "--widths", "256,2048"])
    assert settings.widths == {"w1": 256, "w10": 2048}
    assert bench.arguments(["--rows", "mlp-1ms"]).widths is None  # found at the run
    for bad in ("256", "256,0", "a,b", "256,2048,4096"):
        with pytest.raises(SystemExit):
            bench.arguments(["--widths", bad])


def test_the_rows_titles_name_the_widths_they_train(bench: ModuleType) -> None:
    widths = {"w1": 320, "w10": 2112}
    titles = {key: bench.ROWS[key].title.format_map(widths) for key in bench.MLP_ROWS}
    assert titles["mlp-1ms"] == "torch MLP ~1 ms step (width 320), TrainSession"
    assert titles["mlp-10ms"] == "torch MLP ~10 ms step (width 2112), TrainSession"
    assert "2112" in titles["trainloop"]
    assert "2112" in titles["lightning"]
