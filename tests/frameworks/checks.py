"""What every integration's job must show, read back with the project's own API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rankscribe.lineage import get_run_lineage
from rankscribe.writer import reader


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
