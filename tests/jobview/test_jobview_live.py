"""The live job view's pieces that live in rankscribe-lineage (docs/job-view.md, "Live", "Tree").

- partials: one interval of a group of ranks, merged in any grouping, give the
  statistics the whole job's JobStatistics gives; their wire format is data
  only and refuses what it did not write;
- LiveJobView (rank 0): appends only steps every rank of the interval passed,
  names ranks missing from an interval and carries on, drops points that come
  for steps already written (with a warning), writes intervals together when
  it falls behind (nothing lost), and its files read at every moment;
- live_lines: what ``rankscribe-lineage show`` prints of a running job.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.jobview import JobStatistics, LiveJobView, RankSeries, live_lines, write_job_view
from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.jobview.feed import FINGERPRINT_TAG, GRADIENT_NORM_TAG_PREFIX, STEP_TIME_TAG
from rankscribe.jobview.protocol import (
    LIVE_SPANS_KEY,
    LIVE_STATE_NAME,
    JobPartial,
    PartialFormatError,
    ranges_text,
    state_ended,
    state_onsets,
)
from rankscribe.writer.reader import scalars
from tests._support.board_texts import board_texts
from tests._support.npz_files import read_archive, write_archive

TAGS = ("loss/auto", "metric/acc", STEP_TIME_TAG)
# docs/job-view.md, "Live": rank 0 waits for every rank heard from in the last 3 intervals.
PATIENCE = 3


def rank_points(
    rank: int, steps: range, *, slow: float = 0.0
) -> dict[str, list[tuple[int, float]]]:
    rng = np.random.default_rng(rank)
    points: dict[str, list[tuple[int, float]]] = {}
    for tag in TAGS:
        values = rng.random(len(steps)).astype(np.float32).astype(float)
        if tag == STEP_TIME_TAG:
            values = 0.1 + 0.001 * values + slow
        points[tag] = list(zip(steps, values.tolist(), strict=True))
    return points


def job_points(directory: Path) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for path in directory.glob("*.job.*_MS"):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def tree_merge(partials: list[JobPartial], fan_in: int) -> JobPartial:
    """Merge as a tree of the given fan-in does, through the wire format at every hop."""
    nodes = [JobPartial.from_bytes(partial.to_bytes()) for partial in partials]
    for parent in reversed(range(len(nodes))):
        for child in range(fan_in * parent + 1, min(fan_in * parent + fan_in + 1, len(nodes))):
            nodes[parent].merge(JobPartial.from_bytes(nodes[child].to_bytes()))
    return nodes[0]


@pytest.mark.parametrize("fan_in", [2, 3, 8])
def test_a_tree_of_partials_gives_the_statistics_of_the_whole_job(fan_in: int) -> None:
    ranks = 11
    steps = range(1, 41)
    partials = [JobPartial.of_rank(rank, rank_points(rank, steps)) for rank in range(ranks)]
    merged = tree_merge(partials, fan_in)
    whole = JobStatistics()
    for rank in range(ranks):
        whole.add(RankSeries(rank, rank_points(rank, steps)))
    assert merged.ranks == list(range(ranks))
    assert sorted(merged.tags) == sorted(whole.tags)
    for tag, expected in whole.tags.items():
        got = merged.tags[tag]
        np.testing.assert_array_equal(got.steps, expected.steps)
        np.testing.assert_array_equal(got.count, expected.count)
        np.testing.assert_array_equal(got.min_rank, expected.min_rank)
        np.testing.assert_array_equal(got.max_rank, expected.max_rank)
        np.testing.assert_allclose(got.mean, expected.mean, rtol=1e-12)
        np.testing.assert_allclose(got.std, expected.std, rtol=1e-9, atol=1e-15)
    # The step time travels per rank too (the straggler rule needs each rank's value).
    assert sorted(merged.per_rank[STEP_TIME_TAG]) == list(range(ranks))


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"XXXXXX" + data[6:],
        lambda data: data[:-3],
        lambda data: data + b"\0",
        lambda data: data[:20],
        lambda data: data[:15] + b"}" + data[16:],
        lambda data: data.replace(struct.pack("<d", 0.25), struct.pack("<d", 9.0)),
        lambda data: write_archive({"format": "rankscribe-job-partial", "version": 3}, []),
    ],
    ids=[
        "magic",
        "short-by-three",
        "one-byte-more",
        "cut-short",
        "a-byte-changed",
        "a-value-changed",
        "another-version",
    ],
)
def test_a_damaged_or_foreign_message_is_refused(damage: object) -> None:
    data = JobPartial.of_rank(3, {"loss": [(1, 0.5), (2, 0.25)]}).to_bytes()
    damaged = damage(data)  # type: ignore[operator]
    assert damaged != data
    with pytest.raises(PartialFormatError) as caught:
        JobPartial.from_bytes(damaged)
    assert isinstance(caught.value, ValueError)


def test_the_wire_format_is_data_only() -> None:
    data = JobPartial.of_rank(0, {"a": [(1, 1.0)]}).to_bytes()
    assert b"pickle" not in data and not data.startswith(b"\x80")  # not a pickle
    header, arrays = read_archive(data)  # an .npz: numpy reads it
    assert (header["format"], header["version"]) == ("rankscribe-job-partial", 6)
    assert [array.dtype.str for array in arrays] == ["<i8", "<f8", "<f4"]  # int, float, float32
    assert arrays[0].tolist() == [1] and arrays[1].tolist() == [1.0]


def test_rank0_writes_only_steps_every_rank_of_the_interval_passed(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=2)
    first = JobPartial.of_rank(0, rank_points(0, range(1, 11)))
    first.merge(JobPartial.of_rank(1, rank_points(1, range(1, 6))))
    view.add(first)
    assert view.write()
    written = job_points(tmp_path)
    assert sorted(written["loss/auto/mean"]) == [1, 2, 3, 4, 5]
    assert set(written["loss/auto/ranks"].values()) == {2.0}
    second = JobPartial.of_rank(1, rank_points(1, range(6, 11)))
    second.last_steps[0] = 10  # rank 0 reported again, with nothing new
    view.add(second)
    view.write()
    written = job_points(tmp_path)
    assert sorted(written["loss/auto/mean"]) == list(range(1, 11))
    assert set(written["loss/auto/ranks"].values()) == {2.0}  # no step written twice, half
    expected = np.mean(
        [
            dict(rank_points(0, range(1, 11))["loss/auto"])[8],
            dict(rank_points(1, range(6, 11))["loss/auto"])[8],
        ]
    )
    assert written["loss/auto/mean"][8] == pytest.approx(expected, rel=1e-6)
    verdicts = view.finish()
    assert verdicts["job/last_step/0"] == verdicts["job/last_step/1"] == 10
    assert verdicts["job/missing_ranks"] == ""
    assert all(os.stat(path).st_mode & 0o777 == 0o400 for path in view.paths)


def test_a_rank_without_timings_is_named_untimed(tmp_path: Path) -> None:
    # A collector with step_times=False: rank 1 sends a loss but no timing at all.
    view = LiveJobView(tmp_path, world_size=2)
    partial = JobPartial.of_rank(0, rank_points(0, range(1, 11)))
    untimed = rank_points(1, range(1, 11))
    del untimed[STEP_TIME_TAG]
    partial.merge(JobPartial.of_rank(1, untimed))
    view.add(partial)
    assert view.write()
    verdicts = view.finish()
    assert verdicts["job/untimed_ranks"] == "1"
    assert verdicts["job/straggler_rank"] == -1
    assert verdicts["job/last_step/1"] == 10


@pytest.mark.parametrize(("step_seconds", "named"), [(0.01, -1), (0.3, 1)])
def test_the_live_view_reads_a_last_step_against_what_a_rank_keeps_unwritten(
    tmp_path: Path, step_seconds: float, named: int
) -> None:
    """Rank 1 stopped 50 steps before rank 0: half a second of 10 ms steps, which a rank
    killed may not have written (undetermined); 15 s of 0.3 s steps, written at once."""
    view = LiveJobView(tmp_path, world_size=2)
    partial = JobPartial.of_rank(
        0, {STEP_TIME_TAG: [(step, step_seconds) for step in range(1, 201)]}
    )
    partial.merge(
        JobPartial.of_rank(1, {STEP_TIME_TAG: [(step, step_seconds) for step in range(1, 151)]})
    )
    view.add(partial)
    view.write()
    verdicts = view.finish()
    assert (verdicts["job/last_step/0"], verdicts["job/last_step/1"]) == (200, 150)
    assert verdicts["job/stopped_first_rank"] == named
    assert verdicts["job/stopped_first_evidence"] == ("undetermined" if named < 0 else "last_step")


def test_the_last_write_gives_up_on_a_write_stuck_in_the_filesystem(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=1)
    view.add(JobPartial.of_rank(0, rank_points(0, range(1, 6))))
    stuck, release = threading.Event(), threading.Event()
    write_now = view._write

    def hung_filesystem(final: bool) -> bool:  # the background writer's write never returns
        stuck.set()
        release.wait(30)
        return write_now(final)

    view._write = hung_filesystem  # type: ignore[method-assign]
    background = threading.Thread(target=view.write)
    background.start()
    assert stuck.wait(10)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=re.escape(str(tmp_path))) as raised:
        view.finish(timeout=0.3)
    assert time.monotonic() - started < 5
    assert isinstance(raised.value, OSError)
    assert "rankscribe-lineage merge" in str(raised.value)
    view._write = write_now  # type: ignore[method-assign]
    release.set()
    background.join(10)
    view.finish()  # once the filesystem answers, nothing recorded is lost
    assert sorted(job_points(tmp_path)["loss/auto/mean"]) == [1, 2, 3, 4, 5]


def test_a_write_timeout_must_be_finite_seconds(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=1)
    with pytest.raises(JobViewParamValueError, match="timeout"):
        view.write(timeout=float("inf"))


def test_a_silent_rank_holds_the_file_back_a_few_intervals_then_is_left_behind(
    tmp_path: Path,
) -> None:
    view = LiveJobView(tmp_path, world_size=4)
    for index, first in enumerate((1, 21, 41)):
        interval = JobPartial()
        for rank in (0, 1, 3):  # rank 2 died
            interval.merge(
                JobPartial.of_rank(
                    rank, rank_points(rank, range(first, first + 20)), last_step=first - 1
                )
            )
        view.add(interval, missing=[2])
        written = view.write()
        if index < PATIENCE - 1:
            # It may only be late: the steps wait for it (nothing written yet).
            assert not written and job_points(tmp_path) == {}
    points = job_points(tmp_path)
    assert sorted(points["metric/acc/mean"]) == list(range(1, 61))
    assert set(points["metric/acc/ranks"].values()) == {3.0}
    state = json.loads((tmp_path / LIVE_STATE_NAME).read_text())
    assert state["missing_in_interval"] == "2"
    assert state["ranks_in_interval"] == 3
    assert state["verdicts"]["job/missing_ranks"] == "2"
    lines = live_lines(tmp_path)
    assert "interval 3" in lines[0] and "3 of 4 ranks" in lines[0] and "missing: 2" in lines[0]
    assert "last step: ranks 0,1,3: 60" in lines
    assert "missing: rank 2" in lines


def test_a_rank_late_for_one_interval_is_waited_for(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=2)
    view.add(JobPartial.of_rank(0, rank_points(0, range(1, 11))), missing=[1])
    assert not view.write()  # rank 1 is late, not gone: its steps wait
    late = JobPartial.of_rank(1, rank_points(1, range(1, 11)))
    late.last_steps[0] = 10
    view.add(late)
    view.write()
    assert set(job_points(tmp_path)["loss/auto/ranks"].values()) == {2.0}


def test_points_for_steps_already_written_are_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    view = LiveJobView(tmp_path, world_size=2)
    for first in range(1, 1 + 10 * PATIENCE, 10):  # rank 1 silent for PATIENCE intervals
        view.add(
            JobPartial.of_rank(0, rank_points(0, range(first, first + 10)), last_step=first - 1),
            missing=[1],
        )
        view.write()
    written_through = 10 * PATIENCE
    back = JobPartial.of_rank(1, rank_points(1, range(1, written_through + 3)))
    back.merge(
        JobPartial.of_rank(
            0,
            rank_points(0, range(written_through + 1, written_through + 3)),
            last_step=written_through,
        )
    )
    with caplog.at_level(logging.WARNING):
        view.add(back)
    assert "already written" in caplog.text
    view.finish()
    written = job_points(tmp_path)
    # The steps written while rank 1 was silent have rank 0 alone; the rest both.
    assert [written["loss/auto/ranks"][step] for step in range(1, written_through + 3)] == (
        [1.0] * written_through + [2.0] * 2
    )
    assert view.dropped_points == written_through * len(TAGS)


def test_intervals_a_slow_filesystem_missed_are_written_together_and_complete(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    view = LiveJobView(tmp_path, world_size=2)
    for start in (1, 11, 21):  # three intervals arrive while the writer is busy
        interval = JobPartial.of_rank(
            0, rank_points(0, range(start, start + 10)), last_step=start - 1
        )
        interval.merge(
            JobPartial.of_rank(1, rank_points(1, range(start, start + 10)), last_step=start - 1)
        )
        view.add(interval)
    with caplog.at_level(logging.WARNING):
        view.write()
    assert "fell behind" in caplog.text and "intervals 1-3" in caplog.text
    written = job_points(tmp_path)
    assert sorted(written["loss/auto/mean"]) == list(range(1, 31))
    assert set(written["loss/auto/ranks"].values()) == {2.0}


def test_a_straggler_and_a_diverged_rank_are_judged_interval_by_interval(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=4)
    for start in (1, 51):
        interval = JobPartial()
        for rank in range(4):
            points = rank_points(rank, range(start, start + 50), slow=0.05 if rank == 2 else 0)
            fingerprints = [
                (step, 7.0 if rank != 1 or step < 60 else 8.0)
                for step in range(start, start + 50, 5)
            ]
            points["rankscribe/param_fingerprint"] = fingerprints
            interval.merge(JobPartial.of_rank(rank, points, last_step=start - 1))
        view.add(interval)
        view.write()
    verdicts = view.finish()
    assert verdicts["job/straggler_rank"] == 2
    assert verdicts["job/straggler_excess"] == pytest.approx(0.5, abs=0.03)
    assert verdicts["job/divergence_check"] == "checked"
    assert verdicts["job/diverged_ranks"] == "1"
    assert verdicts["job/diverged_step/1"] == 61
    written = job_points(tmp_path)
    assert written["job/straggler_rank"][100] == 2.0  # the verdicts so far, as job scalars
    assert written["rankscribe/param_fingerprint/distinct"][61] == 2.0


def _assert_straggler_as_whole(live: Any, whole: Any, rank: int) -> None:
    """The live view named ``rank`` as the whole run judged at once names it, at its cost."""
    assert live["job/straggler_rank"] == whole["job/straggler_rank"] == rank
    assert live["job/straggler_ranks"] == whole["job/straggler_ranks"]
    assert live["job/straggler_cost_seconds"] == pytest.approx(whole["job/straggler_cost_seconds"])


def test_thousands_of_ranks_are_judged_live_as_the_whole_job_view_judges_them(
    tmp_path: Path,
) -> None:
    # 2,100 ranks: rank 0 makes the straggler sums 1,024 ranks at a time and sorts a few
    # steps at a time; the verdicts are the in-memory job view's of the same points.
    ranks, fingerprint = 2100, "rankscribe/param_fingerprint"
    rng = np.random.default_rng(7)
    times = 0.1 + 0.001 * rng.random((ranks, 120))
    times[1500] += 0.03  # a straggler in the second block of ranks
    times[2099, 70] = 0.5  # one rank alone the slowest at step 71
    for name in ("live", "whole"):
        (tmp_path / name).mkdir()
    view = LiveJobView(tmp_path / "live", world_size=ranks)
    series: dict[int, RankSeries] = {}

    def left(rank: int, step: int) -> bool:  # rank 2050 leaves the others from step 100
        return rank == 2050 and step >= 100

    for start in (1, 61):
        steps = range(start, start + 60)
        interval = JobPartial()
        for rank in range(ranks):
            points = {
                STEP_TIME_TAG: list(
                    zip(steps, times[rank, start - 1 : start + 59].tolist(), strict=True)
                ),
                fingerprint: [
                    (
                        step,
                        9.0 if (rank, step) in ((1800, 90), (30, 95)) or left(rank, step) else 7.0,
                    )
                    for step in steps
                ],
            }
            interval.merge(JobPartial.of_rank(rank, points, last_step=start - 1))
            held = series.setdefault(rank, RankSeries(rank, {}))
            for tag, points_of_tag in points.items():
                held.scalars.setdefault(tag, []).extend(points_of_tag)
        view.add(JobPartial.from_bytes(interval.to_bytes()))
        view.write()
    live = view.finish()
    whole = write_job_view(tmp_path / "whole", series, world_size=ranks).verdicts
    _assert_straggler_as_whole(live, whole, 1500)
    assert live["job/divergence_check"] == whole["job/divergence_check"] == "checked"
    assert live["job/diverged_ranks"] == whole["job/diverged_ranks"] == "30,1800,2050"
    for rank, step in ((30, 95), (1800, 90), (2050, 100)):
        assert live[f"job/diverged_step/{rank}"] == whole[f"job/diverged_step/{rank}"] == step
    written = job_points(tmp_path / "live")
    assert written["rankscribe/step_time/slowest_rank"][71] == 2099.0
    assert written["rankscribe/param_fingerprint/distinct"][90] == 2.0
    assert written["rankscribe/param_fingerprint/ranks"][90] == ranks


def test_a_job_file_reads_whole_after_each_interval(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=1, tensorboard=True)
    for start in (1, 6, 11):
        view.add(
            JobPartial.of_rank(0, rank_points(0, range(start, start + 5)), last_step=start - 1)
        )
        view.write()
        summary = next(path for path in view.paths if path.endswith("_MS"))
        assert sorted(dict(scalars(summary)["loss/auto/mean"])) == list(range(1, start + 5))
    view.finish()


def test_finish_after_the_last_write_writes_only_what_is_new(tmp_path: Path) -> None:
    """The end of training writes the last interval (final), then finish() adds the HParams
    session: the state file is not written a second time when nothing arrived between
    them (two fsyncs less at the end), and is when something did."""
    view = LiveJobView(tmp_path, world_size=1, tensorboard=True)
    view.add(JobPartial.of_rank(0, rank_points(0, range(1, 6)), finished=True))
    assert view.write(final=True)
    state = tmp_path / LIVE_STATE_NAME
    written = state.stat()
    assert json.loads(state.read_text())["final"] is True
    assert not view.write(final=True)  # nothing new: the files stand as they are
    view.finish(hparams={"lr": 0.1}, metrics={"loss": 0.5})
    assert (state.stat().st_ino, state.stat().st_mtime_ns) == (
        written.st_ino,
        written.st_mtime_ns,
    )
    assert sorted(
        dict(scalars(next(p for p in view.paths if p.endswith("_MS")))["loss/auto/mean"])
    ) == [1, 2, 3, 4, 5]

    (tmp_path / "again").mkdir()
    again = LiveJobView(tmp_path / "again", world_size=1)
    again.add(JobPartial.of_rank(0, rank_points(0, range(1, 6))))
    assert again.write(final=True)
    again.add(JobPartial.of_rank(0, rank_points(0, range(6, 9)), last_step=5, finished=True))
    again.finish()  # a round arrived after the final write: the state file says so
    assert json.loads((tmp_path / "again" / LIVE_STATE_NAME).read_text())["interval"] == 2


def test_ranks_text_stays_short_for_huge_worlds() -> None:
    assert ranges_text([0, 1, 3, 4, 5, 9]) == "0,1,3-5,9"
    assert ranges_text([(2, 99_999)]) == "2-99999"
    text = ranges_text(list(range(0, 100_000, 2)), limit=200)
    assert len(text) < 240 and text.endswith("more ranks)")


_MESSAGE = JobPartial.of_rank(
    5,
    {
        "loss": [(1, 0.5), (2, 0.25)],
        STEP_TIME_TAG: [(1, 0.1), (2, 0.2)],
        "rankscribe/param_fingerprint": [(2, 7.0)],
    },
    finished=True,
).to_bytes()


@settings(max_examples=300, deadline=None)
@given(
    position=st.integers(0, len(_MESSAGE) - 1),
    value=st.integers(0, 255),
    cut=st.integers(0, len(_MESSAGE)),
)
def test_a_mutated_message_decodes_or_is_refused_never_anything_else(
    position: int, value: int, cut: int
) -> None:
    mutated = bytearray(_MESSAGE)
    mutated[position] = value
    for data in (bytes(mutated), _MESSAGE[:cut]):
        try:
            decoded = JobPartial.from_bytes(data)
        except PartialFormatError:
            continue
        decoded.merge(JobPartial.of_rank(6, {"loss": [(1, 1.0)]}))  # usable as it came
        JobPartial.from_bytes(decoded.to_bytes())  # combined (merges wait till read) and sent


def test_tensorboard_text_holds_the_live_verdicts_as_show_prints_them(tmp_path: Path) -> None:
    view = LiveJobView(tmp_path, world_size=2, tensorboard=True)
    for rank in range(2):
        view.add(JobPartial.of_rank(rank, rank_points(rank, range(1, 41), slow=0.1 * rank)))
    view.judge(final=True)
    view.write()
    [board] = (path for path in view.paths if "tfevents" in path)
    texts = [text for _, tag, text in board_texts(board) if tag == "verdicts"]
    shown = live_lines(tmp_path)[1:]  # what `show` prints of the running job, below its header
    assert any(line.startswith("straggler (recent steps): rank 1") for line in shown)
    assert texts[-1] == "\n".join(f"- {line}" for line in shown)
    assert "| verdict | value |" not in texts[-1]
    view.finish()


def judge_each_round(view: LiveJobView) -> list[Any]:
    """``view.judge()`` as a live job's rounds call it, seconds apart: each judged. Back to
    back, a judgement spaces the next ones out (5x its CPU), and which rounds were judged
    then depended on the machine's speed (a straggler first named 200 steps late, its
    onset with it); so this waits the spacing out after each."""
    cpu = time.thread_time()
    changed = view.judge()
    time.sleep(6 * (time.thread_time() - cpu))
    return changed


def norm_points(
    norms: np.ndarray, rank: int, start: int, steps: int = 30
) -> dict[str, list[tuple[int, float]]]:
    """A rank's step times (0.1 s) and bucket norms of ``steps`` steps from ``start``
    (``norms``: steps, ranks, buckets), as its own partial of a round holds them."""
    span = range(start, start + steps)
    points = {STEP_TIME_TAG: [(step, 0.1) for step in span]}
    for bucket in range(norms.shape[2]):
        points[f"{GRADIENT_NORM_TAG_PREFIX}{bucket}"] = [
            (step, float(norms[step - 1, rank, bucket])) for step in span
        ]
    return points


@pytest.mark.parametrize("read_from_files", [False, True])
def test_a_corrupted_local_gradient_is_named_interval_by_interval(
    tmp_path: Path, read_from_files: bool
) -> None:
    """Bucket norms travel the wire like timings; the live view names the rank through
    on_verdict, and its verdicts are those of the whole run judged at once. Norms read
    from summary files are float32 numbers: they travel and are held as float32, and
    judged the same."""
    rng = np.random.default_rng(3)
    norms = np.exp(0.1 * rng.standard_normal((90, 4, 2)))  # steps, ranks, buckets
    norms[44, 1, 1] *= 300.0  # rank 1, step 45, bucket 1
    if read_from_files:
        norms = norms.astype(np.float32).astype(np.float64)
    announced: list[Any] = []
    (tmp_path / "live").mkdir()
    view = LiveJobView(tmp_path / "live", world_size=4, on_verdict=announced.append)
    everything: dict[int, dict[str, list[tuple[int, float]]]] = {rank: {} for rank in range(4)}
    for start in (1, 31, 61):
        interval = JobPartial()
        for rank in range(4):
            points = norm_points(norms, rank, start)
            for tag, pairs in points.items():
                everything[rank].setdefault(tag, []).extend(pairs)
            message = JobPartial.of_rank(rank, points, last_step=start - 1).to_bytes()
            interval.merge(JobPartial.from_bytes(message))
        view.add(interval)
        view.write()
        judge_each_round(view)
    verdicts = view.finish()
    assert (verdicts["job/gradient_ranks"], verdicts["job/gradient_step/1"]) == ("1", 45)
    assert verdicts["job/gradient_bucket/1"] == 1
    [record] = announced
    assert (record["kind"], record["ranks"], record["since_step"]) == ("gradient", [1], 45)
    whole = JobStatistics()
    for rank, points in everything.items():
        whole.add(RankSeries(rank, points))
    (tmp_path / "offline").mkdir()
    offline = write_job_view(tmp_path / "offline", whole, world_size=4).verdicts
    assert {key: value for key, value in offline.items() if "gradient" in key} == {
        key: value for key, value in verdicts.items() if "gradient" in key
    }


def _busy(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


@pytest.mark.parametrize("callback", ["computes", "waits"])
def test_a_gradient_verdict_is_told_in_its_round_whether_or_not_the_window_is_judged(
    tmp_path: Path, callback: str
) -> None:
    """A judgement is spaced out by its CPU time. An ``on_verdict`` that computes for 0.3
    s makes the first one dear, and the next round's window judgement waits (five times
    that); one that waits a second (a message posted to a chat) costs no CPU, and the next
    round, half a second later, is judged. Either way a corrupted gradient the next
    round's written steps show is told at that round's ``judge()``, and the state file
    holds it: gradient verdicts do not wait for the window's judgement."""
    rng = np.random.default_rng(5)
    norms = np.exp(0.1 * rng.standard_normal((60, 4, 2)))  # steps, ranks, buckets
    norms[9, 1, 0] *= 300.0  # rank 1, step 10, bucket 0: told in the first round
    norms[44, 3, 1] *= 300.0  # rank 3, step 45, bucket 1: the second round's
    told: list[Any] = []

    def on_verdict(record: Any) -> None:
        told.append(record)
        if len(told) == 1 and callback == "computes":
            _busy(0.3)
        elif len(told) == 1:
            time.sleep(1.0)

    view = LiveJobView(tmp_path, world_size=4, on_verdict=on_verdict)
    returned, judged = [], []
    for start in (1, 31):
        if start > 1 and callback == "waits":
            time.sleep(0.5)  # far more than 5x the first judgement's CPU, far less than 5 s
        interval = JobPartial()
        for rank in range(4):
            points = norm_points(norms, rank, start)
            interval.merge(JobPartial.of_rank(rank, points, last_step=start - 1))
        view.add(interval)
        view.write()
        returned.append(view.judge())
        # "judged_at" is written by a judgement of the window, after the round's write.
        judged.append("judged_at" in json.loads((tmp_path / LIVE_STATE_NAME).read_text()))
    assert judged == [True, callback == "waits"]
    assert [(record["kind"], record["ranks"], record["since_step"]) for record in told] == [
        ("gradient", [1], 10),
        ("gradient", [3], 45),
    ]
    assert [record["ranks"] for record in returned[1]] == [[3]]
    state = json.loads((tmp_path / LIVE_STATE_NAME).read_text())
    assert sorted(record["ranks"] for record in state["verdict_records"]) == [[1], [3]]
    view.finish()
    assert len(told) == 2  # told once each


