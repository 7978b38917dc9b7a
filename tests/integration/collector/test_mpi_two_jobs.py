"""Two real ``mpiexec -n 2`` jobs into one summary dir never mix (docs/layout.md).

Each job runs collector_scenarios.py's ``job`` scenario with a plain
SummaryCollector: job A's rank r reports loss 1 + r, job B's 11 + r, so the
loss values in a rank directory tell which job wrote them. A job claims its
directory before any rank writes; the second job gets ``<dir>-2`` (or an
error with ``on_exists="error"``), whether it starts after the first or at
the same moment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rankscribe.writer.events import load_dir
from tests._support.launchers import Launches

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "collector_scenarios.py"
JOB_TIMEOUT = 90.0
RANKS = 2
# collector_scenarios: 2 epochs of 30 steps, collect_freq 3
COLLECTED_STEPS = [1, *range(3, 61, 3)]
FIRST_LOSS = {"A": 1.0, "B": 11.0}


def scenario(mpi: Any, tmp_path: Path, job: str, summary: Path, on_exists: str) -> list[str]:
    """The ``job`` scenario's command for ``job`` (its output directory made)."""
    out = tmp_path / f"out_{job}"
    out.mkdir()
    return mpi.python(SCENARIOS, "job", out, summary, on_exists, str(FIRST_LOSS[job]))


def start(mpi: Any, tmp_path: Path, job: str, summary: Path, on_exists: str = "new") -> Any:
    command = scenario(mpi, tmp_path, job, summary, on_exists)
    return mpi.run(RANKS, *command, cwd=tmp_path, timeout=JOB_TIMEOUT)


def records(tmp_path: Path, job: str) -> dict[int, dict[str, Any]]:
    return {
        int(path.stem.split("_")[1]): json.loads(path.read_text())
        for path in (tmp_path / f"out_{job}").glob("rank_*.json")
    }


def losses(directory: Path) -> list[tuple[int, float]]:
    """(step, loss) of every loss point in a rank directory, in file order."""
    points: list[tuple[int, float]] = []
    for event in load_dir(directory):
        if event.what != "summary" or event.step is None:
            continue
        for value in event.values:
            if (value.plugin, value.tag) == ("scalar", "loss/auto"):
                assert isinstance(value.value, float), value.value  # a scalar reads as a float
                points.append((event.step, value.value))
    return points


def assert_only(summary_dir: Path, job: str) -> None:
    """Each rank directory holds job's points of every collected step, once, and nothing else."""
    for rank in range(RANKS):
        points = losses(summary_dir / f"rank_{rank}")
        assert [step for step, _ in points] == COLLECTED_STEPS, (summary_dir, rank)
        assert {loss for _, loss in points} == {FIRST_LOSS[job] + rank}, (summary_dir, rank)


def test_a_job_started_after_another_writes_into_the_next_directory(
    mpi: Any, tmp_path: Path
) -> None:
    summary = tmp_path / "runs" / "exp"
    first = start(mpi, tmp_path, "A", summary)
    assert first.returncode == 0, first.output
    second = start(mpi, tmp_path, "B", summary)
    assert second.returncode == 0, second.output
    assert_only(summary, "A")
    assert_only(tmp_path / "runs" / "exp-2", "B")
    # every rank reports the directory its job used; rank 0 says where the second job went
    assert {r["summary_dir"] for r in records(tmp_path, "A").values()} == {str(summary)}
    assert {r["summary_dir"] for r in records(tmp_path, "B").values()} == {f"{summary}-2"}
    assert f"writes into {summary}-2 instead" in second.output
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["exp", "exp-2"]


def test_two_jobs_started_at_once_get_a_directory_each(mpi: Any, tmp_path: Path) -> None:
    summary = tmp_path / "runs" / "exp"
    # Both at once; a job past JOB_TIMEOUT is killed, with both, and the test fails.
    with Launches(JOB_TIMEOUT) as launches:
        for job in FIRST_LOSS:
            command = scenario(mpi, tmp_path, job, summary, "new")
            mpi.start(launches, RANKS, *command, cwd=tmp_path)
        runs = dict(zip(FIRST_LOSS, launches.wait(check=False), strict=True))
    assert sorted(runs) == ["A", "B"]
    for run in runs.values():
        assert run.returncode == 0, run.output
    used = {job: {r["summary_dir"] for r in records(tmp_path, job).values()} for job in FIRST_LOSS}
    assert sorted(used.values(), key=sorted) == [{str(summary)}, {f"{summary}-2"}]
    for job, [directory] in used.items():
        assert_only(Path(directory), job)


def test_on_exists_error_stops_the_second_job_before_it_writes(mpi: Any, tmp_path: Path) -> None:
    summary = tmp_path / "runs" / "exp"
    first = start(mpi, tmp_path, "A", summary)
    assert first.returncode == 0, first.output
    second = start(mpi, tmp_path, "B", summary, on_exists="error")
    assert second.returncode != 0
    assert "JobDirClaimedError" in second.output and f"{summary} belongs to job" in second.output
    assert records(tmp_path, "B") == {}
    assert_only(summary, "A")
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["exp"]
