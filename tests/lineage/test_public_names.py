"""The lineage's second spellings: out of ``rankscribe.lineage.__all__``, still importable."""

from __future__ import annotations

import pytest

import rankscribe.lineage
from rankscribe.lineage import errors, jobview

MOVED_TO_JOBVIEW = ["JobView", "RankSeries", "series_from_dir", "write_job_view"]


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_listed_in_errors_and_only_the_base_in_the_package(name: str) -> None:
    if name == "ReportUnavailableError":  # never was a package-level name
        assert name not in rankscribe.lineage.__all__
        return
    assert getattr(rankscribe.lineage, name) is getattr(errors, name)
    assert (name in rankscribe.lineage.__all__) == (name == "LineageError")


@pytest.mark.parametrize("name", MOVED_TO_JOBVIEW)
def test_job_view_names_are_listed_in_jobview_and_still_import_from_the_package(
    name: str,
) -> None:
    assert name in jobview.__all__ and name not in rankscribe.lineage.__all__
    assert getattr(rankscribe.lineage, name) is getattr(jobview, name)


def test_the_bases_and_protocol_of_public_classes_are_public() -> None:
    lineage = rankscribe.lineage
    assert lineage.TrainLineage.__bases__ == (lineage.LineageCallback,)
    assert lineage.EvalLineage.__bases__ == (lineage.LineageCallback,)
    for section in (
        lineage.HyperParameters,
        lineage.TrainDataset,
        lineage.Algorithm,
        lineage.ModelFile,
        lineage.ValidDataset,
    ):
        assert section.__bases__ == (lineage.ScalarMessage,)
    for name in ("LineageCallback", "ScalarMessage", "SummaryRecordLike", "LineageFile"):
        assert name in lineage.__all__
