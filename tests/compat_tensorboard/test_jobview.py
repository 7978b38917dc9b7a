"""The job view's TensorBoard file, read back by tensorboard itself.

The job is merged offline from rank dirs that the writer filled (with its
TensorBoard target on), as ``rankscribe-lineage merge`` does after a crash;
a live job view writes the other one. What TensorBoard shows is read through
its own data provider (what its Scalars, Text and HParams tabs ask for).
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

from rankscribe.jobview import LiveJobView
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.jobview.protocol import JobPartial
from rankscribe.lineage import merge_run_dir
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


def _context(logdir: Path) -> base_plugin.TBContext:
    events = multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(str(logdir))
    events.Reload()
    provider = data_provider.MultiplexerDataProvider(events, str(logdir))
    return base_plugin.TBContext(logdir=str(logdir), multiplexer=events, data_provider=provider)


@pytest.fixture(scope="module")
def plugin_context(base: Path) -> base_plugin.TBContext:
    return _context(base)


def _scalars(tb: base_plugin.TBContext) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """What the Scalars tab draws: run -> tag -> (step, value) points."""
    provider, request = tb.data_provider, context.RequestContext()
    listed = provider.list_scalars(request, experiment_id="", plugin_name="scalars")
    data = provider.read_scalars(
        request, experiment_id="", plugin_name="scalars", downsample=10_000, run_tag_filter=None
    )
    return {
        run: {tag: [(point.step, point.value) for point in data[run][tag]] for tag in tags}
        for run, tags in listed.items()
    }


def _texts(tb: base_plugin.TBContext) -> dict[str, dict[str, list[tuple[int, str]]]]:
    """What the Text tab shows: run -> tag -> (step, markdown)."""
    provider, request = tb.data_provider, context.RequestContext()
    data = provider.read_tensors(
        request, experiment_id="", plugin_name="text", downsample=100, run_tag_filter=None
    )
    return {
        run: {
            tag: [(point.step, point.numpy.item().decode()) for point in points]
            for tag, points in tags.items()
        }
        for run, tags in data.items()
    }


def _job_tensorboard_file(job: Path) -> Path:
    assert not [name for name in os.listdir(job) if "tfevents" in name]
    (name,) = [name for name in os.listdir(job / "job") if "tfevents" in name]
    return job / "job" / name


def test_the_job_is_a_named_run_beside_its_ranks(base: Path) -> None:
    """TensorBoard names a run by its folder: the job is never ``.``."""
    assert set(_scalars(_context(base / "exp1"))) == {"job", "rank_0", "rank_1"}
    assert set(_scalars(_context(base))) == {"exp1/job", "exp1/rank_0", "exp1/rank_1"}


def test_the_scalars_tab_holds_curves_and_the_results_at_the_last_step(
    plugin_context: base_plugin.TBContext,
) -> None:
    job = _scalars(plugin_context)["exp1/job"]
    singles = {tag for tag, points in job.items() if len(points) == 1}
    # The HParams results, under names no curve has, at the job's last step: the only
    # single points. No verdict, no merge note, no rank number.
    assert singles == {"final/loss", "final/metric/acc"}
    assert job["final/loss"] == [(STEPS, 1.0)]  # (0.5 + 1.5) / 2, the merged lineage's loss
    assert job["final/metric/acc"] == [(STEPS, 0.75)]
    assert not [tag for tag in job if tag.startswith(("job/", "user_defined/"))]
    assert not [tag for tag in job if tag.endswith("_rank")]
    assert {"loss/auto/mean", "loss/auto/min", "loss/auto/max", f"{STEP_TIME_TAG}/skew"} <= set(job)


def test_the_verdicts_are_text(plugin_context: base_plugin.TBContext) -> None:
    ((step, text),) = _texts(plugin_context)["exp1/job"]["verdicts"]
    assert step == STEPS
    assert text.startswith("- straggler: none") and "\n- divergence: not checked" in text


def test_the_job_scalars_equal_the_job_summary_file(base: Path) -> None:
    job = base / "exp1"
    accumulator = EventAccumulator(str(_job_tensorboard_file(job)), size_guidance={"scalars": 0})
    accumulator.Reload()
    summary = reader.scalars(job)  # the job's _MS file
    for tag in TAGS:
        for suffix in ("mean", "min", "max", "std", "ranks"):
            events = accumulator.Scalars(f"{tag}/{suffix}")
            assert [(event.step, event.value) for event in events] == summary[f"{tag}/{suffix}"]
        # A rank's number, smoothed, would read as a fraction of a rank: the summary
        # file keeps it, TensorBoard compares the ranks as runs.
        for suffix in ("min_rank", "max_rank"):
            assert f"{tag}/{suffix}" in summary
            assert f"{tag}/{suffix}" not in accumulator.Tags()["scalars"]
    assert f"{STEP_TIME_TAG}/slowest_rank" not in accumulator.Tags()["scalars"]
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
    assert group.name == "exp1/job"
    assert group.hparams["optimizer"].string_value == "Adam"
    assert group.hparams["learning_rate"].number_value == 0.125
    assert group.hparams["device_num"].number_value == 2
    metrics = {value.name.tag: value for value in group.metric_values if not value.name.group}
    assert metrics["final/metric/acc"].value == 0.75
    assert metrics["final/loss"].value == 1.0  # (0.5 + 1.5) / 2, the merged lineage's loss
    assert metrics["final/loss"].training_step == STEPS
    # and the job's own curves, at their last step
    assert metrics["loss/auto/mean"].training_step == STEPS
    assert metrics["loss/auto/mean"].value == pytest.approx((2 / STEPS + 1) / 2, rel=1e-6)


def test_hparams_are_hyper_parameters_and_the_results_are_metrics(
    plugin_context: base_plugin.TBContext,
) -> None:
    """Merge notes and verdicts are no hyper-parameters, nor lone metric points."""
    plugin = hparams_plugin.HParamsPlugin(plugin_context)
    request_context = context.RequestContext()
    experiment = get_experiment.Handler(
        request_context, plugin._context, "", api_pb2.GetExperimentRequest()
    ).run()
    names = {info.name for info in experiment.hparam_infos}
    assert not {name for name in names if name.startswith("user_defined/")}, names
    metric_tags = {info.name.tag for info in experiment.metric_infos}
    assert {"final/loss", "final/metric/acc", "loss/auto/mean"} <= metric_tags
    assert not {tag for tag in metric_tags if tag.startswith(("user_defined/", "job/"))}


def _live_job(directory: Path) -> None:
    """Two ranks through a live job view: two intervals, then the end of training."""
    view = LiveJobView(directory, world_size=2, tensorboard=True)
    for first in (1, 7):
        interval = JobPartial()
        for rank in range(2):
            points = {
                "loss": [(step, 1.0 / step + rank) for step in range(first, first + 6)],
                STEP_TIME_TAG: [(step, 0.01 * (1 + rank)) for step in range(first, first + 6)],
            }
            interval.merge(JobPartial.of_rank(rank, points, last_step=first - 1))
        view.add(interval)
        view.write()
    view.finish(
        hparams={"optimizer": "Adam", "learning_rate": 0.125},
        metrics={"loss": 1.0, "metric/acc": 0.75, "user_defined/job/straggler_rank": -1.0},
    )


def test_a_live_job_keeps_verdicts_out_of_the_scalars_tab(tmp_path: Path) -> None:
    job = tmp_path / "live"
    job.mkdir()
    _live_job(job)
    tb = _context(job)
    scalars = _scalars(tb)
    assert set(scalars) == {"job"}
    board = scalars["job"]
    assert not [tag for tag in board if tag.startswith(("job/", "user_defined/"))]
    assert not [tag for tag in board if tag.endswith("_rank")]
    # the user's loss is a curve; the final loss is a point at the last step, apart
    assert len(board["loss/mean"]) == 12
    assert "loss" not in board
    assert board["final/loss"] == [(12, 1.0)] and board["final/metric/acc"] == [(12, 0.75)]
    # the verdicts so far are in the Text tab as the sentences `show` prints, once per
    # interval written, then the end of training's
    verdicts = _texts(tb)["job"]["verdicts"]
    assert [step for step, _ in verdicts] == [6, 12, 12]
    assert verdicts[1][1].startswith("- straggler: rank 1")  # rank 1 steps twice as long
    assert "- last step: ranks 0,1: 12" in verdicts[1][1]
    assert "|" not in verdicts[1][1]  # no key/value table
    assert verdicts[2][1].startswith("- straggler: rank 1")
    # and in the job's summary file, as before, for the readers of the live view
    assert "job/straggler_rank" in reader.scalars(job)
