"""The merge, the report and the job view read rank dirs as columns, with the old results.

``jobview.rank_dir_arrays`` (``reader.scalar_arrays`` file by file) is what
``series_from_dir``, ``rankscribe-lineage merge`` and the report read. Each
test compares with protobuf decoding every event of the rank's files in
``list_summary_files`` order (the way the job view read them before), on the
files users leave: several files per rank, a step recorded twice, a torn
tail, a file gone between listing and reading, a tag that is not UTF-8, a
rank written for TensorBoard only. docs/job-view.md, "Offline merge".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview import (
    JobStatistics,
    RankSeries,
    rank_dir_arrays,
    series_from_dir,
)
from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.lineage import merge_run_dir
from rankscribe.writer import SummaryRecord, events, reader
from rankscribe.writer.files import frame
from rankscribe.writer.pb import summary_pb2
from tests._support.needs import needs
from tests._support.report_page import decoded, page_figures, write_page

RANKS = 3


def write_rank(directory: Path, rank: int, formats: tuple[str, ...] = ("mindinsight",)) -> None:
    """Two files; the second records steps 8-10 again (a restart from a checkpoint)."""
    for first, last in ((1, 10), (8, 14)):
        with SummaryRecord(directory, rank=rank, formats=formats) as record:
            for step in range(first, last + 1):
                record.add_value("scalar", "loss", 10.0 * rank + step + (0.5 if first > 1 else 0))
                if step % 2 == 0:
                    record.add_value("scalar", "metric/acc", rank + step / 100)
                record.record(step)
    if "mindinsight" in formats:
        assert len(reader.list_summary_files(directory, "summary")) == 2


def write_job(job: Path, formats: tuple[str, ...] = ("mindinsight",)) -> None:
    for rank in range(RANKS):
        write_rank(job / f"rank_{rank}", rank, formats)


def protobuf_points(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the rank's summary files by protobuf, file by file, sorted stably by step."""
    points: dict[str, list[tuple[int, float]]] = {}
    for path in reader.list_summary_files(directory, "summary"):
        for event in events.read_events(path):
            if event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                if value.WhichOneof("value") == "scalar_value":
                    points.setdefault(value.tag, []).append((event.step, value.scalar_value))
    return {tag: sorted(listed, key=lambda point: point[0]) for tag, listed in points.items()}


def last_of_each_step(points: list[tuple[int, float]]) -> dict[int, float]:
    return dict(points)  # a later point of a step replaces an earlier one


def expected_statistics(job: Path) -> dict[str, dict[int, list[float]]]:
    """``tag -> step -> each rank's value`` (the last of the step, in file order)."""
    found: dict[str, dict[int, list[float]]] = {}
    for rank in range(RANKS):
        for tag, points in protobuf_points(job / f"rank_{rank}").items():
            for step, value in last_of_each_step(points).items():
                found.setdefault(tag, {}).setdefault(step, []).append(value)
    return found


def test_series_from_dir_keeps_every_point_sorted_by_step_in_file_order(tmp_path: Path) -> None:
    write_rank(tmp_path, 1)
    series = series_from_dir(tmp_path, 1)
    assert series.scalars == protobuf_points(tmp_path)
    loss = series.scalars["loss"]
    # step 8 twice: the first file's value, then the second's
    assert [value for step, value in loss if step == 8] == [18.0, 18.5]
    assert list(series.scalars) == ["loss", "metric/acc"]  # first-seen order


def test_the_offline_merge_gives_the_statistics_of_the_last_value_of_each_step(
    tmp_path: Path,
) -> None:
    write_job(tmp_path / "job")
    merge_run_dir(tmp_path / "job")
    written = reader.scalars(tmp_path / "job")  # the job's own summary file
    for tag, by_step in expected_statistics(tmp_path / "job").items():
        steps = sorted(by_step)
        for name, function in (("mean", np.mean), ("min", np.min), ("max", np.max)):
            assert [step for step, _ in written[f"{tag}/{name}"]] == steps
            got = [value for _, value in written[f"{tag}/{name}"]]
            want = [float(np.float32(function(by_step[step]))) for step in steps]
            np.testing.assert_allclose(got, want, rtol=1e-6)
        assert [value for _, value in written[f"{tag}/ranks"]] == [
            float(len(by_step[step])) for step in steps
        ]
    assert dict(written["loss/mean"])[9] == pytest.approx(10.0 + 9.5)  # ranks 0-2, restarted


