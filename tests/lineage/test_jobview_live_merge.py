"""The offline merge at scale: columnar reads, worker processes, and world sizes from files.

docs/job-view.md, "Offline merge": ``rankscribe-lineage merge`` reads the rank
dirs in worker processes as NumPy columns (``reader.scalar_arrays``), and gives
exactly the statistics of the rank files. A world size or a rank number read from a file
is data: a ``rank_99999999999`` directory or ``--world-size 99999999999`` give
missing ranks as ranges ("2-99999"), never one entry (or one loop turn) per
missing rank, and messages stay short; a lineage whose ``device_num`` is
``2**31 - 1`` is not believed (above 2**20 ranks).
"""

from __future__ import annotations

import logging
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview import rank_dir_arrays, series_from_dir, write_job_view
from rankscribe.jobview.feed import STEP_TIME_TAG

# private: the per-rank sort/merge rule of the statistics
from rankscribe.jobview.job._statistics import rank_arrays, sorted_arrays
from rankscribe.lineage import get_run_lineage, merge_run_dir
from rankscribe.lineage.cli import main
from rankscribe.writer import SummaryRecord, events, reader

STEPS = 40


def write_rank(directory: Path, rank: int, *, extras: bool = False) -> None:
    """Scalars of changing layouts in two files (and, with ``extras``, histograms, images
    and a step recorded again)."""
    rng = np.random.default_rng(rank)
    for first, last in ((1, STEPS // 2), (STEPS // 2 + 1, STEPS)):
        with SummaryRecord(directory, rank=rank) as record:
            for step in range(first, last + 1):
                record.add_value("scalar", "loss/auto", float(rng.random()))
                record.add_value("scalar", STEP_TIME_TAG, 0.01 + 0.001 * float(rng.random()))
                if step % 3 == 0:
                    record.add_value("scalar", "metric/acc", float(rng.random()))
                if step % 7 == 0:  # another tag order
                    record.add_value("scalar", "a/first", float("nan") if step == 14 else 1.5)
                if extras and step % 5 == 0:
                    record.add_value("histogram", "weights", rng.random(20))
                    record.add_value("image", "inputs", rng.random((1, 3, 4, 4)))
                record.record(step)
            if extras and first == 1:
                record.add_value("scalar", "loss/auto", 123.0)  # step 10 again: the last wins
                record.record(10)


def read_by_protobuf(directory: Path) -> dict[str, tuple[Any, Any]]:
    """Every scalar of the summary files, decoded by protobuf event by event (the reference)."""
    points: dict[str, list[tuple[int, float]]] = {}
    for event in events.load_dir(directory):
        for value in event.values:
            if value.plugin == "scalar":
                assert isinstance(value.value, float), value.value  # a scalar reads as a float
                points.setdefault(value.tag, []).append((event.step or 0, value.value))
    return {tag: rank_arrays(listed) for tag, listed in points.items()}


def statistics_columns(directory: Path) -> dict[str, tuple[Any, Any]]:
    """What the offline merge takes of a rank dir: its columns, one value per step."""
    return {tag: sorted_arrays(*pair) for tag, pair in rank_dir_arrays(directory).items()}


@pytest.mark.parametrize("extras", [False, True])
def test_the_merge_reads_what_protobuf_reads(tmp_path: Path, extras: bool) -> None:
    write_rank(tmp_path / "rank_0", 0, extras=extras)
    assert len(reader.list_summary_files(tmp_path / "rank_0", "summary")) > 1  # several files
    fast = statistics_columns(tmp_path / "rank_0")
    plain = read_by_protobuf(tmp_path / "rank_0")
    assert list(fast) == list(plain)  # first-seen order, over the files
    for tag, (steps, values) in plain.items():
        np.testing.assert_array_equal(fast[tag][0], steps)
        np.testing.assert_array_equal(fast[tag][1], values)
    if extras:
        assert dict(zip(*fast["loss/auto"], strict=True))[10] == 123.0


def test_a_torn_file_gives_the_records_before_the_tear(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "rank_0"
    with SummaryRecord(directory, rank=0) as record:
        for step in range(1, 21):
            record.add_value("scalar", "loss", float(step))
            record.record(step)
    path = reader.list_summary_files(directory, "summary")[0]
    os.chmod(path, 0o600)
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 5)
    with caplog.at_level(logging.WARNING):
        fast = statistics_columns(directory)
    assert list(fast["loss"][0]) == list(range(1, 20))
    assert f"{path}: the last record" in caplog.text and "is incomplete" in caplog.text


def test_worker_processes_give_the_statistics_of_the_in_memory_view(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for rank in range(6):  # enough ranks for the worker processes
        write_rank(job / f"rank_{rank}", rank, extras=rank == 2)
    outcome = merge_run_dir(job)
    assert outcome.job_view is not None
    expected_dir = tmp_path / "expected"
    expected_dir.mkdir()
    series = {rank: series_from_dir(job / f"rank_{rank}", rank) for rank in range(6)}
    expected = write_job_view(expected_dir, series, world_size=6)
    got, want = reader.scalars(job), reader.scalars(expected_dir)
    assert sorted(got) == sorted(want)
    for tag in want:
        np.testing.assert_allclose(np.asarray(got[tag]), np.asarray(want[tag]), rtol=1e-6)
    assert outcome.job_view.verdicts == expected.verdicts


def limited(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python with 1.5 GB of address space: a list per rank cannot fit."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
        cwd=tmp_path,
        check=False,
    )


def small_job(job: Path, lw: Any, ranks: list[int], **train: Any) -> None:
    for rank in ranks:
        directory = job / f"rank_{rank}"
        with SummaryRecord(directory, rank=rank) as record:
            for step in range(1, 6):
                record.add_value("scalar", "loss", float(step + rank))
                record.record(step)
        lw.write(directory, [lw.train(**{"network": "Net", "loss": 0.5, **train})])


def test_a_huge_rank_number_from_a_directory_name_is_data(tmp_path: Path, lw: Any) -> None:
    job = tmp_path / "job"
    small_job(job, lw, [0, 1, 99_999_999_999])
    result = limited(
        "import logging; logging.basicConfig(); from rankscribe.lineage import merge_run_dir;"
        f"o = merge_run_dir({str(job)!r});"
        "print(o.lineage.section('user_defined')['ranks_missing']);"
        "print(o.job_view.verdicts['job/missing_ranks']); print(o.missing_ranges)",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == lines[1] == "2-99999999998"
    assert lines[2] == "[(2, 99999999998)]"
    assert len(result.stderr) < 2000  # the warnings name ranges, not 10**11 ranks


def test_a_huge_world_size_argument_is_described_as_ranges(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    small_job(job, lw, [0, 1])
    assert main(["merge", str(job), "--world-size", "99999999999"]) == 0
    merged = get_run_lineage(str(job))
    assert merged is not None
    notes = merged.section("user_defined")
    assert notes["ranks_missing"] == "2-99999999998"
    assert notes["job/missing_ranks"] == "2-99999999998"
    assert len(capsys.readouterr().out) < 5000


def test_a_world_of_2_31_ranks_allocates_nothing_per_rank(tmp_path: Path, lw: Any) -> None:
    job = tmp_path / "job"
    small_job(job, lw, [0, 1], device_num=2**31 - 1)
    merged = (
        "from rankscribe.lineage import merge_run_dir;"
        "o = merge_run_dir({job!r}{world_size});"
        "u = o.lineage.section('user_defined');"
        "print(u['ranks_missing'] or '-', u['ranks_expected'], len(o.ranks_missing))"
    )
    # Given by the user (--world-size): believed, and its missing ranks kept as ranges.
    result = limited(merged.format(job=str(job), world_size=", world_size=2**31 - 1"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2-2147483646", "2147483647", "1000"]
    # Read from the ranks' lineage: more ranks than any machine runs, not believed.
    result = limited(merged.format(job=str(job), world_size=""), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["-", "2", "0"]
