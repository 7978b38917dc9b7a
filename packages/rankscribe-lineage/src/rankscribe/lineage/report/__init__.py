"""``rankscribe-lineage report``: the HTML page comparing runs (plotly optional).

Semantics in ``docs/report.md``.
May import: every other sub-package of lineage except ``cli``.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
