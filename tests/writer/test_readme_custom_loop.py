"""The README's own-loop example with SummaryRecord runs as written and prints what it says."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import pytest

from tests._support.readme import README, readme_block

MARKER = "<!-- tested by tests/writer/test_readme_custom_loop.py -->"


def test_the_custom_loop_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = readme_block(MARKER)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), {})
    step, loss = ast.literal_eval(printed.getvalue())  # what the example printed: a tuple
    assert step == 50 and loss == pytest.approx(0.006737947, rel=1e-6)
    assert "(50, 0.0067" in printed.getvalue()  # what the README's comment says

    from rankscribe.writer import events

    histogram_steps = [
        event.step
        for event in events.load_dir("runs/own-loop")
        if event.what == "summary"
        for value in event.values
        if value.tag == "weights"
    ]
    assert histogram_steps == [10, 20, 30, 40, 50]
