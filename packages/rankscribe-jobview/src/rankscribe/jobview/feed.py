"""The collector's one door into the job view (sibling-facing, not the user's API).

The collector measures on the training thread and hands its numbers to the job view
through this module alone (``tools/check_boundaries.py`` holds it to that):

- the tags it records on every rank: the timings (:data:`STEP_TIME_TAG`,
  :data:`DATA_WAIT_TAG`, :data:`FORWARD_TIME_TAG`, sections under
  :data:`SECTION_TAG_PREFIX`, :data:`ARRIVAL_TIME_TAG` from the section
  :data:`SYNC_SECTION`), the gradient probe's bucket norms, peaks and ready time
  (:data:`GRADIENT_NORM_TAG_PREFIX`, :data:`GRADIENT_PEAK_TAG_PREFIX`,
  :data:`GRADIENT_READY_TAG`), the parameter
  fingerprint (:data:`FINGERPRINT_TAG`)
  and the machine's samples (:data:`SYSTEM_TAG_PREFIX`); ``docs/job-view.md``'s
  "Timings" and ``docs/system-metrics.md`` say what each holds;
- how long a rank may keep its timings before they reach its file
  (:data:`STEP_TIME_WRITE_COUNT`, :data:`STEP_TIME_WRITE_INTERVAL`,
  :data:`STEP_TIME_WRITE_AT_ONCE`): the collector keeps to it, and the stop verdict
  reads a killed rank's last step against it;
- each rank's end of the live view (:class:`LiveRankView`, every
  :data:`DEFAULT_JOB_VIEW_INTERVAL` seconds unless the collector says otherwise),
  which merges the job's lineage through the collector's :class:`JobMerge` (so the job
  view never imports the lineage manager), and the type of the ``on_verdict`` function
  the collector hands it (:data:`VerdictCallback`);
- the machine's evidence a verdict cites (:func:`system_evidence`), which the
  collector's lineage records.

The user's API is :mod:`rankscribe.jobview`; the live view's protocol and the straggler
rule's pieces, for tools and tests that speak them, are :mod:`rankscribe.jobview.protocol`;
docs/contributing.md lists the sibling-facing modules.
"""

from __future__ import annotations

from rankscribe.jobview.job._protocol import DEFAULT_JOB_VIEW_INTERVAL
from rankscribe.jobview.job._rank_view import JobMerge, LiveRankView
from rankscribe.jobview.job._statistics import (
    ARRIVAL_TIME_TAG,
    DATA_WAIT_TAG,
    FINGERPRINT_TAG,
    FORWARD_TIME_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
    STEP_TIME_WRITE_AT_ONCE,
    STEP_TIME_WRITE_COUNT,
    STEP_TIME_WRITE_INTERVAL,
    SYNC_SECTION,
    SYSTEM_TAG_PREFIX,
)
from rankscribe.jobview.job._watch import VerdictCallback
from rankscribe.jobview.job.verdicts._machine import evidence_keys as system_evidence

__all__ = [
    "ARRIVAL_TIME_TAG",
    "DATA_WAIT_TAG",
    "DEFAULT_JOB_VIEW_INTERVAL",
    "FINGERPRINT_TAG",
    "FORWARD_TIME_TAG",
    "GRADIENT_NORM_TAG_PREFIX",
    "GRADIENT_PEAK_TAG_PREFIX",
    "GRADIENT_READY_TAG",
    "SECTION_TAG_PREFIX",
    "STEP_TIME_TAG",
    "STEP_TIME_WRITE_AT_ONCE",
    "STEP_TIME_WRITE_COUNT",
    "STEP_TIME_WRITE_INTERVAL",
    "SYNC_SECTION",
    "SYSTEM_TAG_PREFIX",
    "JobMerge",
    "LiveRankView",
    "VerdictCallback",
    "system_evidence",
]
