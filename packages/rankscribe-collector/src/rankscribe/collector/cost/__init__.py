"""What the collector costs a training step, recorded, and kept within a budget.

Owns the ``cost_budget`` argument (``_budget``: its check, the measuring windows,
the order in which optional work is shed and the one line that says so) and the
reading of the collector's background threads' CPU time (``_threads``). Semantics
in ``docs/collector-cost.md``, "The cost budget"; the tags are in
``docs/job-view.md``, "Timings".

May import: ``rankscribe.collector.errors`` and ``rankscribe.collector._clock``. Not
the collector's training-loop modules: the collector times its own work and hands
the seconds here.
"""

__all__: list[str] = []  # the modules inside are private; the collector uses them
