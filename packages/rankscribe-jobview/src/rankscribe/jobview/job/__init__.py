"""The job as a record: cross-rank statistics, the tree's partials, the live view, the files.

- ``_statistics``, ``_batch_merge``, ``_samples``: each tag's per-step statistics across
  the ranks (the machine samples held to common steps);
- ``_partials``, ``_wire``: a subtree's statistics as one message up the tree of ranks;
- ``_protocol``, ``_control``, ``_watch``, ``_evidence``, ``_live``, ``_rank_view``,
  ``_rank_tail``: the live view's rounds, its control file, the timing watch, the verdicts
  so far, rank 0's side and each rank's;
- ``_files``, ``_ranges``: the job's files and the ranges of ranks their notes name;
- ``verdicts/``: the rules that judge the ranks.

Semantics in ``docs/job-view.md``; the public names are exported by
:mod:`rankscribe.jobview`, what the sibling packages use by :mod:`rankscribe.jobview.feed`
and :mod:`rankscribe.jobview.parts`, the protocol by :mod:`rankscribe.jobview.protocol`.
May import: the job view's ``_checks``, ``_session``, ``_npz`` and ``errors``, the writer
and ranks.
"""

__all__: list[str] = []  # the modules inside are private
