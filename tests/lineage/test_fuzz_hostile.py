"""The hostile generators of what the lineage package reads from files and messages.

``tools/fuzz/hostile.py`` makes structure-aware hostile inputs (valid framing, zip
records and CRCs; hostile content: nesting past every limit, unterminated escaped
strings, numbers of thousands of digits, duplicate keys, lying counts, many tags
sharing their steps) and runs them through the targets of ``tools/fuzz/targets.py``,
each with its time limit. A few hundred inputs of each generator are read or refused
with the project's errors. The cases come from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_hostile_inputs_are_read_or_refused_with_the_projects_errors(
    lineage_hostile_generator: tuple[str, Callable[..., Any]],
) -> None:
    name, run = lineage_hostile_generator
    campaign, kinds = run(200, seed=1, report=lambda line: None)
    assert campaign.inputs == 200
    assert kinds == {}, f"{name}: {campaign.failures} inputs failed"