def test_the_step_time_skew_is_one_number_live_and_offline(tmp_path: Path) -> None:
    """The live view keeps the skews in a histogram (bounded whatever the steps); the
    offline merge of the same steps gives the same median, the histogram's, not the exact
    median of the steps (which lies between two bins here)."""
    rng = np.random.default_rng(5)
    times = 0.1 * (1.0 + 0.4 * rng.random((66, 2)))  # steps, ranks
    skews = times.max(axis=1) / times.mean(axis=1)  # two ranks: the median is the mean
    (tmp_path / "live").mkdir()
    view = LiveJobView(tmp_path / "live", world_size=2)
    whole = JobStatistics()
    for rank in range(2):
        whole.add(RankSeries(rank, {STEP_TIME_TAG: list(enumerate(times[:, rank].tolist(), 1))}))
    for start in (1, 34):
        interval = JobPartial()
        for rank in range(2):
            pairs = [(step, float(times[step - 1, rank])) for step in range(start, start + 33)]
            interval.merge(JobPartial.of_rank(rank, {STEP_TIME_TAG: pairs}, last_step=start - 1))
        view.add(interval)
        view.write()
    live = view.finish()["job/step_time_skew"]
    (tmp_path / "offline").mkdir()
    offline = write_job_view(tmp_path / "offline", whole, world_size=2).verdicts
    assert offline["job/step_time_skew"] == live
    # the median to a bin: 0.02 of log2, 1.4 % of the ratio
    assert abs(np.log2(live) - np.log2(np.median(skews))) <= 0.01 + 1e-12
    assert live != pytest.approx(float(np.median(skews)), rel=1e-6)


