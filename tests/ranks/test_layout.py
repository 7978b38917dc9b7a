"""rank_dir: summary_dir for one process, summary_dir/rank_<r> (0700) for a job."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rankscribe.ranks import RankInfo, rank_dir
from rankscribe.ranks.errors import RanksTypeError


def info(rank: int, world_size: int) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, "host", "pmi")


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o002)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_single_process_writes_into_summary_dir(tmp_path: Path) -> None:
    target = rank_dir(tmp_path / "runs" / "exp1", RankInfo(0, 1, 0, 1, "h", "single"))
    assert target == tmp_path / "runs" / "exp1"
    assert target.is_dir() and mode(target) == 0o700


def test_each_rank_gets_its_own_private_folder(tmp_path: Path, permissive_umask: None) -> None:
    summary = tmp_path / "exp1"
    targets = [rank_dir(summary, info(rank, 4)) for rank in range(4)]
    assert targets == [summary / f"rank_{rank}" for rank in range(4)]
    assert sorted(p.name for p in summary.iterdir()) == ["rank_0", "rank_1", "rank_2", "rank_3"]
    assert all(mode(target) == 0o700 for target in targets)
    assert mode(summary) == 0o700


def test_existing_folders_are_kept_as_they_are(tmp_path: Path) -> None:
    summary = tmp_path / "exp1"
    (summary / "rank_1").mkdir(parents=True)
    summary.chmod(0o755)
    (summary / "rank_1" / "events").write_text("kept")
    target = rank_dir(str(summary), info(1, 2))
    assert (target / "events").read_text() == "kept"
    assert mode(summary) == 0o755


def test_a_file_in_the_way_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "rank_0").write_text("")
    with pytest.raises(FileExistsError):
        rank_dir(tmp_path, info(0, 2))


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(
        RanksTypeError, match=r"summary_dir must be a path \(a str or os\.PathLike\), got 3 \(int\)"
    ):
        rank_dir(3, info(0, 2))  # type: ignore[arg-type]
    with pytest.raises(RanksTypeError, match="info must be a RankInfo"):
        rank_dir(tmp_path, (0, 2))  # type: ignore[arg-type]


def test_the_rank_directory_name_is_the_one_rule_and_reads_back(tmp_path: Path) -> None:
    from rankscribe.ranks.files import parse_rank_dir_name, rank_dir_name

    target = rank_dir(tmp_path, info(12, 16))
    assert target.name == rank_dir_name(12) == "rank_12"
    assert parse_rank_dir_name(target.name) == 12
    # Only ASCII digits without a leading zero name a rank: rank_01 and an Arabic-Indic
    # one are not rank 1 beside the real rank_1.
    for other in ("rank_01", "rank_\u0661", "rank_", "rank_-1", "rank_1 ", "Rank_1"):
        assert parse_rank_dir_name(other) is None, other
    assert parse_rank_dir_name("rank_0") == 0
