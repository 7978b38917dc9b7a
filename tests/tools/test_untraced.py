"""tests/_support/untraced.py: a timed test under ``coverage run`` (the measured tox envs)
runs with coverage's tracer paused, instead of skipping or timing the tracer."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from tests._support.launchers import run_bounded
from tests._support.needs import needs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = needs("coverage", envs="public-api")

TIMED = """
import sys, threading
from tests._support.untraced import untraced

def test_timed(capsys):
    assert sys.gettrace() is not None  # measured, as every test of a measured env
    with untraced("this test"):
        inside = sys.gettrace()
        seen = []
        thread = threading.Thread(target=lambda: seen.append(sys.gettrace()))
        thread.start()
        thread.join(timeout=60)
    after = sys.gettrace()
    with capsys.disabled():
        print(f"inside={inside} thread={seen[0]} after={type(after).__name__}")
"""


def test_under_coverage_a_timed_block_runs_untraced_and_the_tracer_comes_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_timed.py").write_text(textwrap.dedent(TIMED), encoding="utf-8")
    pytest_options = ["-q", "-s", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
    finished = run_bounded(
        [sys.executable, "-m", "coverage", "run", "-m", "pytest", *pytest_options, str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "COVERAGE_FILE": str(tmp_path / ".coverage")},
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.output
    assert "1 passed" in finished.output
    assert "inside=None thread=None after=CTracer" in finished.output