@needs("plotly", envs="lineage")  # the report draws with it
def test_the_report_draws_the_same_bands_and_rank_curves(tmp_path: Path) -> None:
    write_job(tmp_path / "base" / "job")
    written = write_page(tmp_path / "base", tmp_path / "report.html", "--workers", "1")
    charts = {
        str(figure["layout"].get("title", {}).get("text", "")): figure["data"]
        for figure in page_figures(written.path.read_text(encoding="utf-8"))
        if any(trace.get("name") == "mean over ranks" for trace in figure["data"])
    }

    def points(trace: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        return decoded(trace["x"]).tolist(), decoded(trace["y"]).tolist()

    for tag, by_step in expected_statistics(tmp_path / "base" / "job").items():
        steps = sorted(by_step)
        lower, upper, mean = (points(trace) for trace in charts[tag][:3])  # the band, its mean
        assert mean[0] == lower[0] == upper[0] == steps
        np.testing.assert_allclose(mean[1], [np.mean(by_step[s]) for s in steps])
        assert lower[1] == [min(by_step[s]) for s in steps]
        assert upper[1] == [max(by_step[s]) for s in steps]
    for rank in range(RANKS):
        last = last_of_each_step(
            protobuf_points(tmp_path / "base" / "job" / f"rank_{rank}")["loss"]
        )
        (trace,) = [trace for trace in charts["loss"] if trace["name"] == f"rank {rank}"]
        assert dict(zip(*points(trace), strict=True)) == last


def test_a_torn_tail_counts_the_records_before_it_and_names_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = tmp_path / "job"
    write_job(job)
    first = reader.list_summary_files(job / "rank_2", "summary")[0]
    os.chmod(first, 0o600)
    with open(first, "r+b") as handle:
        handle.truncate(os.path.getsize(first) - 3)  # step 10 of the first file, torn
    with caplog.at_level(logging.WARNING):
        series = series_from_dir(job / "rank_2", 2)
        merge_run_dir(job)
    assert f"{first}: the last record" in caplog.text
    assert series.scalars == protobuf_points(job / "rank_2")
    assert [step for step, _ in series.scalars["loss"]].count(10) == 1  # the second file's
    written = dict(reader.scalars(job)["loss/max"])
    assert written[10] == pytest.approx(20.0 + 10.5)  # rank 2's step 10 from the second file


def test_a_file_gone_between_listing_and_reading_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_rank(tmp_path, 0)
    listed = reader.list_summary_files(tmp_path, "summary")
    listing = reader.list_summary_files

    def listing_then_cleanup(directory: Any, kind: Any = None) -> Any:
        found = listing(directory, kind)
        if listed[1] in found:
            os.remove(listed[1])  # e.g. a cleanup job removing old files meanwhile
        return found

    monkeypatch.setattr(reader, "list_summary_files", listing_then_cleanup)
    with caplog.at_level(logging.WARNING):
        columns = rank_dir_arrays(tmp_path)
    assert f"{listed[1]}: skipped, it could not be read" in caplog.text
    assert columns["loss"][0].tolist() == list(range(1, 11))  # the first file alone


def test_a_tag_that_is_not_utf8_is_text_with_escapes_in_the_job_view(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = tmp_path / "job"
    for rank in range(2):
        directory = job / f"rank_{rank}"
        directory.mkdir(parents=True, mode=0o700)
        event = summary_pb2.Event(wall_time=1.0, step=3)
        event.summary.value.add(tag="a@", scalar_value=1.0 + rank)
        payload = event.SerializeToString().replace(b"a@", b"a\xff")
        name = f"events.out.events.summary.1700000000.{rank}.host_MS"
        (directory / name).write_bytes(frame(payload))
    with caplog.at_level(logging.WARNING):
        merge_run_dir(job)
    assert "a scalar tag is not UTF-8; it is read as 'a\\\\xff'" in caplog.text
    assert f"{job / 'rank_1'}" in caplog.text  # the warning names the file
    written = reader.scalars(job)
    assert written["a\\xff/mean"] == [(3, 1.5)]
    assert written["a\\xff/ranks"] == [(3, 2.0)]


def test_ranks_written_for_tensorboard_only_get_a_job_view(tmp_path: Path) -> None:
    tensorboard_only = tmp_path / "tb" / "job"
    both = tmp_path / "both" / "job"
    write_job(tensorboard_only, ("tensorboard",))
    write_job(both, ("mindinsight", "tensorboard"))
    assert not reader.list_summary_files(tensorboard_only / "rank_0", "summary")
    for rank in range(RANKS):
        from_tensorboard = series_from_dir(tensorboard_only / f"rank_{rank}", rank)
        # both formats: the summary files only, nothing counted twice
        from_summary = series_from_dir(both / f"rank_{rank}", rank)
        assert from_tensorboard.scalars == from_summary.scalars
        assert from_summary.scalars == protobuf_points(both / f"rank_{rank}")
    merge_run_dir(tensorboard_only)
    merge_run_dir(both)
    got = reader.scalars(tensorboard_only)  # the job's summary file
    assert got == reader.scalars(both)
    assert dict(got["loss/ranks"])[9] == float(RANKS)


def test_statistics_from_columns_equal_statistics_from_points() -> None:
    rng = np.random.default_rng(5)
    # unsorted, with steps recorded twice: the last value of a step wins either way
    steps = rng.integers(0, 40, size=200)
    values = rng.standard_normal(200)
    values[7] = np.nan
    points = list(zip(steps.tolist(), values.tolist(), strict=True))
    by_points, by_columns = JobStatistics(), JobStatistics()
    for rank in range(2):
        by_points.add(RankSeries(rank, {"loss": points, "rankscribe/step_time": points[:50]}))
        by_columns.add_arrays(
            rank, {"loss": (steps, values), "rankscribe/step_time": (steps[:50], values[:50])}
        )
    for name in ("steps", "count", "mean", "minimum", "maximum", "min_rank", "nan"):
        np.testing.assert_array_equal(
            getattr(by_columns.tags["loss"], name), getattr(by_points.tags["loss"], name)
        )
    assert by_columns.last_steps == by_points.last_steps == {0: 39, 1: 39}
    assert by_columns.nonfinite_loss == by_points.nonfinite_loss
    for rank in range(2):
        for got, want in zip(by_columns.step_times[rank], by_points.step_times[rank], strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("rank", "scalars", "error", "message"),
    [
        (-1, {}, JobViewParamValueError, "rank must be an int >= 0, got -1"),
        (True, {}, JobViewParamValueError, "rank must be an int >= 0, got True"),
        (0, [("a", ([1], [1.0]))], JobViewParamTypeError, "scalars must be a mapping"),
        (0, {1: ([1], [1.0])}, JobViewParamTypeError, "scalars keys must be str tags, got 1"),
        (0, {"a": [(1, 1.0)]}, JobViewParamTypeError, r"scalars\[.a.\] must be a \(steps"),
        (0, {"a": ([1, 2], [1.0])}, JobViewParamValueError, "1-D columns of one length"),
        (0, {"a": ([1.5], [1.0])}, JobViewParamTypeError, r"scalars\['a'\] steps must be integ"),
        (0, {"a": ([1], ["x"])}, JobViewParamTypeError, r"scalars\['a'\] values must be numbers"),
    ],
)
def test_add_arrays_names_what_is_wrong(rank: Any, scalars: Any, error: Any, message: str) -> None:
    statistics = JobStatistics()
    with pytest.raises(error, match=message):
        statistics.add_arrays(rank, scalars)
    assert statistics.ranks == []  # nothing half-added