def test_the_job_verdicts_keep_the_onset_the_live_view_named_the_rank_with(
    tmp_path: Path,
) -> None:
    """Rank 1 of 3 computes 1.25x from step 333 of 1,000. The live view names it since a
    step of its window's blocks; the judgement of the whole run would place the onset a
    block away (320 here, offline); the job's verdicts and their message keep the live
    one (docs/job-view.md, "The onset")."""
    ranks, steps, every, onset = 3, 1000, 50, 333
    tag = "rankscribe/section/compute"
    rng = np.random.default_rng(0)
    values = 0.008 * (1.0 + 0.05 * rng.standard_normal((steps, ranks)))
    values[onset - 1 :, 1] *= 1.25
    step_time = values.max(axis=1) + 0.001
    whole = JobStatistics()
    for rank in range(ranks):
        whole.add(
            RankSeries(
                rank,
                {
                    tag: list(enumerate(values[:, rank].tolist(), 1)),
                    STEP_TIME_TAG: list(enumerate(step_time.tolist(), 1)),
                },
            )
        )
    (tmp_path / "live").mkdir()
    records: list[Any] = []  # what on_verdict receives
    view = LiveJobView(tmp_path / "live", world_size=ranks, on_verdict=records.append)
    for start in range(1, steps + 1, every):
        interval = JobPartial()
        for rank in range(ranks):
            span = range(start, start + every)
            points = {
                tag: [(step, float(values[step - 1, rank])) for step in span],
                STEP_TIME_TAG: [(step, float(step_time[step - 1])) for step in span],
            }
            interval.merge(JobPartial.of_rank(rank, points, last_step=start - 1))
        view.add(interval)
        view.write()
        judge_each_round(view)
    verdicts = view.finish()
    # Told when named, and at the end with the whole run's cost since the same onset.
    record, *later = [record for record in records if record["kind"] == "straggler"]
    live = record["since_step"]
    assert (record["ranks"], abs(live - onset) <= 32) == ([1], True), record
    assert [(each["ranks"], each["since_step"]) for each in later] == [([1], live)]
    assert later[-1]["cost_seconds_per_step"] == verdicts["job/straggler_cost_seconds"]
    (tmp_path / "offline").mkdir()
    offline = write_job_view(tmp_path / "offline", whole, world_size=ranks).verdicts
    assert offline["job/straggler_rank"] == 1
    assert offline["job/straggler_since_step"] != live  # the whole run's own placing
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_since_step"]) == (1, live)
    message = str(verdicts["job/straggler_message"])
    assert f" since step {live}," in message
    assert str(offline["job/straggler_since_step"]) not in message
    # A later merge of the same steps into the watched job's folder (``rankscribe-lineage
    # merge``) reads the live state's records: the same onset, not the whole run's.
    again = write_job_view(tmp_path / "live", whole, world_size=ranks).verdicts
    assert (again["job/straggler_rank"], again["job/straggler_since_step"]) == (1, live)
    assert f" since step {live}," in str(again["job/straggler_message"])


