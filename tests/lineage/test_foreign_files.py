"""Files another user planted at a job's or a base's well-known names are not believed.

docs/layout.md, "Files of another user": at the train-start record, the rank-dirs
note, ``_groups``, the lineage index and the live state file, a file that does not
belong to the user running the command (root's, when root runs it) is refused with a
warning naming its owner. The tests run as root (CI): a second user's file is one
given to uid 65534 (nobody) with ``os.chown``; ``test_as_a_second_user`` runs the
commands as that user, over files root planted.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rankscribe.jobview import live_lines
from rankscribe.jobview.protocol import LIVE_STATE_NAME
from rankscribe.lineage import get_run_lineage, group_runs, merge_run_dir
from rankscribe.lineage.cli import main
from rankscribe.lineage.recording import (
    HyperParameters,
    TrainLineageInfo,
    rank_dirs_note,
    read_train_stop,
    write_train_start,
    write_train_stop,
)
from rankscribe.ranks.files import RANK_DIRS_FILE_NAME, write_rank_dirs
from tests._support.launchers import Finished
from tests._support.second_user import as_second_user, why_not
from tests.lineage.test_groups import six_runs

NOBODY = 65534
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="giving a file to uid 65534 needs root")
THEIRS = "it belongs to uid 65534 (nobody), not to this user, uid 0 (root)"
ROOTS = "it belongs to uid 0 (root), not to this user, uid 65534 (nobody)"
BIN = Path(sys.executable).parent
GOLDEN = Path(__file__).resolve().parents[1] / "compat" / "data" / "mindspore-2.10"


def give_away(*paths: Path) -> None:
    for path in paths:
        os.lchown(path, NOBODY, NOBODY)


@pytest.fixture
def job(tmp_path: Path, lw: Any) -> Path:
    """A job of three ranks in ``runs/exp1``: rank 2 was stopped before the end of training."""
    directory = tmp_path / "runs" / "exp1"
    for rank in range(2):
        lw.write(
            directory / f"rank_{rank}",
            [lw.train(optimizer="Adam", learning_rate=0.1, device_num=3, network="Net")],
        )
    lw.write(directory / "rank_2", [lw.graph({"op_type": "Batch"})])  # no train lineage
    return directory


def start_record(directory: Path, optimizer: str, device_num: int) -> Path:
    lineage = TrainLineageInfo(
        hyper_parameters=HyperParameters(optimizer=optimizer, device_num=device_num)
    )
    return Path(write_train_start(directory, lineage))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


# ---------------------------------------------------------------- the train-start record


def test_the_users_own_start_record_stands_in_for_the_train_lineage(job: Path) -> None:
    start_record(job / "rank_2", "Adam", 3)
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2] and outcome.ranks_missing == []


@needs_root
def test_another_users_start_record_is_not_merged(
    job: Path, caplog: pytest.LogCaptureFixture
) -> None:
    planted = start_record(job / "rank_2", "FORGED", 2**31 - 1)
    give_away(planted)
    outcome = merge_run_dir(job)
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    assert "FORGED" not in json.dumps(lineage.to_json_dict())
    assert lineage.section("hyper_parameters")["optimizer"] == "Adam"
    assert lineage.section("hyper_parameters")["device_num"] == 3
    assert outcome.missing_ranges == []  # rank 2 has a lineage file: it reported
    assert f"skipping the training start record {planted}: {THEIRS}" in warnings_of(caplog)


@needs_root
def test_another_users_stop_record_names_nobody(
    job: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A planted stop record would blame its rank for a job's failure: another user's is
    not read (the merge reads each rank's through read_train_stop)."""
    planted = Path(write_train_stop(job / "rank_2", "ForgedError"))
    stop = read_train_stop(job / "rank_2")
    assert stop is not None and stop.exception == "ForgedError"
    give_away(planted)
    assert read_train_stop(job / "rank_2") is None
    assert f"skipping the training stop record {planted}: {THEIRS}" in warnings_of(caplog)


