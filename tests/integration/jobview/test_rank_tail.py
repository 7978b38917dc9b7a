"""RankFileTail: what a rank's live view reads of its own summary files each interval.

docs/job-view.md, "Live": every scalar the rank's files gained since the last
interval (the collector's, add_value's, summary operators'), whole records
only; what the files held before training began is left out.
"""

from __future__ import annotations

import os
from pathlib import Path

from rankscribe.collector._live import RankFileTail
from rankscribe.writer import SummaryRecord, reader, scalar_summary


def test_the_tail_reads_each_new_point_once_and_leaves_earlier_runs_out(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path, rank=0) as record:
        record.add_value("scalar", "old", 1.0)
        record.record(1)
    tail = RankFileTail(tmp_path)
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


def test_a_record_being_written_is_read_next_time(tmp_path: Path) -> None:
    tail = RankFileTail(tmp_path)
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
