"""The collector's side of the job view: what each rank measures and sends for it.

- ``_timings``: the timings besides the step time (data wait, forward time, sections,
  the gradient probe's norms);
- ``_reduced``: the gradient norms of a loop that reduces its own gradients
  (``SummaryCollector.allreduce_gradients``);
- ``_series``: the scalars a rank recorded, kept for the job view at the end of a run;
- ``_settings``: the live view's interval and verdict callback, and the gradient probe's
  switch, as the user gives them.

The live view itself (each rank's new points every interval, up the tree to rank 0)
is the job view's: ``rankscribe.jobview.feed.LiveRankView``.

The parameter fingerprint (``collector/_fingerprint.py``) stays beside the adapters
that compute it. What each records and how rank 0 judges it is in
``docs/job-view.md``. Nothing here is public: the collector's callbacks use these
modules.
"""

__all__: list[str] = []