def _slow_then_not(first: int, last: int, steps: int = 800) -> JobStatistics:
    """Three ranks' compute of 8 ms (5 % noise), rank 1's 2x over steps ``first`` to
    ``last``, and the step times."""
    tag = "rankscribe/section/compute"
    rng = np.random.default_rng(4)
    values = 0.008 * (1.0 + 0.05 * rng.standard_normal((steps, 3)))
    values[first - 1 : last, 1] *= 2.0
    step_time = values.max(axis=1) + 0.001
    whole = JobStatistics()
    for rank in range(3):
        whole.add(
            RankSeries(
                rank,
                {
                    tag: list(enumerate(values[:, rank].tolist(), 1)),
                    STEP_TIME_TAG: list(enumerate(step_time.tolist(), 1)),
                },
            )
        )
    return whole


def test_a_later_merge_judges_a_rank_whose_live_verdict_ended_from_after_its_span(
    tmp_path: Path,
) -> None:
    """Rank 1 of 3 computes 2x over steps 101-350 of 800. Judged whole, from its onset to
    the last step, the run names it (a burst). In a job folder whose live state file holds
    that verdict ended (``ended_records``), a later merge (``rankscribe-lineage merge``)
    judges it from after its span, over in the evidence, as the live view did at the end:
    not named, and the live view's spans are in the verdicts, standing ones too."""
    whole = _slow_then_not(101, 350)
    (tmp_path / "plain").mkdir()
    plain_verdicts = write_job_view(tmp_path / "plain", whole, world_size=3).verdicts
    assert plain_verdicts["job/straggler_rank"] == 1
    assert LIVE_SPANS_KEY not in plain_verdicts
    ended = {
        "kind": "straggler",
        "tag": "rankscribe/section/compute",
        "timing": "section/compute",
        "ranks": [1],
        "since_step": 104,
        "until_step": 383,
        "status": "ended",
    }
    standing = {**ended, "ranks": [2], "since_step": 700, "until_step": None}
    del standing["status"]
    state = {"ended_records": [ended], "verdict_records": [standing]}
    (tmp_path / LIVE_STATE_NAME).write_text(json.dumps(state))
    os.chmod(tmp_path / LIVE_STATE_NAME, 0o600)
    assert state_ended(tmp_path) == [("rankscribe/section/compute", 1, 104)]
    verdicts = write_job_view(tmp_path, whole, world_size=3).verdicts
    assert verdicts["job/straggler_rank"] == -1
    assert verdicts[LIVE_SPANS_KEY] == (
        "rank 1 section/compute steps 104-383; rank 2 section/compute steps 700-end"
    )
    # Slow to the end, the span is not over: the rank is judged from its onset, and named.
    whole = _slow_then_not(101, 800)
    assert write_job_view(tmp_path, whole, world_size=3).verdicts["job/straggler_rank"] == 1


