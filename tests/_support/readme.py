"""The README's examples, as tests run them (each is marked ``<!-- tested by <test> -->``).

Only the standard library is imported here: every tox env imports this module.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(marker: str) -> str:
    """The fenced python block right after ``marker`` in the README."""
    text = README.read_text()
    assert marker in text, f"{marker} is not in README.md"
    match = re.match(r"\s*```python\n(.*?)```", text.split(marker, 1)[1], re.DOTALL)
    assert match, f"no python block after {marker}"
    return match.group(1)
