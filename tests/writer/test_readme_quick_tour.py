"""The README's quick tour runs as written and prints what its comment says."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import pytest

from rankscribe.writer import events
from tests._support.readme import README, readme_block

MARKER = "<!-- tested by tests/writer/test_readme_quick_tour.py -->"


def test_the_quick_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(readme_block(MARKER), str(README), "exec"), {})
    step, loss = ast.literal_eval(printed.getvalue())
    assert step == 100 and loss == pytest.approx(0.01)
    assert "(100, 0.0099999" in printed.getvalue()  # the README's comment
    kinds = {
        (value.tag, type(value.value).__name__)
        for event in events.load_dir("runs/exp1")
        if event.what == "summary"
        for value in event.values
    }
    assert kinds == {("loss", "float"), ("fc/weight", "Histogram"), ("input", "Image")}
    # Both formats: MindInsight's _MS file and TensorBoard's event file.
    assert list(Path("runs/exp1").glob("events.out.events.summary.*_MS"))
    assert list(Path("runs/exp1").glob("events.out.tfevents.*"))
