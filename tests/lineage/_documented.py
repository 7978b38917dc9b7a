"""What docs/lineage-queries.md states, read from the page itself for the tests to hold
the code to it.

Imported as ``tests.lineage._documented``; only the standard library is imported here.
"""

from __future__ import annotations

import re
from pathlib import Path

QUERIES = Path(__file__).resolve().parents[2] / "docs" / "lineage-queries.md"


def _stated(pattern: str) -> str:
    found = re.search(pattern, QUERIES.read_text(encoding="utf-8"))
    assert found, f"docs/lineage-queries.md does not state {pattern!r}"
    return found.group(1)


# "The index": the file's name in a base directory, and the layout's version.
INDEX_NAME = _stated(r"The file, `([^`]+)`, is the")
INDEX_VERSION = int(_stated(r"the layout's version \((\d+)\)"))


def documented_fields() -> list[str]:
    """The search fields of the "Fields" table, in its order (``metric/<k>`` and
    ``user_defined/<k>`` left out: they stand for every key)."""
    text = QUERIES.read_text(encoding="utf-8")
    table = text.split("### Fields", 1)[1].split("\n\n", 2)[1]
    names: list[str] = []
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        names += [name for name in re.findall(r"`([^`]+)`", first_cell) if "<" not in name]
    assert names, "the Fields table of docs/lineage-queries.md lists no field"
    return names
