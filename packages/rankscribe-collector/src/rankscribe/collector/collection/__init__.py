"""What the SummaryCollector collects and when: its options, its schedule, the values.

Owns the constructor's argument checks and ``collect_specified_data``
(``_options``), the units at which data is collected across ranks
(``_schedule``) and reading the loss, histograms, input images and graph from
the training state at a collected unit (``_extractor``). Semantics in
``docs/collector-schedule.md``.

May import: ``rankscribe.collector._callback`` (``CallbackParams``),
``rankscribe.collector.adapters``, ``rankscribe.collector.errors``,
``rankscribe.collector._checks`` (argument checks), the ranks and writer packages,
and ``rankscribe.lineage.recording`` (where a network keeps its optimizer).
Not the collector's training-loop modules.
"""

__all__: list[str] = []  # the modules inside are private; the collector uses them
