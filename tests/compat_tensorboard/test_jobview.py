"""The job view's TensorBoard file, read back by tensorboard itself.

The job is merged offline from rank dirs that the writer filled (with its
TensorBoard target on), as ``rankscribe-lineage merge`` does after a crash.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from tensorboard import context
from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer as multiplexer
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins import base_plugin
from tensorboard.plugins.custom_scalar import custom_scalars_plugin
from tensorboard.plugins.hparams import api_pb2, get_experiment, hparams_plugin, list_session_groups

from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.jobparts import STEP_TIME_TAG
from rankscribe.lineage.recording import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    TrainLineageInfo,
)
from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2

STEPS = 12
TAGS = ("loss/auto", STEP_TIME_TAG)


def _write_rank(directory: Path, rank: int) -> None:
    rng = np.random.default_rng(rank)
    with SummaryRecord(directory, rank=rank, formats=("mindinsight", "tensorboard")) as record:
        for step in range(1, STEPS + 1):
            record.add_value("scalar", "loss/auto", 1.0 / step + rank)
            record.add_value("scalar", STEP_TIME_TAG, 0.01 * (1 + 0.1 * rng.random()))
            record.record(step)
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(optimizer="Adam", learning_rate=0.125, device_num=2),
        algorithm=Algorithm(network="Net", loss=0.5 + rank),
    )
    evaluation = EvalLineageInfo(metric='{"acc": 0.75}')
    events = [
        lineage_pb2.LineageEvent(wall_time=1.0, train_lineage=train.to_proto()),
        lineage_pb2.LineageEvent(wall_time=2.0, evaluation_lineage=evaluation.to_proto()),
    ]
    path = directory / f"events.out.events.summary.1700000000.{rank}.vm_lineage"
    path.write_bytes(b"".join(frame(event.SerializeToString()) for event in events))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("runs")
    for rank in range(2):
        _write_rank(base / "exp1" / f"rank_{rank}", rank)
    merge_run_dir(base / "exp1")
    return base


@pytest.fixture(scope="module")
def plugin_context(base: Path) -> base_plugin.TBContext:
    events = multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(str(base))
    events.Reload()
    provider = data_provider.MultiplexerDataProvider(events, str(base))
    return base_plugin.TBContext(logdir=str(base), multiplexer=events, data_provider=provider)


def _job_tensorboard_file(job: Path) -> Path:
    (name,) = [name for name in os.listdir(job) if "tfevents" in name]
    return job / name


def test_the_job_scalars_equal_the_job_summary_file(base: Path) -> None:
    job = base / "exp1"
    accumulator = EventAccumulator(str(_job_tensorboard_file(job)), size_guidance={"scalars": 0})
    accumulator.Reload()
    summary = reader.scalars(job)  # the job's _MS file
    for tag in TAGS:
        for suffix in ("mean", "min", "max", "std", "ranks", "min_rank", "max_rank"):
            events = accumulator.Scalars(f"{tag}/{suffix}")
            assert [(event.step, event.value) for event in events] == summary[f"{tag}/{suffix}"]
    means = [event.value for event in accumulator.Scalars("loss/auto/mean")]
    expected = [np.float32((1.0 / step + 1.0 / step + 1) / 2) for step in range(1, STEPS + 1)]
    np.testing.assert_allclose(means, expected, rtol=1e-6)
    assert len(accumulator.Scalars(f"{STEP_TIME_TAG}/skew")) == STEPS


def test_the_custom_scalars_dashboard_finds_a_margin_chart_per_tag(
    plugin_context: base_plugin.TBContext,
) -> None:
    plugin = custom_scalars_plugin.CustomScalarsPlugin(plugin_context)
    layout = json.loads(plugin.layout_impl(context.RequestContext(), ""))  # the /layout body
    charts = {chart["title"]: chart for chart in layout["category"][0]["chart"]}
    for tag in TAGS:
        assert charts[tag]["margin"]["series"] == [
            {"value": f"{tag}/mean", "lower": f"{tag}/min", "upper": f"{tag}/max"}
        ]
    assert charts[f"{STEP_TIME_TAG}/skew"]["multiline"]["tag"] == [f"{STEP_TIME_TAG}/skew"]


def test_the_hparams_tab_links_the_job_to_its_own_curves(
    plugin_context: base_plugin.TBContext,
) -> None:
    plugin = hparams_plugin.HParamsPlugin(plugin_context)
    request_context = context.RequestContext()
    experiment = get_experiment.Handler(
        request_context, plugin._context, "", api_pb2.GetExperimentRequest()
    ).run()
    assert {"optimizer", "learning_rate", "device_num", "network"} <= {
        info.name for info in experiment.hparam_infos
    }
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0,
        slice_size=10,
        allowed_statuses=[api_pb2.STATUS_SUCCESS, api_pb2.STATUS_UNKNOWN],
    )
    groups = list_session_groups.Handler(request_context, plugin._context, "", request).run()
    (group,) = groups.session_groups  # the job alone: its rank runs hold no session
    assert group.name == "exp1"
    assert group.hparams["optimizer"].string_value == "Adam"
    assert group.hparams["learning_rate"].number_value == 0.125
    assert group.hparams["device_num"].number_value == 2
    metrics = {value.name.tag: value for value in group.metric_values if not value.name.group}
    assert metrics["metric/acc"].value == 0.75
    assert metrics["loss"].value == 1.0  # (0.5 + 1.5) / 2, the merged lineage's loss
    # and the job's own curves, at their last step
    assert metrics["loss/auto/mean"].training_step == STEPS
    assert metrics["loss/auto/mean"].value == pytest.approx((2 / STEPS + 1) / 2, rel=1e-6)


def test_hparams_are_hyper_parameters_and_the_merge_notes_are_metrics(
    base: Path, plugin_context: base_plugin.TBContext
) -> None:
    """Merge notes are no hyper-parameters, and no metric is a lone point at step 0."""
    plugin = hparams_plugin.HParamsPlugin(plugin_context)
    request_context = context.RequestContext()
    experiment = get_experiment.Handler(
        request_context, plugin._context, "", api_pb2.GetExperimentRequest()
    ).run()
    names = {info.name for info in experiment.hparam_infos}
    assert not {name for name in names if name.startswith("user_defined/")}, names
    metric_tags = {info.name.tag for info in experiment.metric_infos}
    assert {
        "user_defined/loss_min",
        "user_defined/loss_max",
        "user_defined/ranks_reported",
    } <= metric_tags
    assert "user_defined/ranks_missing" not in metric_tags  # text: neither
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0,
        slice_size=10,
        allowed_statuses=[api_pb2.STATUS_SUCCESS, api_pb2.STATUS_UNKNOWN],
    )
    (group,) = (
        list_session_groups.Handler(request_context, plugin._context, "", request)
        .run()
        .session_groups
    )
    metrics = {value.name.tag: value for value in group.metric_values if not value.name.group}
    assert (metrics["user_defined/loss_min"].value, metrics["user_defined/loss_max"].value) == (
        0.5,
        1.5,
    )
    # The job's final values sit at its last step, beside the end of its curves.
    accumulator = EventAccumulator(str(base / "exp1"))
    accumulator.Reload()
    for tag in ("loss", "metric/acc", "user_defined/loss_min"):
        assert [event.step for event in accumulator.Scalars(tag)] == [STEPS], tag
    lone = [
        tag
        for tag in accumulator.Tags()["scalars"]
        if [event.step for event in accumulator.Scalars(tag)] == [0]
    ]
    assert lone == []
