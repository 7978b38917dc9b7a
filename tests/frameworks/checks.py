"""What every integration's job must show, read back with the project's own API."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rankscribe.jobview.feed import (
    ARRIVAL_TIME_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    STEP_TIME_TAG,
)
from rankscribe.lineage import get_run_lineage
from rankscribe.writer import reader
from tests._support.job_files import rank_scalars


def merged_lineage(job: Path) -> dict[str, Any]:
    """The job's whole lineage, its ``user_defined`` values included."""
    lineage = get_run_lineage(str(job.resolve()))
    assert lineage is not None, f"no merged lineage in {job}"
    sections: dict[str, Any] = lineage.to_json_dict()
    return sections


def assert_every_rank_recorded(job: Path, world_size: int = 2) -> None:
    """Each rank's own directory holds its summary, and the job view counts every rank."""
    for rank in range(world_size):
        rank_dir = job / f"rank_{rank}"
        assert any(rank_dir.glob("events.out.events.summary.*_MS")), rank_dir
        assert any(rank_dir.glob("events.out.events.summary.*_lineage")), rank_dir
        assert reader.scalars(rank_dir), f"rank {rank} recorded no scalar"
    job_view = reader.scalars(job)
    counts = job_view["rankscribe/step_time/ranks"]
    assert counts, "the job view has no step-time points"
    assert {value for _, value in counts} == {float(world_size)}


def assert_each_rank_probed(job: Path) -> None:
    """The gradient probe found the framework's DDP wrapper with no code in the script: per
    rank, an arrival and local bucket norms and peaks at (nearly) every step, and the norms
    are the rank's own (the ranks' differ: taken before the reduce averaged them;
    docs/gradients.md, "The probe")."""
    norms_by_rank = []
    for rank in (0, 1):
        found = rank_scalars(job / f"rank_{rank}")
        arrivals = found.get(ARRIVAL_TIME_TAG, {})
        norm_tags = sorted(tag for tag in found if tag.startswith(GRADIENT_NORM_TAG_PREFIX))
        assert norm_tags, f"rank {rank} recorded no gradient norm: {sorted(found)}"
        # Each bucket's peak at each step of its norm, within the norm (a row of it).
        for tag in norm_tags:
            peaks = found[GRADIENT_PEAK_TAG_PREFIX + tag[len(GRADIENT_NORM_TAG_PREFIX) :]]
            assert peaks.keys() == found[tag].keys(), (rank, tag)
            for step, peak in peaks.items():
                assert 0.0 < peak <= found[tag][step] * (1 + 1e-6), (rank, tag, step)
        step_times = found[STEP_TIME_TAG]
        # Accelerate's run opens at the first log, after the first step's backward.
        assert len(step_times) >= 6 and len(arrivals) >= len(step_times) - 2, (rank, arrivals)
        assert arrivals == found[GRADIENT_READY_TAG]
        for step, arrival in arrivals.items():
            assert arrival > 0.0, (rank, step, arrival)
            if step in step_times:
                assert arrival <= step_times[step] + 1e-3, (rank, step)
        norms = {
            step: math.sqrt(sum(found[tag].get(step, 0.0) ** 2 for tag in norm_tags))
            for step in arrivals
        }
        assert all(math.isfinite(norm) and norm > 0.0 for norm in norms.values()), norms
        norms_by_rank.append(norms)
    shared = sorted(norms_by_rank[0].keys() & norms_by_rank[1].keys())
    assert len(shared) >= len(norms_by_rank[0]) - 2
    assert any(norms_by_rank[0][step] != norms_by_rank[1][step] for step in shared)


def quiet_trainer(lightning: Any, logger: Any, max_steps: int) -> Any:
    """A Lightning ``Trainer`` on one CPU for a few steps, logging to ``logger`` only: no
    checkpoint, progress bar or model summary."""
    return lightning.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