@pytest.mark.parametrize(
    "records",
    [
        [{"kind": "straggler", "tag": "rankscribe/section/compute", "ranks": [1]}],
        [{"kind": "straggler", "tag": 7, "ranks": [1], "since_step": 5}],
        [{"kind": "straggler", "tag": "t", "ranks": [True], "since_step": 5}],
        [{"kind": "straggler", "tag": "t", "ranks": [1], "since_step": -3}],
        [{"kind": "gradient", "tag": "t", "ranks": [1], "since_step": 5}],
        ["a record"],
        {"not": "a list"},
    ],
)
def test_a_malformed_live_record_gives_no_onset_to_a_later_merge(
    tmp_path: Path, records: Any
) -> None:
    state = {"verdict_records": records, "ended_records": records}
    (tmp_path / LIVE_STATE_NAME).write_text(json.dumps(state))
    os.chmod(tmp_path / LIVE_STATE_NAME, 0o600)
    assert state_onsets(tmp_path) == {}
    assert state_ended(tmp_path) == []


def test_a_live_record_gives_its_onset_to_each_of_its_ranks(tmp_path: Path) -> None:
    record = {"kind": "straggler", "tag": "rankscribe/forward_time", "ranks": [3, 5]}
    state = {"verdict_records": [{**record, "since_step": 120}]}
    (tmp_path / LIVE_STATE_NAME).write_text(json.dumps(state))
    os.chmod(tmp_path / LIVE_STATE_NAME, 0o600)
    assert state_onsets(tmp_path) == {
        ("rankscribe/forward_time", 3): 120,
        ("rankscribe/forward_time", 5): 120,
    }


