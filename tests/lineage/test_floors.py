"""The lineage manager stands on the job view, the writer and ranks: it works without the
collector importable (docs/contributing.md, "Packages")."""

from __future__ import annotations

from pathlib import Path

from tests._support.blocked import run_without


def test_the_lineage_manager_imports_and_merges_without_the_collector(tmp_path: Path) -> None:
    done = run_without(
        ("rankscribe.collector",),
        f"""
        import sys
        import rankscribe.lineage as lineage
        from rankscribe.lineage import cli, errors, recording
        from rankscribe.writer import SummaryRecord

        for module in (lineage, errors, recording):
            for name in module.__all__:
                getattr(module, name)
        cli.build_parser()
        job = {str(tmp_path)!r}
        for rank in (0, 1):
            with SummaryRecord(job + f"/rank_{{rank}}", rank=rank) as record:
                record.add_value("scalar", "loss", 0.5 + rank)
                record.record(1)
        outcome = lineage.merge_run_dir(job, world_size=2)
        print("job view", len(outcome.job_view.paths), "missing", outcome.ranks_missing)
        print("collector", sorted(m for m in sys.modules if m.startswith("rankscribe.collector")))
        """,
    )
    assert done.returncode == 0, done.output
    assert done.stdout.splitlines() == [
        "job view 1 missing [0, 1]",
        "collector []",
    ]  # scalars only: no lineage
