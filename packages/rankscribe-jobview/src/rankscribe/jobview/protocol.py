"""The live view's protocol and the straggler rule's pieces (sibling-facing, not the user's API).

For the tools and tests that speak the job view's protocol or take its rules apart;
neither the collector (its door is :mod:`rankscribe.jobview.feed`) nor the lineage
manager (:mod:`rankscribe.jobview.parts`) needs it:

- the partial statistics a subtree sends up the tree of ranks (:class:`JobPartial`,
  :class:`PartialFormatError`, :class:`TagStatistics`) and what a rank's series offers
  (:class:`SeriesLike`);
- the live view's rounds and messages (:func:`round_name`, :func:`round_number`,
  :func:`round_period`, :func:`rounds_per_interval`, :data:`FINAL_ROUND`,
  :func:`encode_message`, :func:`decode_message`, :data:`DEFAULT_TIMING_INTERVAL`),
  its control file (:class:`ControlFile`, :data:`CONTROL_NAME`) and its state file
  (:data:`LIVE_STATE_NAME`; :func:`state_onsets`, the onsets its standing straggler
  records give a later merge, and :func:`state_ended`, the spans of those it ended);
- the timing watch rank 0 judges each round with (:class:`TimingWatch`,
  :class:`WatchSettings`, :func:`judge_window`, :data:`DEFAULT_WINDOW_STEPS`);
- the tags and timings (:data:`TIMING_TAGS`, :data:`LOSS_TAGS`, :data:`SYSTEM_TAGS`,
  :func:`is_timing_tag`, :func:`timing_tag`, :func:`timing_name`,
  :func:`timing_label`) and the ranges of ranks as text (:func:`ranges_text`);
- the straggler rule's pieces (:func:`paired_ratios`, :func:`timing_evidence`,
  :func:`timings_evidence`, :func:`straggler_verdicts`, :func:`straggler_records`,
  :data:`STRAGGLER_SHARE`), the verdicts as records (:func:`records_from_verdicts`,
  :data:`ACTIONABLE_KINDS`) and the machine's evidence as records
  (:func:`system_evidence_records`): the rules ``docs/job-view.md`` states.
"""

from __future__ import annotations

from rankscribe.jobview.job._control import ControlFile
from rankscribe.jobview.job._live import LIVE_SPANS_KEY, LIVE_STATE_NAME, state_ended, state_onsets
from rankscribe.jobview.job._partials import Partial as JobPartial
from rankscribe.jobview.job._partials import PartialFormatError
from rankscribe.jobview.job._protocol import (
    CONTROL_NAME,
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
from rankscribe.jobview.job._statistics import (
    LOSS_TAGS,
    TIMING_TAGS,
    SeriesLike,
    TagStatistics,
    is_timing_tag,
)
from rankscribe.jobview.job._watch import (
    DEFAULT_WINDOW_STEPS,
    END_JUDGEMENTS,
    TimingWatch,
    WatchSettings,
    judge_window,
)
from rankscribe.jobview.job.verdicts._judge import timing_tag, timings_evidence
from rankscribe.jobview.job.verdicts._machine import SYSTEM_TAGS
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
    "DEFAULT_TIMING_INTERVAL",
    "DEFAULT_WINDOW_STEPS",
    "END_JUDGEMENTS",
    "FINAL_ROUND",
    "LIVE_SPANS_KEY",
    "LIVE_STATE_NAME",
    "LOSS_TAGS",
    "STRAGGLER_SHARE",
    "SYSTEM_TAGS",
    "TIMING_TAGS",
    "ControlFile",
    "JobPartial",
    "PartialFormatError",
    "SeriesLike",
    "TagStatistics",
    "TimingWatch",
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
    "state_ended",
    "state_onsets",
    "straggler_records",
    "straggler_verdicts",
    "system_evidence_records",
    "timing_evidence",
    "timing_label",
    "timing_name",
    "timing_tag",
    "timings_evidence",
]
