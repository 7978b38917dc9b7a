"""The summary guide's per-rank directories under a real ``mpiexec -n 2`` (docs/layout.md).

guide_per_rank_dirs.py is the guide's example as written:
``SummaryCollector(summary_dir="summary_dir" + str(get_rank()))``. Each rank
writes where it asked (``summary_dir0/rank_0``, ``summary_dir1/rank_1``); the
job's merged lineage and job view go to rank 0's directory and name rank 1's,
which the offline merge finds there. The example run a second time is a second
job: its ranks move to ``summary_dir0-2`` and ``summary_dir1-2``, and the first
job's files stay as they were.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import get_run_lineage
from rankscribe.writer.events import load_dir
from tests._support.launchers import run_bounded

HERE = Path(__file__).resolve().parent
GUIDE = HERE / "guide_per_rank_dirs.py"
TIMEOUT = 60.0
CLI = Path(sys.executable).with_name("rankscribe-lineage")


def event_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if "summary." in path.name)


def contents(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.name.endswith(".lock")
    }


@pytest.fixture(scope="module")
def guide(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """The example run twice in one directory; the first job's files after its own run."""
    base = tmp_path_factory.mktemp("guide")
    first = mpi.run(2, *mpi.python(GUIDE), cwd=base, timeout=TIMEOUT)
    assert first.returncode == 0, first.output
    after_first = {
        **{f"0/{name}": data for name, data in contents(base / "summary_dir0").items()},
        **{f"1/{name}": data for name, data in contents(base / "summary_dir1").items()},
    }
    second = mpi.run(2, *mpi.python(GUIDE), cwd=base, timeout=TIMEOUT)
    assert second.returncode == 0, second.output
    return base, after_first


def test_each_rank_writes_where_it_asked(guide: tuple[Path, dict[str, bytes]]) -> None:
    base, _ = guide
    assert sorted(p.name for p in (base / "summary_dir0").iterdir() if p.is_dir()) == ["rank_0"]
    assert sorted(p.name for p in (base / "summary_dir1").iterdir() if p.is_dir()) == ["rank_1"]
    for rank in (0, 1):
        directory = base / f"summary_dir{rank}" / f"rank_{rank}"
        names = event_files(directory)
        assert [name.endswith("_MS") for name in names].count(True) == 1, names
        assert [name.endswith("_lineage") for name in names].count(True) == 1, names
        losses = [
            value.tag
            for event in load_dir(directory)
            for value in event.values
            if value.tag == "loss/auto"
        ]
        assert losses, f"rank {rank} recorded no loss"
    # only rank 0's directory holds the job's files
    assert [name for name in event_files(base / "summary_dir1") if "merged" in name] == []
    job_files = event_files(base / "summary_dir0")
    assert [".merged." in name for name in job_files].count(True) == 1, job_files
    assert [".job." in name for name in job_files].count(True) == 1, job_files


def test_the_job_record_names_the_other_ranks(guide: tuple[Path, dict[str, bytes]]) -> None:
    base, _ = guide
    job = get_run_lineage(str(base / "summary_dir0"))
    assert job is not None
    notes = job.section("user_defined")
    assert notes["ranks_reported"] == 2 and notes["ranks_missing"] == ""
    assert json.loads(notes["rank_dirs"]) == {"1": str(base / "summary_dir1" / "rank_1")}
    assert job.section("hyper_parameters")["device_num"] == 2
    assert job.section("hyper_parameters")["learning_rate"] == pytest.approx(0.03)
    # The offline merge of rank 0's directory finds rank 1 where it wrote.
    merge = run_bounded([CLI, "merge", base / "summary_dir0"], timeout=TIMEOUT, stderr_apart=True)
    assert "(ranks 0,1)" in merge.stdout, merge.stdout + merge.stderr


def test_a_second_run_is_a_second_job(guide: tuple[Path, dict[str, bytes]]) -> None:
    base, after_first = guide
    assert sorted(p.name for p in base.iterdir()) == [
        "summary_dir0",
        "summary_dir0-2",
        "summary_dir1",
        "summary_dir1-2",
    ]
    assert event_files(base / "summary_dir1-2" / "rank_1")
    second = get_run_lineage(str(base / "summary_dir0-2"))
    assert second is not None
    assert json.loads(second.section("user_defined")["rank_dirs"]) == {
        "1": str(base / "summary_dir1-2" / "rank_1")
    }
    # The ranks' files of the first job, byte for byte (the offline merge above
    # rewrote the job's own merged lineage and job view).
    now = {
        **{f"0/{name}": data for name, data in contents(base / "summary_dir0").items()},
        **{f"1/{name}": data for name, data in contents(base / "summary_dir1").items()},
    }
    ranks_now = {name: data for name, data in now.items() if "rank_" in name}
    ranks_then = {name: data for name, data in after_first.items() if "rank_" in name}
    assert len(ranks_then) > 4
    assert ranks_now == ranks_then
