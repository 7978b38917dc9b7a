"""TensorBoard's plugin events: the HParams experiment and sessions, the Custom Scalars layout.

These events carry a plugin's own message inside a ``Summary.Value``'s metadata
(HParams) or string tensor (Custom Scalars), as TensorBoard's own summary ops write
them: an HParams value holds an empty float tensor, a layout a scalar string tensor
under the tag ``custom_scalars__config__``. ``docs/file-format.md`` ("What goes in each
file") and ``docs/job-view.md`` ("In the viewers") say where RankScribe writes them.
Protobuf maps are serialized deterministically, so the same call writes the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from google.protobuf import struct_pb2

from rankscribe.writer.pb import tensorboard_custom_scalars_pb2 as custom_scalars_pb2
from rankscribe.writer.pb import tensorboard_hparams_pb2 as hparams_pb2
from rankscribe.writer.pb import tensorboard_pb2

HPARAMS_PLUGIN = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
CUSTOM_SCALARS_PLUGIN = "custom_scalars"
CUSTOM_SCALARS_TAG = "custom_scalars__config__"

#: What an HParams hyper-parameter may hold.
HParamValue = bool | float | str

_Value = tensorboard_pb2.Summary.Value


def _serialized(event: tensorboard_pb2.Event) -> bytes:
    return bytes(event.SerializeToString(deterministic=True))


def _event(wall_time: float, values: Sequence[_Value], step: int = 0) -> bytes:
    event = tensorboard_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.extend(values)
    return _serialized(event)


def _hparams_value(tag: str, data: hparams_pb2.HParamsPluginData) -> _Value:
    value = _Value(tag=tag)
    value.metadata.plugin_data.plugin_name = HPARAMS_PLUGIN
    value.metadata.plugin_data.content = data.SerializeToString(deterministic=True)
    # TensorBoard's own hparams summaries carry an empty float tensor.
    value.tensor.dtype = tensorboard_pb2.DT_FLOAT
    value.tensor.tensor_shape.SetInParent()
    return value


def _set_value(target: struct_pb2.Value, value: HParamValue) -> None:
    """Fill a ``google.protobuf.Value`` (a bool is checked first: it is an int to Python)."""
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, str):
        target.string_value = value
    else:
        target.number_value = value


def experiment_event(
    wall_time: float, hparams: Mapping[str, Sequence[HParamValue]], metrics: Sequence[str]
) -> bytes:
    """The experiment summary: every hyper-parameter (typed by the values seen), every metric.

    A hyper-parameter whose values are all bools is a bool, all strings a string (with
    the values seen as its domain, sorted), all floats a float64; mixed values leave the
    type unset, which TensorBoard reads as "any".
    """
    data = hparams_pb2.HParamsPluginData(version=0)
    experiment = data.experiment
    experiment.time_created_secs = wall_time
    for name, values in hparams.items():
        info = experiment.hparam_infos.add(name=name)
        if all(isinstance(value, bool) for value in values):
            info.type = hparams_pb2.DATA_TYPE_BOOL
        elif all(isinstance(value, str) for value in values):
            info.type = hparams_pb2.DATA_TYPE_STRING
            for text in sorted({str(value) for value in values}):
                info.domain_discrete.values.add(string_value=text)
        elif all(isinstance(value, float) for value in values):
            info.type = hparams_pb2.DATA_TYPE_FLOAT64
    for tag in metrics:
        experiment.metric_infos.add().name.tag = tag
    return _event(wall_time, [_hparams_value(EXPERIMENT_TAG, data)])


def session_events(
    wall_time: float,
    *,
    group: str,
    start_time: float,
    end_time: float,
    hparams: Mapping[str, HParamValue],
    metrics: Mapping[str, float],
    step: int,
) -> list[bytes]:
    """One session: its start (hyper-parameters), its metrics as scalars at ``step``, its end.

    Without metrics there is no scalar event. An empty ``group`` makes TensorBoard
    group the session by its run (the directory of the file).
    """
    start = hparams_pb2.HParamsPluginData(version=0)
    start.session_start_info.group_name = group
    start.session_start_info.start_time_secs = start_time
    for name, value in hparams.items():
        _set_value(start.session_start_info.hparams[name], value)
    end = hparams_pb2.HParamsPluginData(version=0)
    end.session_end_info.status = hparams_pb2.STATUS_SUCCESS
    end.session_end_info.end_time_secs = end_time
    events = [_event(wall_time, [_hparams_value(SESSION_START_TAG, start)])]
    if metrics:
        scalars = [_Value(tag=tag, simple_value=metric) for tag, metric in metrics.items()]
        events.append(_event(wall_time, scalars, step))
    events.append(_event(wall_time, [_hparams_value(SESSION_END_TAG, end)]))
    return events


def layout_event(
    wall_time: float,
    title: str,
    margin_charts: Mapping[str, tuple[str, str, str]],
    line_charts: Mapping[str, Sequence[str]],
) -> bytes:
    """A Custom Scalars layout of one category ``title``, at step 0.

    ``margin_charts``: chart title -> (value tag, lower tag, upper tag), a line within
    a band. ``line_charts``: chart title -> the tags it draws (taken literally: they
    are escaped into the regular expressions TensorBoard matches).
    """
    layout = custom_scalars_pb2.Layout()
    category = layout.category.add(title=title)
    for chart_title, (line, lower, upper) in margin_charts.items():
        chart = category.chart.add(title=chart_title)
        chart.margin.series.add(value=line, lower=lower, upper=upper)
    for chart_title, tags in line_charts.items():
        chart = category.chart.add(title=chart_title)
        chart.multiline.tag.extend(re.escape(tag) for tag in tags)
    value = _Value(tag=CUSTOM_SCALARS_TAG)
    value.metadata.plugin_data.plugin_name = CUSTOM_SCALARS_PLUGIN
    value.tensor.dtype = tensorboard_pb2.DT_STRING
    value.tensor.tensor_shape.SetInParent()
    value.tensor.string_val.append(layout.SerializeToString())
    return _event(wall_time, [value])
