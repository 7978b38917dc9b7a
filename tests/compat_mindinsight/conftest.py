"""Run MindInsight 2.3.1 on what RankScribe wrote.

MindInsight needs protobuf <= 3.20.1 and the writer >= 6.31.1, so MindInsight
lives in a directory of its own (``tox -e mindinsight`` installs it there with
install_mindinsight.py and names it in ``RANKSCRIBE_MINDINSIGHT_SITE``) and
runs in a separate interpreter, ``python -S`` with only that directory on its
path: each side runs on the protobuf it supports, and they meet in files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SITE_VARIABLE = "RANKSCRIBE_MINDINSIGHT_SITE"
SIDE_SCRIPT = Path(__file__).with_name("mindinsight_side.py")
TIMEOUT_SECONDS = 600


class MindInsight:
    """Ask MindInsight 2.3.1, in its own interpreter, about directories."""

    def __init__(self, site: str) -> None:
        self.site = site

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        environment = {**os.environ, "PYTHONPATH": self.site}
        completed = subprocess.run(
            [sys.executable, "-S", str(SIDE_SCRIPT)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=environment,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        answer: dict[str, Any] = json.loads(completed.stdout)
        return answer

    def load(self, *run_dirs: Path) -> dict[str, Any]:
        """What MindInsight's data loader kept, per run dir (by str path)."""
        runs: dict[str, Any] = self.ask({"load": [str(path) for path in run_dirs]})["runs"]
        return runs

    def filter(self, base_dir: Path, conditions: list[Any]) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = self.ask(
            {"filter": str(base_dir), "conditions": conditions}
        )["answers"]
        return answers


@pytest.fixture(scope="session")
def mindinsight() -> MindInsight:
    site = os.environ.get(SITE_VARIABLE)
    if site is None:
        # MindInsight lives in a directory of its own that only the mindinsight env makes.
        pytest.skip(
            f"MindInsight 2.3.1 is not installed ({SITE_VARIABLE} is not set); "
            "the mindinsight env runs this"
        )
    if not site or not Path(site, "mindinsight").is_dir():
        pytest.fail(
            f"{SITE_VARIABLE} must name a directory holding MindInsight 2.3.1 (got {site!r}); "
            f"run these tests with `tox -e mindinsight`"
        )
    client = MindInsight(site)
    versions = client.ask({"versions": True})["versions"]
    assert versions["mindinsight"] == "2.3.1", versions
    return client
