"""The job view's parts that the sibling packages use (sibling-facing, not the user's API).

The collector package builds the job view on the ranks: it
records the timing and fingerprint tags, sends each subtree's partial statistics
up the tree of ranks (:class:`JobPartial`), and writes the HParams session
(:func:`session_values`). The straggler rule's pieces (:func:`paired_ratios`,
:func:`timing_evidence`, :func:`straggler_verdicts` and their constants) are the
rule ``docs/job-view.md`` states ("Verdicts"). The user's API is
:mod:`rankscribe.lineage.jobview`; docs/contributing.md lists the sibling-facing
modules.
"""

from __future__ import annotations

from rankscribe.lineage.job._live import LIVE_STATE_NAME
from rankscribe.lineage.job._partials import Partial as JobPartial
from rankscribe.lineage.job._partials import PartialFormatError
from rankscribe.lineage.job._ranges import ranges_text
from rankscribe.lineage.job._sentences import timing_name
from rankscribe.lineage.job._statistics import (
    FINGERPRINT_TAG,
    LOSS_TAGS,
    TIMING_TAGS,
    SeriesLike,
    TagStatistics,
    is_timing_tag,
)
from rankscribe.lineage.job._stragglers import (
    STEP_FLOOR_SECONDS,
    STEP_FLOOR_SHARE,
    STRAGGLER_MARGIN,
    TimingEvidence,
    paired_ratios,
    straggler_verdicts,
)
from rankscribe.lineage.job._verdicts import STRAGGLER_SHARE, timing_evidence
from rankscribe.lineage.jobview import session_values

__all__ = [
    "FINGERPRINT_TAG",
    "LIVE_STATE_NAME",
    "LOSS_TAGS",
    "STEP_FLOOR_SECONDS",
    "STEP_FLOOR_SHARE",
    "STRAGGLER_MARGIN",
    "STRAGGLER_SHARE",
    "TIMING_TAGS",
    "JobPartial",
    "PartialFormatError",
    "SeriesLike",
    "TagStatistics",
    "TimingEvidence",
    "is_timing_tag",
    "paired_ratios",
    "ranges_text",
    "session_values",
    "straggler_verdicts",
    "timing_evidence",
    "timing_name",
]
