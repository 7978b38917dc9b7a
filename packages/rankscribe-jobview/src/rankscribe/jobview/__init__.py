"""rankscribe.jobview: one record per distributed job, built from its ranks' scalars.

The job view is what a job's ranks say together: cross-rank curves of every scalar
(mean, min, max, std per step), and verdicts on them — the straggler and what it costs,
step-time skew, divergence of the ranks' parameters, non-finite losses, where each rank
stopped, and the machine's readings a verdict cites. ``docs/job-view.md`` says what it
records and how to act on it.

- Judge timings from anywhere as the job view does: :func:`judge_timings` (its
  thresholds: :class:`VerdictSettings`; its records: :class:`StragglerRecord`; a
  verdict of any kind read back from a job, and what ``on_verdict`` may also receive:
  :class:`VerdictRecord`; their parts: :class:`CostlyRank`, :class:`EvidenceReading`).
- The rank whose local gradient stands apart before the all-reduce:
  :func:`judge_gradients`, step by step :class:`GradientWatch` (settings:
  :class:`GradientSettings`; findings: :class:`GradientFinding`; docs/gradients.md).
- The job's files from its ranks' scalars: :func:`write_job_view` (what it wrote and
  the verdicts: :class:`JobView`); a rank's scalars: :func:`rank_dir_arrays`,
  :func:`series_from_dir` (a :class:`RankSeries`); merged statistics:
  :class:`JobStatistics`; the straggler rule's evidence: :class:`StragglerEvidence`.
- The live view a user may start by hand: :class:`LiveJobView` (rank 0's side; the
  collector runs it for a job it records); what ``rankscribe-lineage show`` prints of it:
  :func:`live_lines`, :func:`state_lines`; verdicts as sentences: :func:`verdict_lines`.
- The errors: :mod:`rankscribe.jobview.errors`.

The collector hands its per-step numbers to the job view through one sibling-facing
module, :mod:`rankscribe.jobview.feed`; the lineage manager reads and writes the job's
files through :mod:`rankscribe.jobview.parts`; tools and tests that speak the live
view's protocol or take the straggler rule apart use :mod:`rankscribe.jobview.protocol`
(docs/contributing.md).
Package layout: ``verdicts/`` holds the rules; the modules beside it the statistics,
the partials of the tree of ranks, the live view's protocol, wire format and files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.jobview._view import (
        JobView,
        RankSeries,
        live_lines,
        rank_dir_arrays,
        series_from_dir,
        state_lines,
        write_job_view,
    )
    from rankscribe.jobview.job._live import LiveJobView
    from rankscribe.jobview.job._statistics import JobStatistics
    from rankscribe.jobview.job.verdicts._gradients import (
        GradientFinding,
        GradientSettings,
        GradientWatch,
        judge_gradients,
    )
    from rankscribe.jobview.job.verdicts._judge import judge_timings
    from rankscribe.jobview.job.verdicts._record_types import (
        CostlyRank,
        EvidenceReading,
        StragglerRecord,
        VerdictRecord,
    )
    from rankscribe.jobview.job.verdicts._sentences import verdict_lines
    from rankscribe.jobview.job.verdicts._straggler_verdicts import VerdictSettings
    from rankscribe.jobview.job.verdicts._stragglers import StragglerEvidence

# Where each name lives. Imported on first use (PEP 562): importing the package loads
# neither NumPy nor the writer.
_HOMES = {
    "CostlyRank": "rankscribe.jobview.job.verdicts._record_types",
    "EvidenceReading": "rankscribe.jobview.job.verdicts._record_types",
    "GradientFinding": "rankscribe.jobview.job.verdicts._gradients",
    "GradientSettings": "rankscribe.jobview.job.verdicts._gradients",
    "GradientWatch": "rankscribe.jobview.job.verdicts._gradients",
    "JobStatistics": "rankscribe.jobview.job._statistics",
    "JobView": "rankscribe.jobview._view",
    "LiveJobView": "rankscribe.jobview.job._live",
    "RankSeries": "rankscribe.jobview._view",
    "StragglerEvidence": "rankscribe.jobview.job.verdicts._stragglers",
    "StragglerRecord": "rankscribe.jobview.job.verdicts._record_types",
    "VerdictRecord": "rankscribe.jobview.job.verdicts._record_types",
    "VerdictSettings": "rankscribe.jobview.job.verdicts._straggler_verdicts",
    "judge_gradients": "rankscribe.jobview.job.verdicts._gradients",
    "judge_timings": "rankscribe.jobview.job.verdicts._judge",
    "live_lines": "rankscribe.jobview._view",
    "rank_dir_arrays": "rankscribe.jobview._view",
    "series_from_dir": "rankscribe.jobview._view",
    "state_lines": "rankscribe.jobview._view",
    "verdict_lines": "rankscribe.jobview.job.verdicts._sentences",
    "write_job_view": "rankscribe.jobview._view",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())

__version__ = "0.1.0"  # the distribution's version (metadata, not an API name)

__all__ = [
    "CostlyRank",
    "EvidenceReading",
    "GradientFinding",
    "GradientSettings",
    "GradientWatch",
    "JobStatistics",
    "JobView",
    "LiveJobView",
    "RankSeries",
    "StragglerEvidence",
    "StragglerRecord",
    "VerdictRecord",
    "VerdictSettings",
    "judge_gradients",
    "judge_timings",
    "live_lines",
    "rank_dir_arrays",
    "series_from_dir",
    "state_lines",
    "verdict_lines",
    "write_job_view",
]
