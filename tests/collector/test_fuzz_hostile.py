"""The hostile generator of the checkpoint format.

``tools/fuzz/hostile.py`` makes checkpoints whose structure is valid (the safetensors
length, the SHA-256 digest made again over the metadata) and whose content is hostile:
append info that is JSON nested past every limit, unterminated escaped strings,
numbers of thousands of digits, duplicate keys; shapes, offsets and dtypes that lie.
A few hundred of them are read or refused with ``CheckpointError``, each within the
time limit of ``tools/fuzz/targets.py``. The cases come from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_hostile_inputs_are_read_or_refused_with_the_projects_errors(
    collector_hostile_generator: tuple[str, Callable[..., Any]],
) -> None:
    name, run = collector_hostile_generator
    campaign, kinds = run(200, seed=1, report=lambda line: None)
    assert campaign.inputs == 200
    assert kinds == {}, f"{name}: {campaign.failures} inputs failed"
