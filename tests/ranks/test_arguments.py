"""rankscribe.ranks.arguments: the argument checks of every package, one rule and one wording.

Each package makes an ArgumentChecks with its own error classes; these tests use a pair
made here, as a sibling package would, and the ranks package's own pair through its
public functions.
"""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import split_evenly
from rankscribe.ranks.arguments import (
    ArgumentChecks,
    is_int,
    is_integral,
    is_number,
    is_real,
    shown,
)
from rankscribe.ranks.errors import RanksTypeError, RanksValueError


class SiblingError(Exception):
    """A sibling package's base error."""


class SiblingTypeError(SiblingError, TypeError):
    pass


class SiblingValueError(SiblingError, ValueError):
    pass


CHECKS = ArgumentChecks(SiblingTypeError, SiblingValueError)


class Count:
    """An integer that is not an int, as NumPy's are (the ranks env has no NumPy)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"Count({self.value})"


numbers.Integral.register(Count)


def refused(error: type[Exception], message: str) -> Any:
    return pytest.raises(error, match=f"^{re.escape(message)}$")


@pytest.mark.parametrize(
    "value, expected",
    [(0, True), (-3, True), (2**70, True), (True, False), (1.0, False), ("1", False)],
)
def test_is_int_refuses_bools_and_other_types(value: Any, expected: bool) -> None:
    assert is_int(value) is expected
    assert not is_int(Count(3))


def test_integers_of_other_types_and_reals() -> None:
    assert is_integral(Count(4)) and is_integral(7)
    assert not is_integral(True)
    assert is_real(0.5) and is_real(2) and not is_real(True) and not is_real("1")
    assert is_number(math.nan) and is_number(3) and not is_number(True)


def test_shown_cuts_a_long_value() -> None:
    assert shown("x" * 200, limit=10) == "'xxxxxx..."
    assert shown([1]) == "[1]"


@pytest.mark.parametrize(
    "minimum, value, message",
    [
        (1, True, "steps must be an int >= 1, got True (bool)"),
        (0, 1.5, "steps must be an int >= 0, got 1.5 (float)"),
        (None, "3", "steps must be an int, got '3' (str)"),
        (5, None, "steps must be an int >= 5, got None (NoneType)"),
    ],
)
def test_a_wrong_type_names_the_argument_the_form_the_value_and_its_type(
    minimum: int | None, value: Any, message: str
) -> None:
    with refused(SiblingTypeError, message) as caught:
        CHECKS.check_int("steps", value, minimum=minimum)
    assert isinstance(caught.value, SiblingError) and isinstance(caught.value, TypeError)


@pytest.mark.parametrize(
    "minimum, value, message",
    [(1, 0, "steps must be an int >= 1, got 0"), (5, 4, "steps must be an int >= 5, got 4")],
)
def test_a_value_below_the_bound_is_the_callers_value_error(
    minimum: int, value: int, message: str
) -> None:
    with refused(SiblingValueError, message) as caught:
        CHECKS.check_int("steps", value, minimum=minimum)
    assert isinstance(caught.value, SiblingError) and isinstance(caught.value, ValueError)


def test_the_bound_itself_passes_and_other_integers_count_when_asked() -> None:
    assert CHECKS.check_int("steps", 1, minimum=1) == 1
    assert type(CHECKS.check_int("n", Count(7), integral=True)) is int
    with refused(SiblingTypeError, "n must be an int, got Count(7) (Count)"):
        CHECKS.check_int("n", Count(7))
    with refused(SiblingTypeError, "n must be an int, got True (bool)"):
        CHECKS.check_int("n", True, integral=True)


def test_optional_int_accepts_none_and_says_so() -> None:
    assert CHECKS.check_optional_int("keep", None, minimum=0) is None
    assert CHECKS.check_optional_int("keep", 3, minimum=0) == 3
    with refused(SiblingTypeError, "keep must be an int >= 0 or None, got False (bool)"):
        CHECKS.check_optional_int("keep", False, minimum=0)
    with refused(SiblingValueError, "keep must be an int >= 0 or None, got -1"):
        CHECKS.check_optional_int("keep", -1, minimum=0)


def test_the_owner_wording_is_mindspores_sentence() -> None:
    with refused(
        SiblingTypeError,
        "For 'SummaryRecord', the argument 'num_process' must be an int >= 1, but got '2' (str).",
    ):
        CHECKS.check_int("num_process", "2", minimum=1, owner="SummaryRecord")
    with refused(
        SiblingValueError,
        "For 'SummaryRecord', the argument 'num_process' must be an int >= 1, but got 0.",
    ):
        CHECKS.check_int("num_process", 0, minimum=1, owner="SummaryRecord")


@pytest.mark.parametrize(
    "value, error, message",
    [
        ("5", SiblingTypeError, "t must be a number of seconds, got '5' (str)"),
        (True, SiblingTypeError, "t must be a number of seconds, got True (bool)"),
        (math.nan, SiblingValueError, "t must be a number of seconds, got nan"),
        (0, SiblingValueError, "t must be positive and finite, got 0"),
        (math.inf, SiblingValueError, "t must be positive and finite, got inf"),
    ],
)
def test_check_number(value: Any, error: type[Exception], message: str) -> None:
    with refused(error, message):
        CHECKS.check_number("t", value, positive=True, finite=True, unit="seconds")
    assert CHECKS.check_number("t", 2) == 2.0


@pytest.mark.parametrize(
    "value, error, message",
    [
        ("5", SiblingTypeError, "timeout must be a finite number of seconds >= 0, got '5' (str)"),
        (-1, SiblingValueError, "timeout must be a finite number of seconds >= 0, got -1"),
        (math.inf, SiblingValueError, "timeout must be a finite number of seconds >= 0, got inf"),
        (10**400, SiblingValueError, "timeout must be a finite number of seconds >= 0, got 1"),
    ],
)
def test_check_seconds(value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        CHECKS.check_seconds("timeout", value)
    assert CHECKS.check_seconds("timeout", 0) == 0.0


def test_paths(tmp_path: Path) -> None:
    assert CHECKS.check_path("dir", tmp_path) == str(tmp_path)
    assert CHECKS.check_optional_path("dir", None) is None
    with refused(SiblingTypeError, "dir must be a path (a str or os.PathLike), got 5 (int)"):
        CHECKS.check_path("dir", 5)
    with refused(SiblingValueError, "dir must be a non-empty path without NUL characters, got ''"):
        CHECKS.check_path("dir", "")
    with refused(
        SiblingValueError, "dir must be a non-empty path without NUL characters, got 'a\\x00b'"
    ):
        CHECKS.check_path("dir", "a\0b")
    with refused(
        SiblingTypeError, "dir must be a path (a str or os.PathLike) or None, got b'x' (bytes)"
    ):
        CHECKS.check_optional_path("dir", b"x")


def test_flags_mappings_texts_and_functions() -> None:
    assert CHECKS.check_bool("on", True) is True
    with refused(SiblingTypeError, "on must be a bool, got 1 (int)"):
        CHECKS.check_bool("on", 1)
    with refused(SiblingTypeError, "on must be a bool or None, got 'y' (str)"):
        CHECKS.check_optional_bool("on", "y")
    with refused(SiblingTypeError, "extra must be a mapping, got [] (list)"):
        CHECKS.check_mapping("extra", [])
    assert CHECKS.check_optional_mapping("extra", None) is None
    with refused(SiblingTypeError, "extra must be a mapping or None, got 3 (int)"):
        CHECKS.check_optional_mapping("extra", 3)
    with refused(
        SiblingValueError,
        "For 'Loop', the argument 'mode' must be a non-empty str or None, but got ''.",
    ):
        CHECKS.check_optional_text("mode", "", owner="Loop")
    with refused(
        SiblingTypeError,
        "For 'Loop', the argument 'fn' must be a function, but got None (NoneType).",
    ):
        CHECKS.check_callable("fn", None, owner="Loop")
    with refused(SiblingTypeError, "data must be an iterable or None, got 5 (int)"):
        CHECKS.check_iterable("data", 5, optional=True)
    with refused(SiblingValueError, "mode must be one of 'a', 'b', got 'c' (str)"):
        CHECKS.check_choice("mode", "c", ("a", "b"))


def test_hosts_and_ranks() -> None:
    assert CHECKS.check_host("host", None) is None and CHECKS.check_host("host", "vm") == "vm"
    with refused(
        SiblingValueError,
        "host must be a non-empty file-name part (no '/', no NUL), got '../x'",
    ):
        CHECKS.check_host("host", "../x")
    assert CHECKS.check_ranks("failed", (2, 0)) == [2, 0]
    with refused(SiblingValueError, "failed must hold ranks (ints >= 0), got True (bool)"):
        CHECKS.check_ranks("failed", [True])
    with refused(SiblingTypeError, "failed must be a sequence of ranks (ints >= 0), got '1' (str)"):
        CHECKS.check_ranks("failed", "1")


def test_the_ranks_package_raises_its_own_errors_in_that_wording() -> None:
    with refused(RanksTypeError, "rank must be an int >= 0, got True (bool)"):
        split_evenly(range(10), 2, True)  # type: ignore[arg-type]
    with refused(RanksValueError, "rank must be in range(world_size) = range(2), got 2"):
        split_evenly(range(10), 2, 2)
