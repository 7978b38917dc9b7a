"""The collector's argument checks, through its public classes: its own errors, one wording.

The checks themselves are rankscribe.ranks.arguments' (tests/ranks/test_arguments.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import CheckpointConfig, CheckpointManager, SummaryCollector
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError

# -- through the public classes that use them --------------------------------------------


def test_summary_collector_refuses_a_bool_frequency(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match=re.escape("For `collect_freq` the type should be")):
        SummaryCollector(tmp_path, collect_freq=True)


def test_checkpoint_config_takes_a_numpy_count_and_refuses_a_bool() -> None:
    count: Any = np.int64(3)  # what a script computing the count with numpy passes
    assert CheckpointConfig(keep_checkpoint_max=count).keep_checkpoint_max == 3
    with pytest.raises(
        CollectorTypeError,
        match=re.escape("keep_checkpoint_max must be an int >= 0 or None, got True (bool)"),
    ):
        CheckpointConfig(keep_checkpoint_max=True)


def test_a_nan_time_is_a_value_error_for_the_manager() -> None:
    with pytest.raises(CollectorValueError, match=r"^cur_time must be a number, got nan$"):
        CheckpointManager().keep_one_ckpoint_per_minutes(5, math.nan)
