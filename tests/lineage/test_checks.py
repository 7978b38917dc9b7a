"""The lineage package's argument checks: ints and numbers, never a bool."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

import pytest

# private: the argument-check rules themselves (one family, no public door)
from rankscribe.lineage._checks import (
    check_int,
    check_optional_int,
    int_argument,
    is_int,
    is_number,
)
from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError
from rankscribe.lineage.jobview import RankSeries, write_job_view


@pytest.mark.parametrize(
    "value, expected",
    [
        (0, True),
        (-1, True),
        (True, False),
        (False, False),
        (1.0, False),
        ("1", False),
        (None, False),
    ],
)
def test_is_int(value: Any, expected: bool) -> None:
    assert is_int(value) is expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, True),
        (0.25, True),
        (math.nan, True),
        (True, False),
        ("3", False),
        (None, False),
    ],
)
def test_is_number(value: Any, expected: bool) -> None:
    assert is_number(value) is expected


def test_check_int_names_the_argument_and_the_form() -> None:
    assert check_int("max_points", 4, minimum=4) == 4
    with pytest.raises(
        LineageParamTypeError, match=re.escape("max_points must be an int >= 4, got True (bool)")
    ):
        check_int("max_points", True, minimum=4)
    with pytest.raises(
        LineageParamValueError, match=re.escape("max_points must be an int >= 4, got 3") + "$"
    ):
        check_int("max_points", 3, minimum=4)
    with pytest.raises(TypeError, match=re.escape("n must be an int, got '2' (str)")):
        check_int("n", "2")


def test_check_optional_int() -> None:
    assert check_optional_int("workers", None, minimum=1) is None
    assert check_optional_int("workers", 2, minimum=1) == 2
    with pytest.raises(
        LineageParamValueError, match=re.escape("workers must be an int >= 1 or None, got 0") + "$"
    ):
        check_optional_int("workers", 0, minimum=1)
    with pytest.raises(ValueError):  # a LineageParamValueError is a ValueError too
        check_optional_int("workers", -5, minimum=1)


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
