"""Merging the ranks of one job into one lineage, online (rank 0) or offline.

May import: ``record``, ``job``, ``errors``, the writer.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
