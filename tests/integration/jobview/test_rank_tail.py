"""RankFileTail: what a rank's live view reads of its own summary files each interval.

docs/job-view.md, "Live": every scalar the rank's files gained since the last
interval (the collector's, add_value's, summary operators'), whole records
only; what the files held before training began is left out.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

# private: the rank side of the live protocol (file tail, stall rule), no public door
from rankscribe.jobview.job import _rank_view as _live
from rankscribe.ranks import RankInfo
from rankscribe.writer import SummaryRecord, reader, scalar_summary


def test_the_tail_reads_each_new_point_once_and_leaves_earlier_runs_out(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path, rank=0) as record:
        record.add_value("scalar", "old", 1.0)
        record.record(1)
    tail = _live.RankFileTail(tmp_path)
    assert tail.read_new() == {}
    with SummaryRecord(tmp_path, rank=0) as record:
        record.add_value("scalar", "loss", 0.5)
        scalar_summary("from_operator", 7.0)
        record.record(2)
        record.flush()
        first = tail.read_new()
        assert {tag: (list(steps), list(values)) for tag, (steps, values) in first.items()} == {
            "loss": ([2], [0.5]),
            "from_operator": ([2], [7.0]),
        }
        record.add_value("scalar", "loss", 0.25)
        record.record(3)
    second = tail.read_new()
    assert list(second["loss"][0]) == [3] and "from_operator" not in second
    assert tail.last_step == 3
    assert tail.read_new() == {}


def test_the_end_sample_after_the_last_step_is_read_but_is_no_step_of_the_rank(
    tmp_path: Path,
) -> None:
    # docs/system-metrics.md: the last machine sample is labelled the step after the last,
    # which the rank did not run. Read in a round of its own (before: the next round's
    # partial said the rank's last step was 201, a step that never ran).
    live = _live.LiveRankView(interval=0.05)
    tail = _live.RankFileTail(tmp_path)
    with SummaryRecord(tmp_path, rank=0) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(200)
        record.flush()
        assert live._own_partial(tail, 0, final=False).last_steps == {0: 200}
        record.add_value("scalar", "rankscribe/system/rss_bytes", 1e6)
        record.record(201)
        record.flush()
        assert list(tail.read_new()["rankscribe/system/rss_bytes"][0]) == [201]
        assert tail.last_step == 200
    assert live._own_partial(tail, 0, final=True).last_steps == {0: 200}


def test_a_record_being_written_is_read_next_time(tmp_path: Path) -> None:
    tail = _live.RankFileTail(tmp_path)
    with SummaryRecord(tmp_path, rank=0) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", float(step))
            record.record(step)
    path = reader.list_summary_files(tmp_path, "summary")[0]
    whole = path.read_bytes()
    os.chmod(path, 0o600)
    path.write_bytes(whole[:-7])  # the last record half written
    assert list(tail.read_new()["loss"][0]) == [1]
    path.write_bytes(whole)  # its end arrives
    assert list(tail.read_new()["loss"][0]) == [2]


def test_a_rank_whose_files_stop_growing_leaves_itself_out_until_it_writes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/job-view.md, "Live": a stalled rank's thread answers rounds without itself."""
    monkeypatch.setattr(_live, "STALL_FLOOR", 0.3)  # the rule, on a test's time scale
    live = _live.LiveRankView(interval=0.05)
    assert live.stall_after() == 0.3
    tail = _live.RankFileTail(tmp_path)
    with SummaryRecord(tmp_path, rank=0) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
        record.flush()
        assert live._own_partial(tail, 0, final=False).last_steps == {0: 1}
        assert live._own_partial(tail, 0, final=False).ranks == [0]  # quiet, not stalled yet
        time.sleep(0.4)
        with caplog.at_level(logging.WARNING):
            stalled = live._own_partial(tail, 0, final=False)
        assert stalled.ranks == [] and not stalled.tags
        assert "rank 0 wrote no point for" in caplog.text
        assert live._own_partial(tail, 0, final=False).ranks == []  # still stalled
        record.add_value("scalar", "loss", 2.0)
        record.record(2)
        record.flush()
        back = live._own_partial(tail, 0, final=False)
    assert back.last_steps == {0: 2}
    assert list(back.tags["loss"].steps) == [2]
    time.sleep(0.4)
    # The last round always counts the rank: it is done, not missing.
    assert live._own_partial(tail, 0, final=True).finished == {0}


class _RootAlone:
    """Rank 0's end of a tree of two ranks whose other rank never reports: what the rank
    view asks of a channel (no parent, no children to wait for)."""

    rank, parent, tree_height, height, concurrent = 0, None, 1, 1, True

    def __init__(self) -> None:
        self.children: list[int] = []

    def close(self) -> None:
        pass


def test_rank_0_tells_its_watch_the_cpu_its_live_view_threads_use(tmp_path: Path) -> None:
    # docs/job-view.md, "The live view's own cost": each round, the view's threads' CPU so
    # far goes to the watch, which reads it a step (the rate that explains rank 0's
    # lateness as RankScribe's own).
    job, rank_dir = tmp_path / "job", tmp_path / "job" / "rank_0"
    rank_dir.mkdir(parents=True)
    live = _live.LiveRankView(interval=0.05)
    live.channel = _RootAlone()  # type: ignore[assignment]  # (the protocol's parts used)
    live.info = RankInfo(rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi")
    live._job_dir = str(job)
    live.start(rank_dir)
    view = live.view
    assert view is not None
    with SummaryRecord(rank_dir, rank=0) as record:
        for step in range(1, 121):
            record.add_value("scalar", "rankscribe/step_time", 0.01)
            record.record(step)
            if step % 20 == 0:
                record.flush()
                time.sleep(0.12)  # a round or two reads the new steps
    live.stop_thread()
    assert live.thread_cpu["rankscribe-job-view"] > 0
    rate = view.watch.own_cpu_per_step(0)
    assert 0 < rate <= sum(live.thread_cpu.values()) / 19  # over at least steps 1-20
