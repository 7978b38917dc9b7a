"""Queries over runs: MindInsight's dict conditions, the string filter, the querier.

Semantics in ``docs/lineage-queries.md``.
May import: ``record``, ``index``, ``errors``.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