def test_a_world_size_beyond_any_machine_is_not_believed(
    job: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The user's own start record, damaged: two billion missing ranks were reported.
    start_record(job / "rank_2", "Adam", 2**31 - 1)
    outcome = merge_run_dir(job)
    assert outcome.missing_ranges == [] and outcome.ranks_reported == [0, 1, 2]
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    assert lineage.section("hyper_parameters")["device_num"] == 3
    assert lineage.section("user_defined")["ranks_expected"] == 3
    assert (
        "rank 2's lineage gives device_num 2147483647, more ranks than 1048576: not believed "
        "as the world size"
    ) in warnings_of(caplog)


# ---------------------------------------------------------------- the rank-dirs note


def plant_note(job: Path, entries: dict[str, Any]) -> Path:
    path = job / RANK_DIRS_FILE_NAME
    path.write_text(json.dumps({"rank_dirs": entries}))
    path.chmod(0o400)
    return path


def test_a_rank_number_of_thousands_of_digits_is_no_rank(
    job: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # int() of over 4,300 digits raised ValueError out of the merge and out of rank 0's end.
    plant_note(job, {"9" * 4301: str(job.parent / "x" / "rank_1")})
    assert rank_dirs_note(job) == {"rank_dirs_refused": 1}
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2]
    note = job / RANK_DIRS_FILE_NAME
    assert (
        f"not read as a rank's directory ({note}): {note}: the rank '{'9' * 40}' is not a rank "
        "number"
    ) in warnings_of(caplog)


def test_a_note_names_only_rank_dirs_in_the_jobs_parent_directory(
    job: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = job.parent / "exp1-rank3" / "rank_3"
    lw.write(elsewhere, [lw.train(optimizer="Adam", device_num=4, network="Net")])
    outside = Path(tempfile.mkdtemp()) / "rank_4"
    lw.write(outside, [lw.train(optimizer="OUTSIDE", device_num=5, network="Net")])
    try:
        plant_note(
            job,
            {
                "3": str(elsewhere),
                "4": str(outside),  # a real rank dir, outside the job's parent
                "5": "/etc",  # not named rank_5
                "6": f"{job}/../../rank_6",  # not normalised: leaves the parent
                "1": str(job / "rank_0"),  # rank 0's directory a second time
            },
        )
        outcome = merge_run_dir(job)
    finally:
        shutil.rmtree(outside.parent)
    assert outcome.ranks_reported == [0, 1, 2, 3] and outcome.ranks_missing == []
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    notes = lineage.section("user_defined")
    assert json.loads(notes["rank_dirs"]) == {"3": str(elsewhere)}
    assert notes["rank_dirs_count"] == 1 and notes["rank_dirs_refused"] == 4
    assert lineage.section("hyper_parameters")["optimizer"] == "Adam"
    text = "\n".join(warnings_of(caplog))
    assert f"rank 4's directory '{outside}' is outside the job's parent directory" in text
    assert "rank 5's directory '/etc' is not named rank_5" in text
    assert "rank 6's directory" in text and "is not written as the job writes it" in text
    assert f"rank 1's directory '{job / 'rank_0'}' is not named rank_1" in text


def test_a_recorded_directory_that_is_gone_is_a_missing_rank(job: Path) -> None:
    start_record(job / "rank_2", "Adam", 3)
    write_rank_dirs(job, {3: str(job.parent / "exp1-rank3" / "rank_3")})  # never written
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2] and outcome.ranks_missing == [3]
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    assert lineage.section("user_defined")["ranks_missing"] == "3"


def test_a_recorded_directory_reached_through_a_link_outside_is_not_read(
    job: Path, lw: Any, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    lw.write(outside / "rank_3", [lw.train(optimizer="OUTSIDE", device_num=4, network="Net")])
    (job.parent / "through").symlink_to(outside, target_is_directory=True)
    write_rank_dirs(job, {3: str(job.parent / "through" / "rank_3")})
    outcome = merge_run_dir(job)
    assert outcome.ranks_missing == [3]
    assert rank_dirs_note(job) == {"rank_dirs_refused": 1}


def test_what_the_note_says_is_summarised_not_copied(job: Path) -> None:
    # 13 MB of entries went into the merged lineage whole.
    parent = job.parent
    entries = {str(rank): f"{parent}/d{rank}/rank_{rank}" for rank in range(3, 100_003)}
    entries["2000000"] = "x" * 3_000_000  # no path: refused, counted
    note = plant_note(job, entries)
    assert note.stat().st_size > 10_000_000
    outcome = merge_run_dir(job)
    assert outcome.missing_ranges == [(3, 100_002)]
    notes = get_run_lineage(str(job)).section("user_defined")  # type: ignore[union-attr]
    assert notes["rank_dirs_count"] == 100_000 and notes["rank_dirs_refused"] == 1
    listed = json.loads(notes["rank_dirs"])
    assert len(listed) == 64 and listed["3"] == f"{parent}/d3/rank_3"
    assert len(notes["rank_dirs"]) <= 8192
    assert os.path.getsize(outcome.path) < 100_000


@needs_root
def test_another_users_note_is_not_read(
    job: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = job.parent / "exp1-rank3" / "rank_3"
    lw.write(elsewhere, [lw.train(optimizer="Adam", device_num=4, network="Net")])
    give_away(Path(write_rank_dirs(job, {3: str(elsewhere)})))
    assert rank_dirs_note(job) == {"rank_dirs_refused": 1}
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2]
    note = job / RANK_DIRS_FILE_NAME
    assert (
        f"not read as a rank's directory ({note}): refusing to read {note}: {THEIRS}"
        in warnings_of(caplog)
    )


@needs_root
def test_another_users_directory_is_no_rank_of_the_job(
    job: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    theirs = job.parent / "theirs" / "rank_3"
    lw.write(theirs, [lw.train(optimizer="FORGED", device_num=4, network="Net")])
    give_away(theirs)
    write_rank_dirs(job, {3: str(theirs)})
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2] and outcome.ranks_missing == [3]
    assert "FORGED" not in json.dumps(get_run_lineage(str(job)).to_json_dict())  # type: ignore[union-attr]
    note = job / RANK_DIRS_FILE_NAME
    assert (
        f"not read as a rank's directory ({note}): rank 3's directory {theirs}: {THEIRS}"
        in warnings_of(caplog)
    )


# ---------------------------------------------------------------- the live state file


@needs_root
def test_another_users_live_state_is_not_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / LIVE_STATE_NAME
    state.write_text(json.dumps({"verdicts": {"job/stragglers": "FORGED"}, "interval": 3}))
    state.chmod(0o444)
    assert live_lines(tmp_path)  # the user's own: shown
    give_away(state)
    assert live_lines(tmp_path) == []
    assert f"refusing to read {state}: {THEIRS}: shown as no live view" in warnings_of(caplog)


# ---------------------------------------------------------------- as a second user


def command_as_nobody(*arguments: str | Path) -> Finished:
    return as_second_user(BIN / "rankscribe-lineage", *arguments)


@functools.cache
def _second_user_cannot_run() -> str | None:
    return why_not(BIN / "rankscribe-lineage", "--help", env="lineage")


def as_a_second_user(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` only where the second user can run the command line (else skip, why)."""

    @functools.wraps(test)
    def checked(*args: Any, **kwargs: Any) -> None:
        reason = _second_user_cannot_run()
        if reason is not None:
            pytest.skip(reason)
        test(*args, **kwargs)

    return checked


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory the second user can reach (pytest's tmp_path is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="rankscribe-shared-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def hand_over(root: Path) -> None:
    """Everything under ``root`` becomes the second user's, as if it had written it."""
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            os.lchown(os.path.join(directory, name), NOBODY, NOBODY)
    os.lchown(root, NOBODY, NOBODY)


@needs_root
@as_a_second_user
def test_as_a_second_user_roots_files_are_refused(shared: Path, lw: Any) -> None:
    # The second user's job, into which root planted a start record and a note.
    job = shared / "runs" / "exp1"
    lw.write(job / "rank_0", [lw.train(optimizer="Adam", device_num=2, network="Net")])
    lw.write(job / "rank_1", [lw.graph({"op_type": "Batch"})])
    theirs = shared / "runs" / "exp1-rank3" / "rank_3"
    lw.write(theirs, [lw.train(optimizer="Adam", device_num=2, network="Net")])
    hand_over(shared / "runs")
    planted = start_record(job / "rank_1", "FORGED", 2**31 - 1)  # root's, readable by all
    note = Path(write_rank_dirs(job, {3: str(theirs)}))
    planted.chmod(0o644)
    note.chmod(0o444)
    merged = command_as_nobody("merge", job)
    assert merged.returncode == 0, merged.stderr
    assert "(ranks 0,1)" in merged.stdout, merged.stdout
    assert f"skipping the training start record {planted}: {ROOTS}" in merged.stderr
    assert f"refusing to read {note}: {ROOTS}" in merged.stderr
    lineage = get_run_lineage(str(job))
    assert lineage is not None and "FORGED" not in json.dumps(lineage.to_json_dict())
    assert lineage.section("hyper_parameters")["device_num"] == 2
    # Root runs the same merge: root's start record is its own, believed.
    assert merge_run_dir(job).ranks_reported == [0, 1]
    assert "FORGED" in json.dumps(get_run_lineage(str(job)).to_json_dict())  # type: ignore[union-attr]


@needs_root
@as_a_second_user
def test_as_a_second_user_roots_index_and_live_state_are_refused(shared: Path) -> None:
    base = shared / "base"
    shutil.copytree(GOLDEN / "lineage_train_eval", base / "golden")
    hand_over(base)
    index = base / ".rankscribe-lineage-index.npz"  # docs/lineage-queries.md, "The index"
    first = command_as_nobody("query", base)
    assert first.returncode == 0 and index.stat().st_uid == NOBODY, first.stderr
    os.chown(index, 0, 0)  # root's now, readable by all
    index.chmod(0o644)
    second = command_as_nobody("query", base)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == "1 matching run"
    assert f"ignoring lineage index {index} ({ROOTS}); reading the runs" in second.stderr
    state = base / "golden" / LIVE_STATE_NAME
    state.write_text(json.dumps({"verdicts": {"job/stragglers": "FORGED"}, "interval": 3}))
    shown = command_as_nobody("show", base / "golden")
    assert shown.returncode == 0, shown.stderr
    assert "FORGED" not in shown.stdout
    warning = f"refusing to read {state}: {ROOTS}: shown as no live view"
    assert shown.stderr.count(warning) == 1, shown.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o644 and state.stat().st_uid == 0


# ---------------------------------------------------------------- _groups in a shared base


@needs_root
def test_group_leaves_another_users_groups_and_still_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A sticky base (as /tmp): `group` failed with a bare "[Errno 1] Operation not permitted".
    base = tmp_path / "runs"
    six_runs(base)
    base.chmod(0o1777)
    planted = base / "_groups" / "learning_rate=0.1"
    planted.mkdir(parents=True)
    (planted / "events.out.tfevents.1.fake.job").write_bytes(b"fake curves")
    give_away(base / "_groups", planted, planted / "events.out.tfevents.1.fake.job")
    code = main(["group", str(base), "--by", "learning_rate"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["learning_rate", "runs", "loss", "metric/acc"]
    assert lines[-1] == "2 groups of 6 runs; values are mean ± std (min–max) over a group's runs"
    assert (
        f"the groups' curves are not written: {base / '_groups'}, {THEIRS}; what a viewer shows "
        "under it is not these groups' (its owner, or the base's, can remove it)"
    ) in warnings_of(caplog)
    assert sorted(os.listdir(base / "_groups")) == ["learning_rate=0.1"]  # left as it was
    assert not [name for name in os.listdir(base) if name.startswith(".rankscribe-groups-")]
    grouped = group_runs(base, by="learning_rate")
    assert grouped.directory is None and all(group.directory is None for group in grouped.groups)


@needs_root
@as_a_second_user
def test_as_a_second_user_group_leaves_roots_groups(shared: Path) -> None:
    base = shared / "runs"
    six_runs(base)
    hand_over(base)
    (base / "_groups").mkdir(mode=0o755)  # root's
    result = command_as_nobody("group", base, "--by", "learning_rate")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("2 groups of 6 runs")
    assert f"the groups' curves are not written: {base / '_groups'}, {ROOTS}" in result.stderr
    assert os.listdir(base / "_groups") == [] and (base / "_groups").stat().st_uid == 0
    # Root's own `_groups` is root's to replace.
    assert group_runs(base, by="learning_rate").directory == str(base / "_groups")
