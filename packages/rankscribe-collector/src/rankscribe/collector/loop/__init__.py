"""The training loops the collector drives its callbacks from, and what they report.

Owns a plain loop over batches (``_loop``: ``TrainLoop``, and ``train_params``, the one
place a loop's callback parameters are built), a loop the user writes step by step
(``_session``: ``TrainSession``), the console progress line (``_progress``:
``Progress``) and the per-step summary of MindSpore's ``SummaryStep``
(``_summary_step``). ``docs/collector-schedule.md`` says when each calls what.

May import: ``rankscribe.collector._callback`` (the callback protocol),
``rankscribe.collector._checks``, ``rankscribe.collector._clock``,
``rankscribe.collector.adapters``, ``rankscribe.collector.collection`` (reading a
step's loss), ``rankscribe.collector.errors`` and the ranks and writer packages. Not
``run`` nor the collector itself:
a loop runs any callbacks, the collector among them.
"""

__all__: list[str] = []  # the modules inside are private; the package exports them
