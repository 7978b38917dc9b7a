"""SummaryRecord: the writer's front end and the background pipeline behind it.

Owns the public ``SummaryRecord`` (re-exported by :mod:`rankscribe.writer`), its
argument checks, the set of live records closed at exit, the hand-off to the
encoder and writer threads, the files one record writes (rotation, durability:
``docs/file-format.md``), what a failed write does, and the ``.npy`` export.
May import: ``encoding``, ``format``, ``_arguments``, and the public modules ``files``,
``operators``, ``errors`` and ``pb``.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
