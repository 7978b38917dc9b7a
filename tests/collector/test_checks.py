"""The collector's argument checks: ints and numbers, never a bool, one wording."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import CheckpointConfig, CheckpointManager, SummaryCollector

# private: the argument-check rules themselves (one family, no public door)
from rankscribe.collector._checks import (
    check_int,
    check_number,
    check_optional_int,
    is_int,
    is_number,
)
from rankscribe.collector.errors import (
    CheckpointTypeError,
    CheckpointValueError,
    CollectorTypeError,
    CollectorValueError,
)


@pytest.mark.parametrize(
    "value, expected",
    [
        (0, True),
        (-3, True),
        (2**70, True),
        (True, False),
        (False, False),
        (1.0, False),
        ("1", False),
        (None, False),
        (np.int64(3), False),
        (np.bool_(True), False),
    ],
)
def test_is_int_refuses_bools_and_other_types(value: Any, expected: bool) -> None:
    assert is_int(value) is expected


def test_numpy_integers_count_only_when_asked() -> None:
    assert is_int(np.int32(4), numpy_ints=True)
    assert not is_int(np.bool_(True), numpy_ints=True)
    assert check_int("n", np.uint8(7), numpy_ints=True) == 7
    assert type(check_int("n", np.uint8(7), numpy_ints=True)) is int


@pytest.mark.parametrize(
    "value, expected",
    [
        (1, True),
        (0.5, True),
        (math.inf, True),
        (math.nan, True),
        (True, False),
        ("2", False),
        (None, False),
    ],
)
def test_is_number(value: Any, expected: bool) -> None:
    assert is_number(value) is expected


@pytest.mark.parametrize(
    "minimum, value, message",
    [
        (1, True, "steps must be a positive int, got True (bool)"),
        (0, 1.5, "steps must be a non-negative int, got 1.5 (float)"),
        (None, "3", "steps must be an int, got '3' (str)"),
        (5, None, "steps must be an int >= 5, got None (NoneType)"),
    ],
)
def test_a_wrong_type_names_the_argument_and_the_form(
    minimum: int | None, value: Any, message: str
) -> None:
    with pytest.raises(CollectorTypeError, match=f"^{re.escape(message)}$") as caught:
        check_int("steps", value, minimum=minimum)
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize(
    "minimum, value, message",
    [
        (1, 0, "steps must be a positive int, got 0"),
        (0, -2, "steps must be a non-negative int, got -2"),
        (5, 4, "steps must be an int >= 5, got 4"),
    ],
)
def test_a_value_below_the_bound_is_a_value_error(minimum: int, value: int, message: str) -> None:
    with pytest.raises(CollectorValueError, match=f"^{re.escape(message)}$") as caught:
        check_int("steps", value, minimum=minimum)
    assert isinstance(caught.value, ValueError)


def test_the_bound_itself_passes() -> None:
    assert check_int("steps", 1, minimum=1) == 1
    assert check_int("steps", 0, minimum=0) == 0


def test_optional_int_accepts_none_and_says_so_when_refusing() -> None:
    assert check_optional_int("keep", None, minimum=0) is None
    assert check_optional_int("keep", 3, minimum=0) == 3
    with pytest.raises(
        CollectorTypeError,
        match=re.escape("keep must be a non-negative int or None, got False (bool)"),
    ):
        check_optional_int("keep", False, minimum=0)
    with pytest.raises(
        CollectorValueError, match=re.escape("keep must be a non-negative int, got -1")
    ):
        check_optional_int("keep", -1, minimum=0)


def test_the_callers_error_classes_are_raised() -> None:
    errors = (CheckpointTypeError, CheckpointValueError)
    with pytest.raises(CheckpointTypeError):
        check_int("n", True, minimum=0, errors=errors)
    with pytest.raises(CheckpointValueError):
        check_int("n", -1, minimum=0, errors=errors)


def test_the_owner_wording_is_mindspores() -> None:
    with pytest.raises(
        CollectorTypeError,
        match=re.escape(
            "For `collect_freq` the type should be a valid type of ['int'], but got bool True."
        ),
    ):
        check_int("collect_freq", True, minimum=1, owner="SummaryCollector")
    with pytest.raises(
        CollectorValueError,
        match=re.escape(
            'For "SummaryCollector", the value of `collect_freq` should be greater than 0, '
            "but got `0`."
        ),
    ):
        check_int("collect_freq", 0, minimum=1, owner="SummaryCollector")


@pytest.mark.parametrize(
    "value, error, message",
    [
        ("5", CollectorTypeError, "t must be a number of seconds, got '5' (str)"),
        (True, CollectorTypeError, "t must be a number of seconds, got True (bool)"),
        (math.nan, CollectorValueError, "t must be a number of seconds, got nan"),
        (0, CollectorValueError, "t must be positive and finite, got 0"),
        (math.inf, CollectorValueError, "t must be positive and finite, got inf"),
    ],
)
def test_check_number(value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        check_number("t", value, positive=True, finite=True, unit="seconds")


def test_check_number_returns_a_float() -> None:
    assert check_number("t", 2) == 2.0
    assert check_number("t", -math.inf) == -math.inf


# -- through the public classes that use them --------------------------------------------


def test_summary_collector_refuses_a_bool_frequency(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match=re.escape("For `collect_freq` the type should be")):
        SummaryCollector(tmp_path, collect_freq=True)


def test_checkpoint_config_takes_a_numpy_count_and_refuses_a_bool() -> None:
    count: Any = np.int64(3)  # what a script computing the count with numpy passes
    assert CheckpointConfig(keep_checkpoint_max=count).keep_checkpoint_max == 3
    with pytest.raises(
        CheckpointTypeError,
        match=re.escape("keep_checkpoint_max must be a non-negative int or None, got True (bool)"),
    ):
        CheckpointConfig(keep_checkpoint_max=True)


def test_a_nan_time_is_a_value_error_for_the_manager() -> None:
    with pytest.raises(CheckpointValueError, match=r"^cur_time must be a number, got nan$"):
        CheckpointManager().keep_one_ckpoint_per_minutes(5, math.nan)
