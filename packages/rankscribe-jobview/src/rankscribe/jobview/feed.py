"""The job view's parts that the sibling packages use (sibling-facing, not the user's API).

The collector package builds the job view on the ranks: it
records the timing and fingerprint tags (:data:`STEP_TIME_TAG`, :data:`DATA_WAIT_TAG`,
:data:`FORWARD_TIME_TAG`, :data:`SECTION_TAG_PREFIX`, :data:`FINGERPRINT_TAG`; the tags
themselves are ``docs/job-view.md``'s "Timings"), sends each subtree's partial statistics
up the tree of ranks (:class:`JobPartial`; each rank's end of the live view is
:class:`LiveRankView`, which merges the job's lineage through the collector's
:class:`JobMerge`), and runs the live view's one protocol (rounds, the
message kind: :func:`encode_message`, :func:`decode_message`; the timing watch and
its control file; :data:`VerdictCallback`, the type of the ``on_verdict`` function
the collector hands to the live view). The straggler rule's pieces (:func:`paired_ratios`,
:func:`timing_evidence`, :func:`straggler_verdicts`, :func:`straggler_records` and
their constants) are the rule ``docs/job-view.md`` states ("Verdicts"); the
machine's evidence (:func:`system_evidence`) is ``docs/system-metrics.md``'s. The user's API is
:mod:`rankscribe.jobview`; docs/contributing.md lists the sibling-facing
modules.
"""

from __future__ import annotations

from rankscribe.jobview.job._control import ControlFile
from rankscribe.jobview.job._live import LIVE_STATE_NAME
from rankscribe.jobview.job._partials import Partial as JobPartial
from rankscribe.jobview.job._partials import PartialFormatError
from rankscribe.jobview.job._protocol import (
    CONTROL_NAME,
    DEFAULT_JOB_VIEW_INTERVAL,
    DEFAULT_TIMING_INTERVAL,
    FINAL_ROUND,
    round_name,
    round_number,
    round_period,
    rounds_per_interval,
)
from rankscribe.jobview.job._protocol import decode as decode_message
from rankscribe.jobview.job._protocol import encode as encode_message
from rankscribe.jobview.job._ranges import ranges_text
from rankscribe.jobview.job._rank_view import JobMerge, LiveRankView
from rankscribe.jobview.job._statistics import (
    DATA_WAIT_TAG,
    FINGERPRINT_TAG,
    FORWARD_TIME_TAG,
    LOSS_TAGS,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
    TIMING_TAGS,
    SeriesLike,
    TagStatistics,
    is_timing_tag,
)
from rankscribe.jobview.job._watch import (
    DEFAULT_WINDOW_STEPS,
    TimingWatch,
    VerdictCallback,
    WatchSettings,
    judge_window,
)
from rankscribe.jobview.job.verdicts._judge import timing_tag, timings_evidence
from rankscribe.jobview.job.verdicts._machine import SYSTEM_TAG_PREFIX, SYSTEM_TAGS
from rankscribe.jobview.job.verdicts._machine import evidence_keys as system_evidence
from rankscribe.jobview.job.verdicts._machine import evidence_records as system_evidence_records
from rankscribe.jobview.job.verdicts._records import ACTIONABLE_KINDS, records_from_verdicts
from rankscribe.jobview.job.verdicts._sentences import timing_name
from rankscribe.jobview.job.verdicts._straggler_verdicts import (
    straggler_records,
    straggler_verdicts,
    timing_label,
)
from rankscribe.jobview.job.verdicts._stragglers import paired_ratios
from rankscribe.jobview.job.verdicts._verdicts import STRAGGLER_SHARE, timing_evidence

__all__ = [
    "ACTIONABLE_KINDS",
    "CONTROL_NAME",
    "DATA_WAIT_TAG",
    "DEFAULT_JOB_VIEW_INTERVAL",
    "DEFAULT_TIMING_INTERVAL",
    "DEFAULT_WINDOW_STEPS",
    "FINAL_ROUND",
    "FINGERPRINT_TAG",
    "FORWARD_TIME_TAG",
    "LIVE_STATE_NAME",
    "LOSS_TAGS",
    "SECTION_TAG_PREFIX",
    "STEP_TIME_TAG",
    "STRAGGLER_SHARE",
    "SYSTEM_TAGS",
    "SYSTEM_TAG_PREFIX",
    "TIMING_TAGS",
    "ControlFile",
    "JobMerge",
    "JobPartial",
    "LiveRankView",
    "PartialFormatError",
    "SeriesLike",
    "TagStatistics",
    "TimingWatch",
    "VerdictCallback",
    "WatchSettings",
    "decode_message",
    "encode_message",
    "is_timing_tag",
    "judge_window",
    "paired_ratios",
    "ranges_text",
    "records_from_verdicts",
    "round_name",
    "round_number",
    "round_period",
    "rounds_per_interval",
    "straggler_records",
    "straggler_verdicts",
    "system_evidence",
    "system_evidence_records",
    "timing_evidence",
    "timing_label",
    "timing_name",
    "timing_tag",
    "timings_evidence",
]
