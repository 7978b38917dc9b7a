"""A plain SummaryRecord under a launcher: its files carry the launcher's rank, and a
directory the ranks would share gets a warning naming rankscribe.ranks.rank_dir()
(docs/layout.md, "A plain SummaryRecord under a launcher"). The launch is faked
through the environment here; tests/integration/writer runs a real mpiexec -n 3."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rankscribe.ranks.launchers import environment_variables
from rankscribe.writer import SummaryRecord

LAUNCH_VARIABLES = environment_variables()  # the ranks package's one table


@pytest.fixture
def launch(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No launcher variable from the test's own environment leaks in."""
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def written_ranks(directory: Path) -> list[str]:
    """The rank part of each summary file's name (events.out.events.summary.T.<rank>.host_MS)."""
    return sorted(name.split(".")[5] for name in os.listdir(directory) if name.endswith("_MS"))


def record_one_step(directory: Path, **kwargs: object) -> None:
    with SummaryRecord(directory, **kwargs) as record:  # type: ignore[arg-type]
        record.add_value("scalar", "loss", 1.0)
        record.record(1)


def shared_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "rank_dir(" in r.getMessage()
    ]


@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"}, "2"),
        ({"PMI_RANK": "1", "PMI_SIZE": "3"}, "1"),
        ({"PMIX_RANK": "4", "SLURM_NTASKS": "8"}, "4"),
        ({"RANK": "3", "WORLD_SIZE": "4"}, "3"),
        ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, "5"),
        # The first launcher of ranks' table wins, as in rankscribe.ranks.detect().
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, "1"),
    ],
)
def test_files_carry_the_launchers_rank(
    launch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    variables: dict[str, str],
    rank: str,
) -> None:
    for name, value in variables.items():
        launch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "shared")
    assert written_ranks(tmp_path / "shared") == [rank]
    [warning] = shared_warnings(caplog)
    assert f"rank {rank}" in warning
    assert "rankscribe.ranks.rank_dir(" in warning
    assert str(tmp_path / "shared" / f"rank_{rank}") in warning


def test_the_ranks_own_directory_is_not_warned_about(
    launch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launch.setenv("PMI_RANK", "1")
    launch.setenv("PMI_SIZE", "2")
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "job" / "rank_1")
    assert written_ranks(tmp_path / "job" / "rank_1") == ["1"]
    assert shared_warnings(caplog) == []


def test_no_launcher_and_a_launch_of_one_stay_rank_0_without_warning(
    launch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "plain")
        launch.setenv("RANK", "0")
        launch.setenv("WORLD_SIZE", "1")
        record_one_step(tmp_path / "one")
    assert written_ranks(tmp_path / "plain") == ["0"]
    assert written_ranks(tmp_path / "one") == ["0"]
    assert caplog.records == []


def test_rank_alone_is_not_torchrun(
    launch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # RANK without WORLD_SIZE is some other program's variable, as for detect().
    launch.setenv("RANK", "7")
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "plain")
    assert written_ranks(tmp_path / "plain") == ["0"]
    assert shared_warnings(caplog) == []


def test_an_explicit_rank_wins_and_a_word_rank_is_never_warned_about(
    launch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launch.setenv("OMPI_COMM_WORLD_RANK", "1")
    launch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "merged", rank="merged")
        record_one_step(tmp_path / "rank_5", rank=5)
    assert written_ranks(tmp_path / "merged") == ["merged"]
    assert written_ranks(tmp_path / "rank_5") == ["5"]
    assert shared_warnings(caplog) == []


def test_a_malformed_rank_variable_is_named_and_ignored(
    launch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launch.setenv("PMI_RANK", "one")
    launch.setenv("PMI_SIZE", "2")
    with caplog.at_level(logging.WARNING):
        record_one_step(tmp_path / "x")
    assert written_ranks(tmp_path / "x") == ["0"]
    assert any("PMI_RANK='one'" in r.getMessage() for r in caplog.records)
