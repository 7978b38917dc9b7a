"""Every rank's machine under real ``mpiexec``: the samples, their bands, and the evidence.

Two launches of system_scenarios.py (2 ranks each): ``bands`` samples every
0.5 s (set by ``RANKSCRIBE_SYSTEM_INTERVAL``) for a few seconds of training,
and ``hog`` runs a job whose rank 1 shares its core with a busy-looping
process. Checked from the files: each rank's ``rankscribe/system/*`` points,
the job file's bands of them, and the merged lineage's straggler verdict with
its evidence.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview import rank_dir_arrays, verdict_lines
from rankscribe.lineage.recording import parse_run
from rankscribe.writer.reader import list_summary_files, scalar_arrays

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "system_scenarios.py"
JOB_TIMEOUT = 150.0
INTERVAL, HOG_RANK = 0.5, 1  # system_scenarios
CPU, RSS = "rankscribe/system/cpu_percent", "rankscribe/system/rss_bytes"


def launch(mpi: Any, scenario: str, out: Path) -> None:
    out.mkdir(parents=True)
    run = mpi.run(2, *mpi.python(SCENARIOS, scenario, out), cwd=out, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output


def user_defined(job_dir: Path) -> dict[str, Any]:
    lineage = parse_run(str(job_dir)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


@pytest.fixture(scope="module")
def bands(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("system") / "bands"
    launch(mpi, "bands", out)
    return out


def test_each_rank_samples_its_process_every_interval(bands: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    for rank in (0, 1):
        seconds = float((bands / f"seconds_{rank}.txt").read_text())
        columns = rank_dir_arrays(bands / "bands" / f"rank_{rank}")
        for tag in (CPU, RSS):
            steps, _ = columns[tag]
            # A sample at every multiple of the interval the training spanned (the first
            # may fall before training starts, the last after it ends).
            assert len(steps) >= int(seconds / INTERVAL) - 2, (tag, len(steps), seconds)
            assert np.all(np.diff(steps) > 0)  # one sample a step, in step order
        _, rss = columns[RSS]
        _, cpu = columns[CPU]
        assert np.all(rss > 10e6)
        assert np.all((cpu >= 0) & (cpu <= 100 * cpus))


def test_the_job_files_hold_the_bands_of_the_samples(bands: Path) -> None:
    [job_file] = list_summary_files(bands / "bands", "summary")
    curves = scalar_arrays(job_file)
    ranks = {rank: rank_dir_arrays(bands / "bands" / f"rank_{rank}") for rank in (0, 1)}
    for tag in (CPU, RSS):
        for statistic in ("mean", "min", "max", "std", "ranks"):
            assert f"{tag}/{statistic}" in curves
        steps, means = curves[f"{tag}/mean"]
        # At a step both ranks sampled, the band is over both.
        both = np.intersect1d(ranks[0][tag][0], ranks[1][tag][0])
        for step in both[:3]:
            values = [ranks[rank][tag][1][ranks[rank][tag][0] == step][-1] for rank in (0, 1)]
            assert means[steps == step][-1] == pytest.approx(np.mean(values), rel=1e-6)
        # Once both ranks have sampled, every band point is over both, each rank's latest
        # sample at that step (they sample together but may label the moment with
        # neighbouring steps); before a rank's first sample there is nothing to hold.
        both_from = max(int(ranks[rank][tag][0][0]) for rank in (0, 1))
        count_steps, counts = curves[f"{tag}/ranks"]
        assert set(counts[count_steps >= both_from].tolist()) == {2.0}, (both_from, counts)
        for step, mean in zip(steps.tolist(), means.tolist(), strict=True):
            latest = []
            for rank in (0, 1):
                rank_steps, rank_values = ranks[rank][tag]
                if np.any(rank_steps <= step):
                    latest.append(rank_values[rank_steps <= step][-1])
            assert mean == pytest.approx(np.mean(latest), rel=1e-5), (tag, step)
    # Ordinary tags: never judged as timings.
    timing = user_defined(bands / "bands").get("job/straggler_timing", "")
    assert not str(timing).startswith("rankscribe/system/")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin ranks to")
def test_a_rank_sharing_its_core_is_named_with_its_cpu_evidence(mpi: Any, tmp_path: Path) -> None:
    launch(mpi, "hog", tmp_path / "hog")
    keys = user_defined(tmp_path / "hog" / "hog")
    assert keys["job/straggler_rank"] == HOG_RANK, keys
    evidence = keys[f"job/straggler_evidence/{HOG_RANK}"]
    assert "CPU" in evidence or "context switches" in evidence, evidence
    assert keys["job/straggler_evidence"] == evidence
    assert f"evidence: rank {HOG_RANK}: {evidence}" in verdict_lines(keys)
