"""The lineage index: a cache of every run's searchable summary under a base dir.

Owns the index file, its freshness rules, and the parallel parse of a cold scan.
May import: ``record``, ``errors``, the writer.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
