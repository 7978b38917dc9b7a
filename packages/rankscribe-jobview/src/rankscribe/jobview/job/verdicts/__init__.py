"""The job's verdicts: the rules that judge the ranks, and what a verdict says.

- ``_judge``: the one door to the straggler rule for timing arrays (``judge_timings``);
- ``_stragglers`` and ``_straggler_verdicts``: the straggler rule, its evidence and its
  verdict (cost, onset, persistent or intermittent);
- ``_verdicts``: every verdict of a job (straggler, skew, divergence, non-finite loss,
  stops) from its statistics;
- ``_evidence``: the live view's verdicts so far, from bounded state per rank;
- ``_machine``: the system readings a straggler verdict cites as evidence;
- ``_records`` and ``_sentences``: the verdicts as plain records and as sentences.

The rules are documented in ``docs/job-view.md``; the public names are re-exported by
:mod:`rankscribe.jobview` and :mod:`rankscribe.jobview.feed`.
"""

__all__: list[str] = []
