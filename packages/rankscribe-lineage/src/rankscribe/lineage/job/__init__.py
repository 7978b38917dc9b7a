"""The job view: cross-rank statistics, verdicts, and the job's own files.

Semantics in ``docs/job-view.md``; the public names are re-exported by
:mod:`rankscribe.lineage.jobview`.
May import: ``record``, ``query``, the writer.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
