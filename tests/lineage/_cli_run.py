"""``rankscribe-lineage`` run in-process, as the CLI tests call it."""

from __future__ import annotations

import pytest

from rankscribe.lineage.cli import main

#: What every error line of the console script starts with.
ERROR = "rankscribe-lineage: error: "


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``rankscribe-lineage ARGV...``: its exit code, what it printed and what it said on stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
