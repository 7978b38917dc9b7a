"""The offline merge of a job dir: merged lineage with verdicts, and the job view files."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import numpy as np
import pytest

from rankscribe.jobview import series_from_dir
from rankscribe.jobview.feed import FINGERPRINT_TAG, STEP_TIME_TAG
from rankscribe.lineage import (
    RunLineage,
    filter_runs,
    get_run_lineage,
    merge_rank_lineages,
    merge_run_dir,
)
from rankscribe.lineage.cli import main
from rankscribe.lineage.errors import (
    LineageMergeError,
    LineageParamTypeError,
    LineageParamValueError,
)
from rankscribe.lineage.recording import (
    TRAIN_STOP_FILE_NAME,
    TrainLineageInfo,
    read_train_stop,
    write_merged_lineage,
    write_train_start,
    write_train_stop,
)
from rankscribe.writer import SummaryRecord, reader

STEPS = 30


def _write_rank(
    directory: Path,
    rank: int,
    scalars: dict[str, list[tuple[int, float]]],
    *,
    tensorboard: bool = False,
) -> None:
    by_step: dict[int, list[tuple[str, float]]] = {}
    for tag, points in scalars.items():
        for step, value in points:
            by_step.setdefault(step, []).append((tag, value))
    formats = ("mindinsight", "tensorboard") if tensorboard else ("mindinsight",)
    with SummaryRecord(directory, rank=rank, formats=formats) as record:
        for step in sorted(by_step):
            for tag, value in by_step[step]:
                record.add_value("scalar", tag, value)
            record.record(step)


def _rank_scalars(rank: int, *, slow: float = 1.0, stop: int = STEPS) -> dict[str, Any]:
    rng = np.random.default_rng(rank)
    steps = range(1, stop + 1)
    return {
        "loss/auto": [(step, 1.0 / step + 0.01 * rank) for step in steps],
        # Steps of about 0.3 s, each written at once: a rank's last step is where it stopped.
        STEP_TIME_TAG: [(step, 0.3 * slow * (1 + 0.05 * rng.random())) for step in steps],
        FINGERPRINT_TAG: [(step, float(step)) for step in steps if step % 5 == 0],
    }


@pytest.fixture
def job(tmp_path: Path, lw: Any) -> Path:
    """A 3-rank job whose rank 2 is 1.6x slower; rank 1 wrote no lineage (killed)."""
    job = tmp_path / "runs" / "exp1"
    for rank in range(3):
        directory = job / f"rank_{rank}"
        _write_rank(directory, rank, _rank_scalars(rank, slow=1.6 if rank == 2 else 1.0))
        if rank != 1:
            lw.write(
                directory,
                [
                    lw.train(
                        optimizer="Adam",
                        learning_rate=0.1,
                        device_num=3,
                        network="Net",
                        loss=0.5 + rank,
                    )
                ],
            )
    return job


def _job_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if ".job" in name)


def test_the_offline_merge_writes_the_job_view_and_the_verdicts(job: Path) -> None:
    outcome = merge_run_dir(job)
    assert outcome.job_view is not None
    assert [os.path.basename(path) for path in outcome.job_view.paths] == _job_files(job)
    verdicts = outcome.lineage.section("user_defined")
    assert verdicts["job/straggler_rank"] == 2
    assert verdicts["job/divergence_check"] == "checked"
    assert verdicts["job/diverged_ranks"] == ""
    # what a reader of the merged lineage file sees, not only the returned object
    stored = get_run_lineage(str(job))
    assert stored is not None
    assert stored.section("user_defined")["job/straggler_rank"] == 2
    assert stored.section("user_defined")["job/last_step/1"] == STEPS
    assert stored.section("user_defined")["ranks_missing"] == "1"  # no lineage from rank 1
    # the job curves equal the statistics of what the rank files hold
    ranks = [reader.scalars(job / f"rank_{rank}") for rank in range(3)]
    job_curves = reader.scalars(job)
    losses = np.array([[value for _, value in curves["loss/auto"]] for curves in ranks])
    np.testing.assert_allclose(
        [v for _, v in job_curves["loss/auto/mean"]],
        losses.mean(axis=0).astype(np.float32),
        rtol=1e-6,
    )
    assert [v for _, v in job_curves["loss/auto/max"]] == losses.max(axis=0).tolist()
    assert [v for _, v in job_curves["loss/auto/max_rank"]] == [2.0] * STEPS
    assert {v for _, v in job_curves[f"{STEP_TIME_TAG}/slowest_rank"]} == {2.0}


def test_queries_find_the_jobs_by_their_verdicts(job: Path, lw: Any) -> None:
    clean = job.parent / "exp2"
    for rank in range(2):
        _write_rank(clean / f"rank_{rank}", rank, _rank_scalars(rank))
        lw.write(clean / f"rank_{rank}", [lw.train(network="Net", loss=0.1, device_num=2)])
    merge_run_dir(job)
    merge_run_dir(clean)
    slow = filter_runs(job.parent, "user_defined/job/straggler_rank >= 0")
    assert [os.path.basename(row["summary_dir"]) for row in slow["object"]] == ["exp1"]
    skewed = filter_runs(job.parent, "user_defined/job/step_time_skew > 1.3")
    assert [os.path.basename(row["summary_dir"]) for row in skewed["object"]] == ["exp1"]
    fine = filter_runs(job.parent, "user_defined/job/diverged_ranks = ''")
    assert sorted(os.path.basename(row["summary_dir"]) for row in fine["object"]) == [
        "exp1",
        "exp2",
    ]


def test_running_the_merge_again_never_duplicates_a_point(job: Path) -> None:
    first = merge_run_dir(job)
    second = merge_run_dir(job)
    assert first.job_view is not None and second.job_view is not None
    assert _job_files(job) == [os.path.basename(path) for path in second.job_view.paths]
    assert len([name for name in os.listdir(job) if name.endswith("_lineage")]) == 1
    curves = reader.scalars(job)
    assert [step for step, _ in curves["loss/auto/mean"]] == list(range(1, STEPS + 1))
    assert not [name for name in os.listdir(job) if name.endswith(".tmp")]
    # nothing the merge left in the job dir (job files, lineage, lock) is readable by others
    for name in os.listdir(job):
        if (job / name).is_file():
            assert os.stat(job / name).st_mode & 0o077 == 0, name


def test_a_torn_rank_file_contributes_what_is_readable(job: Path) -> None:
    (path,) = reader.list_summary_files(job / "rank_0", "summary")
    size = path.stat().st_size
    os.chmod(path, 0o600)
    with open(path, "r+b") as stream:
        stream.truncate(size - 7)  # the writer died in the middle of the last record
    series = series_from_dir(job / "rank_0", 0)
    assert series.last_step == STEPS - 1
    outcome = merge_run_dir(job)
    verdicts = outcome.lineage.section("user_defined")
    assert verdicts["job/last_step/0"] == STEPS - 1
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (
        0,
        STEPS - 1,
    )
    counts = dict(reader.scalars(job)["loss/auto/ranks"])
    assert (counts[STEPS - 1], counts[STEPS]) == (3.0, 2.0)


def test_a_corrupt_rank_file_contributes_the_records_before_the_damage(job: Path) -> None:
    (path,) = reader.list_summary_files(job / "rank_1", "summary")
    os.chmod(path, 0o600)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    series = series_from_dir(job / "rank_1", 1)
    assert 0 < len(series.scalars["loss/auto"]) < STEPS
    outcome = merge_run_dir(job)
    assert outcome.job_view is not None
    counts = dict(reader.scalars(job)["loss/auto/ranks"])
    assert min(counts.values()) == 2.0 and max(counts.values()) == 3.0


def test_a_job_killed_before_any_lineage_still_gets_its_view(tmp_path: Path) -> None:
    job = tmp_path / "crashed"
    _write_rank(job / "rank_0", 0, _rank_scalars(0))
    _write_rank(job / "rank_1", 1, _rank_scalars(1, stop=12))
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [] and outcome.ranks_missing == [0, 1]
    stored = get_run_lineage(str(job))
    assert stored is not None
    assert stored.section("hyper_parameters") == {"device_num": 2}
    user_defined = stored.section("user_defined")
    assert (user_defined["job/stopped_first_rank"], user_defined["job/stopped_first_step"]) == (
        1,
        12,
    )


def test_tensorboard_rank_files_give_a_tensorboard_job_file(tmp_path: Path) -> None:
    job = tmp_path / "tb"
    for rank in range(2):
        _write_rank(job / f"rank_{rank}", rank, _rank_scalars(rank), tensorboard=True)
    outcome = merge_run_dir(job)
    assert outcome.job_view is not None
    names = [os.path.basename(path) for path in outcome.job_view.paths]
    assert len(names) == 2 and names[1].startswith("events.out.tfevents.")
    assert names[1].endswith(".job")


def test_a_dir_without_rank_dirs_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(LineageMergeError, match=r"no rank_<n> directory in .*plain"):
        merge_run_dir(tmp_path / "plain")
    assert main(["merge", str(tmp_path / "plain")]) == 1
    err = capsys.readouterr().err
    assert "no rank_<n> directory in" in err and str(tmp_path / "plain") in err
    assert os.listdir(tmp_path / "plain") == []


def test_the_cli_merges_and_shows_the_verdicts(
    job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["merge", str(job)]) == 0
    out = capsys.readouterr().out
    assert "(job view)" in out
    assert "straggler: rank 2 costs " in out
    assert main(["show", str(job)]) == 0
    out = capsys.readouterr().out
    assert "job verdicts:" in out
    assert "  straggler: rank 2" in out
    assert "  divergence: none (the ranks' parameters agree)" in out
    # The last column is the query name (--where/--sort) of the value.
    assert re.search(
        r"^user_defined\s+job/straggler_rank\s+2\s+user_defined/job/straggler_rank$",
        out,
        re.MULTILINE,
    )


def test_merge_functions_take_extra_user_defined_keys(tmp_path: Path, lw: Any) -> None:
    lineage = RunLineage(str(tmp_path))
    lineage.sections["hyper_parameters"] = {"optimizer": "Adam"}
    merged = merge_rank_lineages({0: lineage}, user_defined={"job/straggler_rank": 0})
    assert merged.section("user_defined")["job/straggler_rank"] == 0
    with pytest.raises(LineageParamTypeError, match="user_defined"):
        merge_rank_lineages({0: lineage}, user_defined={"job/x": [1]})  # type: ignore[dict-item]
    path = write_merged_lineage(tmp_path, merged, user_defined={"job/step_time_skew": 1.25})
    stored = get_run_lineage(os.path.dirname(path))
    assert stored is not None
    assert stored.section("user_defined")["job/step_time_skew"] == 1.25
    assert "job/step_time_skew" not in merged.section("user_defined")
    lw.write(tmp_path / "job" / "rank_0", [lw.train(network="Net", loss=1.0)])
    outcome = merge_run_dir(tmp_path / "job", user_defined={"job/note": "checked by hand"})
    assert outcome.job_view is None  # no scalar on disk: no job view
    assert outcome.lineage.section("user_defined")["job/note"] == "checked by hand"


def _stopped_job(tmp_path: Path) -> Path:
    """A 2-rank job both of whose ranks recorded steps 1-30 (0.3 s steps): the last steps
    tell nothing apart."""
    job = tmp_path / "stopped"
    for rank in range(2):
        _write_rank(job / f"rank_{rank}", rank, _rank_scalars(rank))
    return job


def test_the_rank_whose_training_raised_is_named_by_the_merge(tmp_path: Path) -> None:
    job = _stopped_job(tmp_path)
    write_train_stop(job / "rank_1", "RuntimeError")
    verdicts = merge_run_dir(job).lineage.section("user_defined")
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (1, STEPS)
    assert verdicts["job/stopped_first_evidence"] == "exception"
    assert verdicts["job/stopped_first_exception"] == "RuntimeError"


@pytest.mark.parametrize(
    ("signals", "evidence"),
    [(("SIGINT", "SIGINT"), "sigint"), (("SIGTERM", "SIGTERM"), "sigterm"), ((None, "SIGINT"), "")],
)
def test_the_merge_reads_the_signals_the_ranks_stop_records_name(
    tmp_path: Path, signals: tuple[str | None, str | None], evidence: str
) -> None:
    """Ctrl-C (or a scheduler's SIGTERM) to every rank: none stopped first. One rank's
    record alone names its signal; the other, without a record, may have been killed."""
    job = _stopped_job(tmp_path)
    for rank, signal in enumerate(signals):
        if signal is not None:
            write_train_stop(job / f"rank_{rank}", "Stopped", signal=signal)
    verdicts = merge_run_dir(job).lineage.section("user_defined")
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        -1,
        evidence,
    )
    for name in ("SIGTERM", "SIGINT"):
        sent = ",".join(str(rank) for rank, signal in enumerate(signals) if signal == name)
        assert verdicts.get(f"job/{name.lower()}_ranks") == (sent or None)


@pytest.mark.parametrize("damage", ["a link", "a FIFO", "not json", "no exception"])
def test_a_stop_record_that_cannot_be_believed_is_skipped_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = _stopped_job(tmp_path)
    record = job / "rank_1" / TRAIN_STOP_FILE_NAME
    if damage == "a link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_text('{"exception": "PlantedError"}')
        record.symlink_to(elsewhere)
    elif damage == "a FIFO":
        os.mkfifo(record)  # never opened for writing: a read that blocked would hang here
    else:
        record.write_text("{" if damage == "not json" else '{"exception": 3}')
    assert read_train_stop(job / "rank_1") is None
    verdicts = merge_run_dir(job).lineage.section("user_defined")
    assert verdicts["job/stopped_first_rank"] == -1
    assert f"skipping the training stop record {record}" in caplog.text


def test_a_new_start_record_removes_an_earlier_runs_stop_record(tmp_path: Path) -> None:
    directory = tmp_path / "rank_0"
    directory.mkdir()
    before = time.time()
    write_train_stop(directory, "ValueError")
    stop = read_train_stop(directory)
    assert stop is not None
    assert (stop.exception, stop.host) == ("ValueError", socket.gethostname())
    assert stop.wall_time is not None and before <= stop.wall_time <= time.time()
    write_train_start(directory, TrainLineageInfo())
    assert read_train_stop(directory) is None
    assert os.stat(write_train_stop(directory, "X" * 500)).st_mode & 0o077 == 0  # private
    assert read_train_stop(directory) == ("X" * 200, ANY, ANY, None, False)
    (directory / TRAIN_STOP_FILE_NAME).write_text('{"exception": "E", "wall_time": "soon"}')
    assert read_train_stop(directory) == ("E", None, None, None, False)  # unreadable: None
    write_train_stop(directory, "Terminated", signal="SIGTERM")
    assert read_train_stop(directory) == ("Terminated", ANY, ANY, "SIGTERM", False)
    write_train_stop(directory, "KeyboardInterrupt", signal="SIGINT")
    assert read_train_stop(directory) == ("KeyboardInterrupt", ANY, ANY, "SIGINT", False)
    write_train_stop(directory, "RuntimeError", lost_peer=True)
    assert read_train_stop(directory) == ("RuntimeError", ANY, ANY, None, True)
    (directory / TRAIN_STOP_FILE_NAME).write_text(
        '{"exception": "E", "signal": "SIGKILL", "lost_peer": 1}'
    )
    assert read_train_stop(directory) == ("E", None, None, None, False)  # not what it writes


def test_a_stop_record_refuses_a_lost_peer_that_is_not_a_bool(tmp_path: Path) -> None:
    with pytest.raises(LineageParamTypeError, match=re.escape("lost_peer must be a bool, got 1")):
        write_train_stop(tmp_path, "RuntimeError", lost_peer=1)  # type: ignore[arg-type]
    assert not (tmp_path / TRAIN_STOP_FILE_NAME).exists()


def test_the_merge_names_the_rank_the_others_lost_not_one_that_lost_it(tmp_path: Path) -> None:
    """Rank 0's record says it raised on losing its connection (torchrun, rank 1 killed):
    the merge hands it over as such, not as the rank's own exception."""
    job = tmp_path / "job"
    for rank, last in ((0, 242), (1, 22)):
        with SummaryRecord(job / f"rank_{rank}", rank=rank) as record:
            for step in range(1, last + 1):
                record.add_value("scalar", "rankscribe/step_time", 0.0037)
                record.record(step)
    write_train_stop(job / "rank_0", "RuntimeError", lost_peer=True)
    verdicts = merge_run_dir(job).lineage.section("user_defined")
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        1,
        "lost_peer",
    )
    assert verdicts["job/lost_peer_ranks"] == "0"


