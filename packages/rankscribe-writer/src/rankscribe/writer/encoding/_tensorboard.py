"""The TensorBoard target: the same step, encoded as TensorFlow ``Event`` records.

TensorBoard reads ``events.out.tfevents.*`` files of TFRecord-framed
``tensorflow.Event`` messages: the framing is ours already, only the payload
schema differs (TF's ``simple_value`` is field 2 where the original's
``scalar_value`` is field 3). Scalars, histograms, images and text are
written; raw tensors are not, since TensorBoard has no view for them.
"""

from __future__ import annotations

from rankscribe.writer.encoding._histogram import histogram_to_tensorboard
from rankscribe.writer.encoding._image import image_to_tensorboard
from rankscribe.writer.format._wire import TENSORBOARD_FILE_VERSION
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2

PLUGINS = ("scalar", "histogram", "image", "text")

_Value = tensorboard_pb2.Summary.Value


def version_event(wall_time: float) -> bytes:
    event = tensorboard_pb2.Event(wall_time=wall_time, file_version=TENSORBOARD_FILE_VERSION)
    return bytes(event.SerializeToString())


def scalar_value(tag: str, value: float) -> _Value:
    return _Value(tag=tag, simple_value=value)


def histogram_value(tag: str, histogram: summary_pb2.Summary.Histogram) -> _Value:
    """The same buckets as TensorBoard's right-edged histogram of the finite values."""
    return _Value(tag=tag, histo=histogram_to_tensorboard(histogram))


def image_value(tag: str, image: summary_pb2.Summary.Image) -> _Value:
    """The same PNG; colorspace 3 means RGB in TensorBoard's schema too."""
    return _Value(tag=tag, image=image_to_tensorboard(image))


def text_value(tag: str, text: str) -> _Value:
    """A rank-0 string tensor under the ``text`` plugin, as TensorBoard's text dashboard expects."""
    metadata = tensorboard_pb2.SummaryMetadata(
        plugin_data=tensorboard_pb2.SummaryMetadata.PluginData(plugin_name="text"),
    )
    tensor = tensorboard_pb2.TensorProto(
        dtype=tensorboard_pb2.DT_STRING,
        tensor_shape=tensorboard_pb2.TensorShapeProto(),
        string_val=[text.encode()],
    )
    return _Value(tag=tag, metadata=metadata, tensor=tensor)


def summary_event(wall_time: float, step: int, values: list[_Value]) -> bytes:
    event = tensorboard_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.extend(values)
    return bytes(event.SerializeToString())
