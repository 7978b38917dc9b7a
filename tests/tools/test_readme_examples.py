"""Every python example of the README and of docs/integrations.md is run by a test.

Each block carries a ``<!-- tested by <test file>[: <what>] -->`` mark on the line
before its fence, and the test file named holds that same mark (it is how the test
finds the block it runs as written).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.readme import INTEGRATIONS, README, ROOT, python_blocks


@pytest.mark.parametrize("page", [README, INTEGRATIONS], ids=["README", "integrations"])
def test_every_example_is_marked_and_its_test_runs_it(page: Path) -> None:
    marks = python_blocks(page)
    assert marks, f"no python example in {page.name}"
    assert all(marks), f"an example of {page.name} names no test: {marks}"
    for mark in marks:
        test = ROOT / mark.split(":")[0]
        assert test.is_file(), mark
        assert f"<!-- tested by {mark} -->" in test.read_text(), mark


def test_the_integration_examples_are_the_frameworks_launched_jobs() -> None:
    section = python_blocks(
        README, "## Lightning, the Hugging Face Trainer, Accelerate", "## Your own training loop"
    )
    assert section == [
        f"tests/frameworks/test_snippets.py: {name}"
        for name in ("lightning", "transformers", "accelerate")
    ]