@pytest.mark.parametrize("signal", ["SIGKILL", "sigterm", "sigint", 15, ""])
def test_a_stop_record_names_no_signal_but_sigterm_and_sigint(
    tmp_path: Path, signal: object
) -> None:
    expected = f"signal must be None or one of SIGTERM, SIGINT, got {signal!r}"
    with pytest.raises(LineageParamValueError, match=re.escape(expected)):
        write_train_stop(tmp_path, "Terminated", signal=signal)  # type: ignore[arg-type]
    assert not (tmp_path / TRAIN_STOP_FILE_NAME).exists()


def test_of_two_ranks_that_raised_the_merge_names_the_one_whose_record_came_first(
    tmp_path: Path,
) -> None:
    """A torchrun job: rank 1 raised; rank 0 raised 0.84 s later, its connection closed."""
    job = _stopped_job(tmp_path)
    for rank, wall in ((1, 1000.0), (0, 1000.84)):
        record = {"exception": "RuntimeError", "wall_time": wall, "host": "node-a"}
        (job / f"rank_{rank}" / TRAIN_STOP_FILE_NAME).write_text(json.dumps(record))
        os.chmod(job / f"rank_{rank}" / TRAIN_STOP_FILE_NAME, 0o600)
    verdicts = merge_run_dir(job).lineage.section("user_defined")
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        1,
        "exception",
    )
    assert verdicts["job/stopped_first_lead_seconds"] == pytest.approx(0.84)
