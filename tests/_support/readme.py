"""The examples of the README and of docs/integrations.md, as tests run them.

Each tested block is marked ``<!-- tested by <test>[: <what>] -->`` on the line before
its fence. Only the standard library is imported here: every tox env imports this module.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
INTEGRATIONS = ROOT / "docs" / "integrations.md"

_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_MARK = re.compile(r"<!-- tested by (.+?) -->\s*$")


def page_block(page: Path, marker: str) -> str:
    """The fenced python block right after ``marker`` in ``page``."""
    text = page.read_text()
    assert marker in text, f"{marker} is not in {page.name}"
    match = re.match(r"\s*```python\n(.*?)```", text.split(marker, 1)[1], re.DOTALL)
    assert match, f"no python block after {marker} in {page.name}"
    return match.group(1)


def readme_block(marker: str) -> str:
    """The fenced python block right after ``marker`` in the README."""
    return page_block(README, marker)


def python_blocks(page: Path, start: str | None = None, end: str | None = None) -> list[str]:
    """The ``tested by`` mark of every python block of ``page`` ("" for an unmarked one).

    ``start`` and ``end``: headings that bound the part of the page looked at.
    """
    text = page.read_text()
    if start is not None:
        text = text[text.index(start) :]
    if end is not None:
        text = text[: text.index(end)]
    marks = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found = _MARK.match(before)
        marks.append(found.group(1) if found else "")
    return marks
