"""The lineage package's argument checks: its own errors, and its command-line option types.

The checks themselves are rankscribe.ranks.arguments' (tests/ranks/test_arguments.py).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

# The CLI tests see this wording only inside argparse's usage message.
# private: the argparse type of the CLI's int options, its own wording
from rankscribe.lineage._checks import int_argument
from rankscribe.lineage.errors import LineageParamValueError
from rankscribe.lineage.jobview import RankSeries, write_job_view


def test_int_argument_for_argparse() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--n", type=int_argument(4))
    assert parser.parse_args(["--n", "9"]).n == 9
    with pytest.raises(argparse.ArgumentError, match=re.escape("expected an int >= 4, got 3")):
        parser.parse_args(["--n", "3"])
    with pytest.raises(argparse.ArgumentError, match=re.escape("expected an int >= 4, got 'x'")):
        parser.parse_args(["--n", "x"])


def test_write_job_view_refuses_a_bool_world_size(tmp_path: Path) -> None:
    with pytest.raises(LineageParamValueError, match="world_size must be an int >= 1, got True"):
        write_job_view(tmp_path, {0: RankSeries(0)}, world_size=True)
    assert list(tmp_path.iterdir()) == []
