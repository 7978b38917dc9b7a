"""The loss-landscape files (``collect_landscape``): parameter files and their metadata.

Owns ``<summary_dir>/ckpt_dir``: clearing an earlier run's files, writing the
parameter files in the background and ``train_metadata.json`` (``_saver``).
Semantics in ``docs/collector-schedule.md``.

May import: ``rankscribe.collector.collection`` (``LandscapeOptions``),
``rankscribe.collector.adapters``, the writer package.
"""

__all__: list[str] = []  # the modules inside are private; the collector uses them
