"""collect_landscape's num_samples is a number of samples: it must be positive."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.collector.errors import CollectorValueError


@pytest.mark.parametrize("samples", [0, -1])
def test_num_samples_must_be_positive(tmp_path: Path, samples: int) -> None:
    with pytest.raises(CollectorValueError, match=rf'"num_samples" .* but got {samples}\.'):
        SummaryCollector(
            str(tmp_path), collect_specified_data={"collect_landscape": {"num_samples": samples}}
        )


def test_a_positive_num_samples_is_kept(tmp_path: Path) -> None:
    collector = SummaryCollector(
        str(tmp_path), collect_specified_data={"collect_landscape": {"num_samples": 1}}
    )
    assert collector.summary_dir == str(tmp_path)
