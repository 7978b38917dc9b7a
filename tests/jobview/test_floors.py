"""The job view stands on the writer and ranks only: it works with neither the lineage
manager nor the collector importable (docs/contributing.md, "Packages")."""

from __future__ import annotations

from pathlib import Path

from tests._support.blocked import run_without

ABOVE = ("rankscribe.lineage", "rankscribe.collector")


def test_the_job_view_imports_and_works_without_lineage_or_collector(tmp_path: Path) -> None:
    done = run_without(
        ABOVE,
        f"""
        import sys
        import numpy as np
        import rankscribe.jobview as jobview
        from rankscribe.jobview import feed, parts, protocol
        from rankscribe.writer import SummaryRecord

        for module in (jobview, feed, parts, protocol):
            for name in module.__all__:
                getattr(module, name)
        records = jobview.judge_timings({{"forward": np.array([[0.1] * 40, [0.3] * 40])}})
        print("straggler", records[0]["ranks"])
        job = {str(tmp_path)!r}
        for rank in (0, 1):
            with SummaryRecord(job + f"/rank_{{rank}}", rank=rank) as record:
                for step in (1, 2, 3):
                    record.add_value("scalar", "loss", 1.0 / step + rank)
                    record.record(step)
        series = {{r: jobview.series_from_dir(job + f"/rank_{{r}}", r) for r in (0, 1)}}
        view = jobview.write_job_view(job, series, world_size=2)
        print("files", len(view.paths), "missing", view.verdicts["job/missing_ranks"])
        print("above", sorted(m for m in sys.modules if m.startswith(("rankscribe.lineage",
                                                                     "rankscribe.collector"))))
        """,
    )
    assert done.returncode == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == "straggler [1]"
    assert lines[1] == "files 1 missing "
    assert lines[2] == "above []"


def test_the_blocker_does_refuse_the_lineage_manager() -> None:
    done = run_without(ABOVE, "import rankscribe.lineage\n", check=False)
    assert done.returncode != 0
    assert "No module named 'rankscribe.lineage' (blocked)" in done.output
