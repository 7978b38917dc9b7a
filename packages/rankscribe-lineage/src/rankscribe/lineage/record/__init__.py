"""What one run's lineage is: the model, its files, and finding them on disk.

Owns the dataclasses that convert to and from the writer's lineage protobuf
messages, the searchable fields of a run (``_fields``: the index stores them, the
queries filter on them), parsing a run's lineage files, writing a merged lineage file,
the names this package gives on disk, and the TrainLineage/EvalLineage callbacks.
May import: the writer, ``rankscribe.lineage.errors`` and ``rankscribe.lineage._checks``
(the argument checks). Nothing else of this package.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
