"""The landscape budget in a new user's toy DDP job: torchrun, two ranks, 100 steps.

At the collector's defaults each rank writes at most 64 MB of landscape files
(of the 85.6 MB MindSpore's 19 sets would take), rank 0 alone says what it left
out and how to save it all, and the metadata is what MindSpore's SummaryLandscape
reads; with ``landscape_budget="all"`` every rank writes all 19 sets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._support.landscape import assert_drawable, read_metadata, shape
from tests._support.launchers import clean_environment, run_bounded, torchrun

SCRIPT = Path(__file__).resolve().parent / "landscape_ddp.py"
JOB_TIMEOUT = 300
DEFAULT_BUDGET = 64_000_000


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("landscape_ddp")
    environment = clean_environment(OMP_NUM_THREADS="1")
    environment.pop("RANKSCRIBE_LANDSCAPE_BUDGET", None)  # the defaults, as a new user has them
    result = run_bounded(
        torchrun(SCRIPT, out), env=environment, cwd=out, timeout=JOB_TIMEOUT, check=False
    )
    assert result.returncode == 0, result.output
    return out, result.output


def parameter_files(ckpt_dir: Path) -> dict[int, int]:
    return {
        int(name.split("_")[-2]): (ckpt_dir / name).stat().st_size
        for name in os.listdir(ckpt_dir)
        if name.endswith(".ckpt")
    }


def landscape_lines(output: str, rank: int, job: Path) -> list[str]:
    return [
        line
        for line in output.splitlines()
        if line.startswith(f"rank {rank} ") and "Loss landscape" in line and str(job) in line
    ]


@pytest.mark.slow
def test_at_the_defaults_each_rank_writes_at_most_the_budget_and_rank_zero_says_so(
    jobs: tuple[Path, str],
) -> None:
    out, output = jobs
    job = out / "default"
    kept = []
    for rank in (0, 1):
        ckpt_dir = job / f"rank_{rank}" / "ckpt_dir"
        files = parameter_files(ckpt_dir)
        assert 0 < sum(files.values()) <= DEFAULT_BUDGET
        set_bytes = max(files.values())
        assert 19 * set_bytes > DEFAULT_BUDGET  # the job is one the budget is for
        assert len(files) == DEFAULT_BUDGET // set_bytes
        metadata = read_metadata(ckpt_dir)
        assert_drawable(metadata)
        assert sorted(int(number) for number in metadata["model_params_file_map"]) == sorted(files)
        kept.append(sorted(files))
    assert kept[0] == kept[1]  # the ranks keep the same steps
    assert kept[0][0] == 1 and kept[0][-1] == 19  # each interval's ends: the whole path
    (line,) = landscape_lines(output, 0, job)
    assert "the 19 full parameter sets of the network (steps 1-19)" in line
    assert "over the landscape budget of 64.0 MB per rank" in line
    assert f"saving {len(kept[0])} of them" in line and "Left out: steps " in line
    assert "landscape_budget='all'" in line and "RANKSCRIBE_LANDSCAPE_BUDGET=all" in line
    assert landscape_lines(output, 1, job) == []


@pytest.mark.slow
def test_asking_for_all_writes_all_19_sets_on_every_rank(jobs: tuple[Path, str]) -> None:
    out, output = jobs
    for rank in (0, 1):
        ckpt_dir = out / "all" / f"rank_{rank}" / "ckpt_dir"
        files = parameter_files(ckpt_dir)
        assert sorted(files) == list(range(1, 20))
        assert sum(files.values()) > DEFAULT_BUDGET
        metadata = read_metadata(ckpt_dir)
        assert_drawable(metadata)
        assert metadata["epoch_group"] == {"0": list(range(1, 10)), "1": list(range(10, 20))}
        budgeted = read_metadata(out / "default" / f"rank_{rank}" / "ckpt_dir")
        assert shape(budgeted) == shape(metadata)
    (line,) = landscape_lines(output, 0, out / "all")
    assert "saving 19 full parameter sets" in line
    assert landscape_lines(output, 1, out / "all") == []
