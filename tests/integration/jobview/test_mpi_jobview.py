"""The job view under a real ``mpiexec -n 3`` (the ``mpi`` tox env).

Two launches: ``verdicts`` trains a clean job and a faulty one (a slow rank, a
rank whose parameters are perturbed) and rank 0 writes each job's view at the
end of training; ``crash`` has a rank call ``os._exit(1)`` mid-training, so
MPICH kills the job before any merge, and the offline ``rankscribe-lineage
merge`` writes the job view afterwards. Everything is checked from the files:
the ranks' own files and the job's, read with ``rankscribe.writer.reader``,
and the merged lineage's ``user_defined`` verdicts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview.feed import FINGERPRINT_TAG, STEP_TIME_TAG, SYSTEM_TAG_PREFIX
from rankscribe.lineage.recording import parse_run
from rankscribe.writer.reader import scalars
from tests._support.launchers import run_bounded

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "jobview_scenarios.py"
RANKS = 3
#: No launch may outlive this, whatever happens inside it.
JOB_TIMEOUT = 150.0
STEPS = 30  # jobview_scenarios.STEPS
SLOW_RANK, DIVERGED_RANK, PERTURB_STEP = 2, 1, 12  # jobview_scenarios
DYING_RANK, DYING_STEP = 1, 15  # jobview_scenarios
STATISTICS = ("mean", "min", "max", "std", "ranks", "min_rank", "max_rank")

Points = dict[str, dict[int, float]]


def launch(mpi: Any, scenario: str, out: Path) -> Any:
    out.mkdir(parents=True)
    return mpi.run(RANKS, *mpi.python(SCENARIOS, scenario, out), cwd=out, timeout=JOB_TIMEOUT)


def read_scalars(directory: Path, *, job: bool = False) -> Points:
    """``tag -> {step: value}`` of the ``_MS`` files of ``directory`` (the job's, or a rank's)."""
    paths = [
        path
        for path in directory.iterdir()
        if path.name.endswith("_MS") and (".job." in path.name) == job
    ]
    assert paths, f"no summary file in {directory}"
    found: Points = {}
    for path in paths:
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def user_defined(job_dir: Path) -> dict[str, Any]:
    lineage = parse_run(str(job_dir)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


def held_samples(ranks: dict[int, Points], tag: str, step: int) -> dict[int, float]:
    """Each rank's machine sample held at ``step`` (docs/job-view.md, the held bands).

    A rank's latest sample at or before ``step`` holds while the rank ran: through
    its last recorded step + 1, or its last sample if that came later.
    """
    held: dict[int, float] = {}
    for rank, points in ranks.items():
        own = points.get(tag, {})
        earlier = [at for at in own if at <= step]
        last_step = max(max(steps) for steps in points.values() if steps)
        if earlier and step <= max(*own, last_step + 1):
            held[rank] = own[max(earlier)]
    return held


def assert_job_statistics_match_the_ranks(job_dir: Path) -> None:
    """Per tag and step: the job file's statistics are those of the rank files' points.

    A machine sample (``rankscribe/system/*``) is taken on a wall-clock grid, so
    ranks that run at different paces sample at different steps: its band at a
    step is over every running rank's latest sample (:func:`held_samples`).
    """
    ranks = {rank: read_scalars(job_dir / f"rank_{rank}") for rank in range(RANKS)}
    job = read_scalars(job_dir, job=True)
    tags = set().union(*(set(points) for points in ranks.values()))
    assert {"loss/auto", STEP_TIME_TAG, FINGERPRINT_TAG} <= tags
    for tag in sorted(tags):
        steps = sorted(set().union(*(set(ranks[rank].get(tag, {})) for rank in ranks)))
        statistics = ("ranks",) if tag == FINGERPRINT_TAG else STATISTICS
        for name in statistics:
            assert sorted(job[f"{tag}/{name}"]) == steps, f"{tag}/{name}"
        for step in steps:
            if tag.startswith(SYSTEM_TAG_PREFIX):
                points = held_samples(ranks, tag, step)
            else:
                points = {
                    rank: ranks[rank][tag][step]
                    for rank in ranks
                    if step in ranks[rank].get(tag, {})
                }
            holders = sorted(points)
            values = np.array([points[rank] for rank in holders])
            assert job[f"{tag}/ranks"][step] == len(holders), f"{tag}/ranks at step {step}"
            if tag == FINGERPRINT_TAG:
                continue
            expected = {
                "mean": float(np.float32(values.mean())),
                "std": float(np.float32(values.std())),
                "min": float(values.min()),
                "max": float(values.max()),
                "min_rank": float(holders[int(np.argmin(values))]),
                "max_rank": float(holders[int(np.argmax(values))]),
            }
            for name, value in expected.items():
                assert job[f"{tag}/{name}"][step] == pytest.approx(value, rel=1e-6, abs=1e-9), (
                    f"{tag}/{name} at step {step}"
                )


@pytest.fixture(scope="module")
def verdict_jobs(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jobview") / "out"
    run = launch(mpi, "verdicts", out)
    assert run.returncode == 0, run.output
    return out


def test_every_rank_records_its_step_time_and_fingerprint(verdict_jobs: Path) -> None:
    for job in ("clean", "faulty"):
        for rank in range(RANKS):
            points = read_scalars(verdict_jobs / job / f"rank_{rank}")
            assert sorted(points[STEP_TIME_TAG]) == list(range(1, STEPS + 1))
            # step 0: when training begins; then every step (collect_freq 1)
            assert sorted(points[FINGERPRINT_TAG]) == list(range(STEPS + 1))
            assert all(seconds >= 0.009 for seconds in points[STEP_TIME_TAG].values())


@pytest.mark.parametrize("job", ["clean", "faulty"])
def test_the_job_file_holds_the_cross_rank_statistics_of_every_tag(
    verdict_jobs: Path, job: str
) -> None:
    job_dir = verdict_jobs / job
    [job_file] = [path.name for path in job_dir.iterdir() if path.name.endswith("_MS")]
    assert ".job." in job_file
    assert_job_statistics_match_the_ranks(job_dir)


def test_a_clean_run_flags_nothing(verdict_jobs: Path) -> None:
    notes = user_defined(verdict_jobs / "clean")
    assert notes["job/ranks_reported"] == RANKS
    assert notes["job/missing_ranks"] == ""
    assert notes["job/straggler_rank"] == -1
    assert notes["job/divergence_check"] == "checked"
    assert notes["job/diverged_ranks"] == ""
    assert notes["job/nonfinite_loss_ranks"] == ""
    assert notes["job/stopped_first_rank"] == -1
    assert all(notes[f"job/last_step/{rank}"] == STEPS for rank in range(RANKS))
    fingerprints = read_scalars(verdict_jobs / "clean", job=True)
    assert set(fingerprints[f"{FINGERPRINT_TAG}/distinct"].values()) == {1.0}


def test_the_slow_rank_is_the_straggler(verdict_jobs: Path) -> None:
    notes = user_defined(verdict_jobs / "faulty")
    assert notes["job/straggler_rank"] == SLOW_RANK
    assert notes["job/step_time_skew"] > 1.5  # 25 ms against 10 ms
    slowest = read_scalars(verdict_jobs / "faulty", job=True)[f"{STEP_TIME_TAG}/slowest_rank"]
    assert sum(rank == SLOW_RANK for rank in slowest.values()) > STEPS // 2


def test_the_perturbed_rank_is_diverged_at_the_step_it_was_perturbed(verdict_jobs: Path) -> None:
    notes = user_defined(verdict_jobs / "faulty")
    assert notes["job/divergence_check"] == "checked"
    assert notes["job/diverged_ranks"] == str(DIVERGED_RANK)
    assert notes["job/diverged_first_step"] == PERTURB_STEP
    assert notes[f"job/diverged_step/{DIVERGED_RANK}"] == PERTURB_STEP
    distinct = read_scalars(verdict_jobs / "faulty", job=True)[f"{FINGERPRINT_TAG}/distinct"]
    assert {step for step, count in distinct.items() if count > 1} == set(
        range(PERTURB_STEP, STEPS + 1)
    )


def test_a_rank_that_dies_is_named_by_the_offline_merge(mpi: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = launch(mpi, "crash", out)
    assert run.returncode != 0, run.output  # MPICH ended the job
    job_dir = out / "job"
    assert not [path for path in job_dir.iterdir() if ".job." in path.name]  # nobody merged
    merge = run_bounded(
        [Path(sys.executable).with_name("rankscribe-lineage"), "merge", job_dir],
        timeout=120,
        check=False,
        stderr_apart=True,
    )
    assert merge.returncode == 0, merge.stdout + merge.stderr
    [job_file] = [path.name for path in job_dir.iterdir() if path.name.endswith("_MS")]
    assert ".job." in job_file
    notes = user_defined(job_dir)
    assert notes["job/stopped_first_rank"] == DYING_RANK
    # it died inside step DYING_STEP: its last recorded step is the one before
    assert notes[f"job/last_step/{DYING_RANK}"] == DYING_STEP - 1
    assert notes["job/stopped_first_step"] == DYING_STEP - 1
    others = [notes[f"job/last_step/{rank}"] for rank in range(RANKS) if rank != DYING_RANK]
    assert min(others) > DYING_STEP
    assert_job_statistics_match_the_ranks(job_dir)
