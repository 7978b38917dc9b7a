"""Checkpoints: the ``ModelCheckpoint`` callback, its configuration and its files.

Owns when a checkpoint is saved and which are kept (``_callback``: the
callback; ``_manager``: the file list and retention), what one may hold
(``_config``: ``CheckpointConfig``), the file format (``_format``: safetensors,
append info, digest, ``save_checkpoint``/``load_checkpoint``) and its optional
encrypted envelope (``_crypto``). The public names are re-exported by
:mod:`rankscribe.collector`; semantics in the module docstrings and the
collector's README (``packages/rankscribe-collector/README.md``); the rank
directory they live in is ``docs/layout.md``'s.

May import: ``rankscribe.collector._callback`` (the callback protocol),
``rankscribe.collector.adapters``, ``rankscribe.collector.errors``,
``rankscribe.collector._checks`` (argument checks), the ranks and writer packages.
Not the SummaryCollector's modules.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
