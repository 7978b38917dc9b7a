"""The lineage's names: one spelling each; the sibling modules stay out of the package's list."""

from __future__ import annotations

import types

import pytest

import rankscribe.jobview
import rankscribe.lineage
from rankscribe.jobview import feed, parts, protocol
from rankscribe.lineage import errors, recording


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_listed_in_errors_and_only_the_base_in_the_package(name: str) -> None:
    if name == "LineageError":
        assert name in rankscribe.lineage.__all__
        assert rankscribe.lineage.LineageError is errors.LineageError
        return
    assert name not in rankscribe.lineage.__all__
    with pytest.raises(AttributeError, match=name):
        getattr(rankscribe.lineage, name)  # no second spelling


@pytest.mark.parametrize("name", rankscribe.jobview.__all__)
def test_job_view_names_are_spelled_in_the_job_view_only(name: str) -> None:
    # The job view is a package of its own: the lineage manager keeps no second spelling.
    assert name not in rankscribe.lineage.__all__
    with pytest.raises(AttributeError, match=name):
        getattr(rankscribe.lineage, name)


@pytest.mark.parametrize("old", ["jobview", "jobparts", "job"])
def test_the_lineage_package_holds_no_job_view_module(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__(f"rankscribe.lineage.{old}")


@pytest.mark.parametrize("module", [feed, parts, protocol, recording], ids=lambda m: m.__name__)
def test_a_sibling_modules_names_are_neither_the_packages_nor_the_job_views(
    module: types.ModuleType,
) -> None:
    exported = set(module.__all__)
    assert exported
    assert not exported & set(rankscribe.lineage.__all__)
    assert not exported & set(rankscribe.jobview.__all__)


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
