"""The job's verdicts: the rules that judge the ranks, and what a verdict says.

- ``_judge``: the one door to the straggler rule for timing arrays (``judge_timings``);
- ``_stragglers`` and ``_straggler_verdicts``: the straggler rule, its evidence and its
  verdict (cost, onset, persistent or intermittent);
- ``_verdicts``: every verdict of a job (straggler, skew, divergence, gradient,
  non-finite loss, stops) from its statistics;
- ``_gradients``: the rank whose local gradient stands apart before the reduce, and
  ``_gradient_verdicts``: that rule fed each step's bucket norms (the ``gradient`` verdict);
- ``_machine``: the system readings a straggler verdict cites as evidence;
- ``_records`` and ``_sentences``: the verdicts as plain records and as sentences.

The rules are documented in ``docs/job-view.md``; the public names are re-exported by
:mod:`rankscribe.jobview`, :mod:`rankscribe.jobview.feed` and
:mod:`rankscribe.jobview.protocol`. May import the job's foundations below them
(``_statistics``, ``_ranges``), never what builds on the verdicts (the files, the partials,
the live view).
"""

__all__: list[str] = []
