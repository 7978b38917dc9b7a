"""How the ranks of a job work together: collectives with a timeout, bounded waits, shares.

``_coordinator`` holds :class:`rankscribe.ranks.Coordinator`, the base class whose
``gather``, ``bcast`` and ``barrier`` every rank calls and none waits on forever (the
backends in ``backends/`` implement it); ``_deadline`` the one clock and back-off of every
wait of the package (sibling-facing as :mod:`rankscribe.ranks.waits`; a test replaces the
clock with :func:`rankscribe.ranks.testing.wait_clock`); ``_split`` which share of the
work is each rank's (:func:`rankscribe.ranks.split_evenly`). ``_exits`` what a rank's program does
under MPI when it ends on an uncaught exception: the job aborts instead of hanging
(sibling-facing as :mod:`rankscribe.ranks.exits`). The rules are in
``docs/layout.md`` ("Collectives and their timeouts", "Split of tensor steps").

May import: ``detection`` (a coordinator knows its rank), ``messages`` (objects travel
as data), ``rankscribe.ranks._args`` and ``errors``. The backends, the layout, the tree
and :mod:`rankscribe.ranks.files` stand on it; nothing here imports them.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
