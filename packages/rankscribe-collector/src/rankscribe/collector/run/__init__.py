"""One collector run: its record opened and closed, and its lineage recorded and merged.

Owns what ``SummaryCollector`` opens when training begins and closes when it ends
(``_run``: ``CollectorRun``: the rank's record, the schedule agreed with the other
ranks, the landscape saver) and the train and eval lineage it writes, merged at rank 0
(``_lineage``: ``LineageRecorder``, the job's merger).

May import: ``rankscribe.collector._callback``, ``rankscribe.collector._checks``,
``rankscribe.collector._fingerprint``, ``rankscribe.collector.adapters``,
``.collection``, ``.jobview``, ``.landscape`` and ``.errors``, and the sibling
packages. Not ``loop``: a run is driven by whatever loop calls the collector.
"""

__all__: list[str] = []  # the modules inside are private; the collector uses them
