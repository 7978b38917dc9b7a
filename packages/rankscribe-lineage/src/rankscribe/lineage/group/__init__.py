"""Runs side by side: groups of runs that agree on lineage keys, with their curves' bands.

Owns :func:`rankscribe.lineage.group_runs` and the ``rankscribe-lineage group``
command's work: which runs form a group (the query's rows and names,
``query/``), each run's curves (a job by its cross-rank mean, ``job/``'s
statistics and readers), the group's per-step statistics over its runs (the
job view's mergeable statistics, Chan's update) and its files under
``BASE/_groups/<group>/`` (written by the job view's file functions). It may
import ``query``, ``index``, ``record``, ``job`` and the writer; nothing
imports it but the command line, the report and the package's public names.
``docs/groups.md`` describes it.
"""

__all__: list[str] = []  # the modules inside are private; rankscribe.lineage re-exports group_runs