@pytest.mark.parametrize("diverged_at", [None, 75])
def test_fingerprints_shared_on_the_wire_give_the_verdicts_and_curves_of_the_offline_merge(
    tmp_path: Path, diverged_at: int | None
) -> None:
    """Every rank's fingerprint the same (data parallel): the messages carry it once and
    the live view judges it without a (steps, ranks) table; a rank that drifts later is
    still named, at its step, as the whole run judged at once names it."""
    ranks = 5
    everything: dict[int, dict[str, list[tuple[int, float]]]] = {rank: {} for rank in range(ranks)}
    (tmp_path / "live").mkdir()
    view = LiveJobView(tmp_path / "live", world_size=ranks)
    for start in (1, 41, 81):
        # Two subtrees, as rank 0 receives them: ranks 1-2 and 3-4, then rank 0's own.
        subtrees = [JobPartial(), JobPartial()]
        interval = JobPartial()
        for rank in range(ranks):
            points = {
                STEP_TIME_TAG: [(step, 0.1 + 0.001 * rank) for step in range(start, start + 40)],
                FINGERPRINT_TAG: [
                    (step, float(step % 11) + (0.5 if rank == 3 and step == diverged_at else 0))
                    for step in range(start, start + 40)
                ],
            }
            for tag, pairs in points.items():
                everything[rank].setdefault(tag, []).extend(pairs)
            own = JobPartial.of_rank(rank, points, last_step=start - 1)
            target = interval if rank == 0 else subtrees[(rank - 1) // 2]
            target.merge(JobPartial.from_bytes(own.to_bytes()))
        for subtree in subtrees:
            interval.merge(JobPartial.from_bytes(subtree.to_bytes()))
        view.add(interval)
        view.write()
    verdicts = view.finish()
    whole = JobStatistics()
    for rank, points in everything.items():
        whole.add(RankSeries(rank, points))
    (tmp_path / "offline").mkdir()
    offline = write_job_view(tmp_path / "offline", whole, world_size=ranks)
    for key in ("job/divergence_check", "job/diverged_ranks", "job/diverged_first_step"):
        assert verdicts[key] == offline.verdicts[key]
    assert verdicts["job/divergence_check"] == "checked"
    assert (verdicts["job/diverged_ranks"], verdicts["job/diverged_first_step"]) == (
        ("", -1) if diverged_at is None else ("3", diverged_at)
    )
    live_curves, offline_curves = scalars(view.paths[0]), scalars(offline.paths[0])
    for tag in (f"{FINGERPRINT_TAG}/ranks", f"{FINGERPRINT_TAG}/distinct"):
        assert live_curves[tag] == offline_curves[tag]
    distinct = dict(live_curves[f"{FINGERPRINT_TAG}/distinct"])
    assert distinct[10] == 1.0
    assert distinct.get(75) == (1.0 if diverged_at is None else 2.0)


def test_float32_timings_through_the_tree_give_the_verdicts_of_the_whole_run(
    tmp_path: Path,
) -> None:
    """Timings as a rank reads them from its files (float32) travel and are held as float32
    up the tree; rank 0's verdicts are those of the whole run judged at once."""
    ranks = 64
    rng = np.random.default_rng(11)
    times = 0.1 + 0.002 * rng.random((ranks, 160))
    times[37, 40:] += 0.02  # a straggler from step 41
    times = times.astype(np.float32).astype(np.float64)
    for name in ("live", "whole"):
        (tmp_path / name).mkdir()
    view = LiveJobView(tmp_path / "live", world_size=ranks)
    series: dict[int, RankSeries] = {}
    for start in (1, 81):
        steps = np.arange(start, start + 80, dtype=np.int64)
        children = [JobPartial() for _ in range(8)]  # rank 0's children's subtrees
        interval = JobPartial()
        for rank in range(ranks):
            points = {STEP_TIME_TAG: (steps, times[rank, start - 1 : start + 79])}
            own = JobPartial.from_bytes(JobPartial.of_rank(rank, points).to_bytes())
            (interval if rank == 0 else children[(rank - 1) % 8]).merge(own)
            held = series.setdefault(rank, RankSeries(rank, {}))
            held.scalars.setdefault(STEP_TIME_TAG, []).extend(
                zip(steps.tolist(), points[STEP_TIME_TAG][1].tolist(), strict=True)
            )
        for child in children:
            message = child.to_bytes()
            assert b'"float32"' in message  # the timings went as float32
            interval.merge(JobPartial.from_bytes(message))
        view.add(interval)
        view.write()
    live = view.finish()
    whole = write_job_view(tmp_path / "whole", series, world_size=ranks).verdicts
    _assert_straggler_as_whole(live, whole, 37)
    written = job_points(tmp_path / "live")
    assert written["rankscribe/step_time/slowest_rank"][100] == 37.0


@pytest.mark.parametrize(
    ("argument", "value", "error", "message"),
    [
        ("world_size", 0, JobViewParamValueError, "world_size must be an int >= 1"),
        ("world_size", -3, JobViewParamValueError, "world_size must be an int >= 1"),
        ("rounds_per_write", 0, JobViewParamValueError, "rounds_per_write must be an int >= 1"),
        ("on_verdict", 5, JobViewParamTypeError, "on_verdict must be a function or None"),
        (
            "settings",
            {"window_steps": 50},
            JobViewParamTypeError,
            "settings must be a WatchSettings",
        ),
        ("host", "a/b", JobViewParamValueError, "host"),
    ],
)
def test_a_live_view_with_a_bad_argument_is_refused_by_name(
    tmp_path: Path, argument: str, value: object, error: type[Exception], message: str
) -> None:
    """A live view started by hand checks its arguments when it is made, not at its first
    round: a world of 0 ranks, a callback that cannot be called, settings of another type."""
    arguments: dict[str, Any] = {"world_size": 4, argument: value}
    with pytest.raises(error, match=message):
        LiveJobView(tmp_path / "job", **arguments)
