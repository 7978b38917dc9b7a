"""A real ``torchrun --nproc_per_node 2`` job (gloo, CPU) training with SummaryCollector.

No rendezvous_dir is given: the collector's lineage merge meets through the
store of the process group the script initialised. Each test runs
torchrun_train.py once, bounded by JOB_TIMEOUT.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import get_summary_lineage
from rankscribe.lineage.recording import parse_run
from rankscribe.ranks.files import JOB_RENDEZVOUS_DIRNAME
from rankscribe.writer.events import load_dir
from tests._support.launchers import clean_environment, run_bounded, torchrun

SCRIPT = Path(__file__).resolve().parent / "torchrun_train.py"
#: No job may outlive this, whatever happens inside it (importing torch is slow here).
JOB_TIMEOUT = 180
MERGE_TIMEOUT = 4.0
#: Seconds rank 0 may take past the merge timeout (polling, writing, a busy machine).
SLACK = 3.0


@dataclass
class Job:
    returncode: int
    output: str
    seconds: float
    summary: Path
    ranks: dict[int, dict[str, Any]]


def run_torchrun(tmp_path: Path, scenario: str, merge_timeout: float) -> Job:
    summary, out = tmp_path / "summary", tmp_path / "out"
    out.mkdir()
    command = torchrun(SCRIPT, summary, out, scenario, str(merge_timeout))
    result = run_bounded(
        command, env=clean_environment(), cwd=tmp_path, timeout=JOB_TIMEOUT, check=False
    )
    ranks = {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}
    return Job(result.returncode, result.output, result.seconds, summary, ranks)


def user_defined(summary: Path) -> dict[str, Any]:
    lineage = parse_run(str(summary)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


def scalars(directory: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of the summary files directly in ``directory``."""
    found: dict[str, dict[int, float]] = {}
    for event in load_dir(directory):
        if event.what == "summary" and event.step is not None:
            for value in event.values:
                found.setdefault(value.tag, {})[event.step] = value.value
    return found


def job_files(summary: Path) -> list[str]:
    return [name for name in os.listdir(summary) if ".job." in name and name.endswith("_MS")]


def assert_job_curves(summary: Path, ranks: list[int]) -> None:
    """The job file's loss statistics are those of ``ranks``' own files, step by step."""
    assert len(job_files(summary)) == 1, os.listdir(summary)
    job = scalars(summary)
    losses = [scalars(summary / f"rank_{rank}")["loss/auto"] for rank in ranks]
    assert sorted(job["loss/auto/mean"]) == sorted(losses[0])
    for step in losses[0]:
        points = [loss[step] for loss in losses]
        assert job["loss/auto/ranks"][step] == len(ranks)
        assert job["loss/auto/mean"][step] == pytest.approx(sum(points) / len(points), rel=1e-6)
        assert (job["loss/auto/min"][step], job["loss/auto/max"][step]) == (
            min(points),
            max(points),
        )
    steps = scalars(summary / f"rank_{ranks[0]}")["rankscribe/step_time"]
    assert set(job["rankscribe/step_time/ranks"].values()) == {len(ranks)}
    assert sorted(job["rankscribe/step_time/ranks"]) == sorted(steps)


def merged_lineage_files(summary: Path) -> list[str]:
    return [
        name for name in os.listdir(summary) if ".merged." in name and name.endswith("_lineage")
    ]


def test_torchrun_job_merges_with_no_rendezvous_dir(tmp_path: Path) -> None:
    job = run_torchrun(tmp_path, "clean", merge_timeout=60.0)
    assert job.returncode == 0, job.output
    assert sorted(job.ranks) == [0, 1], job.output
    assert {(r["launcher"], r["finished"], r["steps"]) for r in job.ranks.values()} == {
        ("torchrun", True, 8)
    }
    assert "not started by an MPI launcher" not in job.output
    assert "cannot be merged" not in job.output
    assert len(merged_lineage_files(job.summary)) == 1, os.listdir(job.summary)
    notes = user_defined(job.summary)
    assert (notes["ranks_reported"], notes["ranks_expected"], notes["ranks_missing"]) == (2, 2, "")
    lineage = get_summary_lineage(str(job.summary))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["hyper_parameters"]["parallel_mode"] == "data_parallel"
    assert lineage["train_dataset"]["train_dataset_size"] == 16  # 8 rows on each rank
    # The ranks met in torch's store: no folder was needed in the summary dir.
    assert not (job.summary / JOB_RENDEZVOUS_DIRNAME).exists()
    assert_job_curves(job.summary, [0, 1])
    assert (notes["job/ranks_reported"], notes["job/missing_ranks"]) == (2, "")


def test_a_rank_that_skips_the_merge_is_named_and_rank_0_finishes(tmp_path: Path) -> None:
    job = run_torchrun(tmp_path, "skip", merge_timeout=MERGE_TIMEOUT)
    assert job.returncode == 0, job.output
    assert job.ranks[1]["finished"] is False and job.ranks[1]["steps"] == 3
    assert job.ranks[0]["finished"] is True
    # rank 0 waited for rank 1 at the merge, and no longer than the timeout
    assert MERGE_TIMEOUT <= job.ranks[0]["train_seconds"] < MERGE_TIMEOUT + SLACK
    # The job view's last round and the lineage gather share merge_timeout: rank 0 waited
    # for rank 1 in the tree's last round, so the gather had none of it left.
    assert "job view, the last round: no points from rank(s) 1" in job.output
    # (collectives #1 to #5 came when training began: the claim of the job's directory,
    # the gather and broadcast of the ranks' summary directories, then those of their run
    # lengths, which share the tensor steps)
    assert "gather #6: no object from rank(s) 1 within 0 s in the store" in job.output
    assert len(merged_lineage_files(job.summary)) == 1
    notes = user_defined(job.summary)
    assert (notes["ranks_reported"], notes["ranks_expected"], notes["ranks_missing"]) == (1, 2, "1")
    lineage = get_summary_lineage(str(job.summary))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["train_dataset"]["train_dataset_size"] == 8  # rank 0's share alone
    # rank 1's series never reached rank 0: the job's curves are rank 0's points alone
    assert_job_curves(job.summary, [0])
    # The live view's timing rounds (every 2 s) may have carried rank 1's last step to rank 0
    # before it stopped: it then counts as reported (its last step is named), and is still
    # missing from the end of the job, whose curves are rank 0's alone.
    reported = 1 + ("job/last_step/1" in notes)
    assert (notes["job/ranks_reported"], notes["job/missing_ranks"]) == (reported, "1")


def test_without_a_process_group_the_ranks_meet_in_the_summary_dir(tmp_path: Path) -> None:
    job = run_torchrun(tmp_path, "no_process_group", merge_timeout=60.0)
    assert job.returncode == 0, job.output
    assert {(r["launcher"], r["finished"]) for r in job.ranks.values()} == {("torchrun", True)}
    assert "cannot be merged" not in job.output
    notes = user_defined(job.summary)
    assert (notes["ranks_reported"], notes["ranks_expected"], notes["ranks_missing"]) == (2, 2, "")
    # torchrun --standalone names its run: the ranks met in that launch's first folder
    folders = sorted((job.summary / JOB_RENDEZVOUS_DIRNAME).glob("torchrun.*/0*"))
    assert [folder.name for folder in folders] == ["000000"]
    members = json.loads((folders[0] / "members.json").read_text())
    assert sorted(members) == ["0", "1"]
    assert_job_curves(job.summary, [0, 1])
