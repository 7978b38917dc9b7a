"""The lineage's names: one spelling each; the sibling modules stay out of the package's list."""

from __future__ import annotations

import types

import pytest

import rankscribe.lineage
from rankscribe.lineage import errors, jobparts, jobview, recording

JOBVIEW_NAMES = ["JobView", "RankSeries", "series_from_dir", "write_job_view"]


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_listed_in_errors_and_only_the_base_in_the_package(name: str) -> None:
    if name == "LineageError":
        assert name in rankscribe.lineage.__all__
        assert rankscribe.lineage.LineageError is errors.LineageError
        return
    assert name not in rankscribe.lineage.__all__
    with pytest.raises(AttributeError, match=name):
        getattr(rankscribe.lineage, name)  # no second spelling


@pytest.mark.parametrize("name", JOBVIEW_NAMES)
def test_job_view_names_are_spelled_in_jobview_only(name: str) -> None:
    assert name in jobview.__all__ and name not in rankscribe.lineage.__all__
    with pytest.raises(AttributeError, match=name):
        getattr(rankscribe.lineage, name)


@pytest.mark.parametrize("module", [jobparts, recording], ids=lambda m: m.__name__)
def test_a_sibling_modules_names_are_neither_the_packages_nor_the_job_views(
    module: types.ModuleType,
) -> None:
    exported = set(module.__all__)
    assert exported
    assert not exported & set(rankscribe.lineage.__all__)
    assert not exported & set(jobview.__all__)


def test_the_bases_and_protocol_of_public_classes_are_public() -> None:
    lineage = rankscribe.lineage
    assert lineage.TrainLineage.__bases__ == (lineage.LineageCallback,)
    assert lineage.EvalLineage.__bases__ == (lineage.LineageCallback,)
    for section in (
        recording.HyperParameters,
        recording.TrainDataset,
        recording.Algorithm,
        recording.ModelFile,
        recording.ValidDataset,
    ):
        assert section.__bases__ == (recording.ScalarMessage,)
    for name in ("LineageCallback", "SummaryRecordLike"):
        assert name in lineage.__all__
    assert "ScalarMessage" in recording.__all__
    assert "LineageFile" in recording.__all__  # parse_run's argument, beside it
