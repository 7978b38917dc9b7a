"""The decoded value model: summary and lineage events as plain Python values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from rankscribe.writer.errors import WriterValueError
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class HistogramBucket:
    """One bucket: it covers [left, left + width); the last bucket is closed."""

    left: float
    width: float
    count: int

    @property
    def right(self) -> float:
        return self.left + self.width


@dataclass(frozen=True)
class Histogram:
    """A decoded ``Summary.Histogram``.

    The three counts and ``count`` read as 0 when absent, as MindInsight reads
    them. ``min``, ``max`` and ``sum`` are ``None`` when absent: MindSpore
    leaves them out when no value is finite, and 0.0 would be a false value
    rather than a neutral one.
    """

    buckets: tuple[HistogramBucket, ...]
    count: int
    nan_count: int
    pos_inf_count: int
    neg_inf_count: int
    min: float | None
    max: float | None
    sum: float | None


@dataclass(frozen=True)
class Image:
    """A decoded ``Summary.Image``: the PNG as stored and its declared size.

    ``colorspace`` is what the file says; MindSpore always writes 3.
    """

    height: int
    width: int
    colorspace: int
    png: bytes = field(repr=False)

    def pixels(self) -> npt.NDArray[np.uint8]:
        """Decode the PNG into a height x width x channels uint8 array."""
        # Imported on use so that reading a file never loads Pillow.
        from rankscribe.writer.encoding._image import decode_png  # noqa: PLC0415

        return decode_png(self.png)


@dataclass(frozen=True, eq=False)
class LandscapePoint:
    """The x, y and z tensors of a loss-landscape point (``None`` when absent)."""

    x: np.ndarray[Any, Any] | None
    y: np.ndarray[Any, Any] | None
    z: np.ndarray[Any, Any] | None


@dataclass(frozen=True, eq=False)
class Landscape:
    """A decoded ``LossLandscape`` value; absent parts are ``None`` (or empty)."""

    landscape: LandscapePoint | None
    loss_path_intervals: tuple[int, ...]
    loss_path_points: LandscapePoint | None
    convergence_point: LandscapePoint | None
    decomposition: str | None
    unit: str | None
    step_per_epoch: int | None


class GraphNode(NamedTuple):
    name: str
    op_type: str
    scope: str
    full_name: str


@dataclass(frozen=True)
class Graph:
    """The parts of a ``GraphProto`` people look at; ``proto`` holds the rest."""

    name: str
    nodes: tuple[GraphNode, ...]
    parameters: tuple[str, ...]
    proto: anf_ir_pb2.GraphProto = field(repr=False, compare=False)


# The protobuf oneof field of Summary.Value -> the plugin name MindSpore's
# add_value takes (and MindInsight shows).
_PLUGIN_OF_FIELD = {
    "scalar_value": "scalar",
    "image": "image",
    "histogram": "histogram",
    "tensor": "tensor",
    "loss_landscape": "landscape",
}


@dataclass(frozen=True, eq=False)
class SummaryValue:
    """One tagged value of a summary event.

    ``value`` by ``plugin``: ``"scalar"`` → float (the stored float32, widened),
    ``"tensor"`` → NumPy array, ``"histogram"`` → :class:`Histogram`,
    ``"image"`` → :class:`Image`, ``"landscape"`` → :class:`Landscape`.
    A value with only a tag has ``plugin`` and ``value`` ``None``.
    Instances compare by identity, since NumPy arrays have no single truth value.
    """

    tag: str
    plugin: str | None
    value: float | np.ndarray[Any, Any] | Histogram | Image | Landscape | None


@dataclass(frozen=True, eq=False)
class SummaryEvent:
    """A decoded summary ``Event``.

    ``what`` names the oneof that is set (``"version"``, ``"graph_def"``,
    ``"summary"``, ``"explain"``) or is ``None``; the matching attribute is
    filled in. ``step`` is ``None`` when not on the wire (version and graph
    events). ``values`` keeps wire order, duplicates included: MindSpore writes
    both values when a tag is added twice in one step.
    """

    wall_time: float
    step: int | None
    what: str | None
    version: str | None = None
    graph: Graph | None = None
    values: tuple[SummaryValue, ...] = ()


@dataclass(frozen=True)
class LineageRecord:
    """A decoded ``LineageEvent``; ``data`` is the set oneof as a dict (:func:`message_to_dict`)."""

    wall_time: float
    step: int | None
    what: str | None
    data: dict[str, Any]


def _optional(message: Message, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _decode_tensor(proto: anf_ir_pb2.TensorProto) -> np.ndarray[Any, Any]:
    # Imported on use so that reading scalars, graphs and lineage never loads
    # the tensor codec (and NumPy with it).
    from rankscribe.writer.encoding._tensor import decode_tensor  # noqa: PLC0415

    return decode_tensor(proto)


def _decode_histogram(proto: summary_pb2.Summary.Histogram) -> Histogram:
    return Histogram(
        buckets=tuple(HistogramBucket(b.left, b.width, b.count) for b in proto.buckets),
        count=proto.count,
        nan_count=proto.nan_count,
        pos_inf_count=proto.pos_inf_count,
        neg_inf_count=proto.neg_inf_count,
        min=_optional(proto, "min"),
        max=_optional(proto, "max"),
        sum=_optional(proto, "sum"),
    )


def _decode_point(owner: Message, name: str) -> LandscapePoint | None:
    if not owner.HasField(name):
        return None
    point: summary_pb2.LossLandscape.Point = getattr(owner, name)
    axes = [
        _decode_tensor(getattr(point, axis)) if point.HasField(axis) else None
        for axis in ("x", "y", "z")
    ]
    return LandscapePoint(*axes)


def _decode_landscape(proto: summary_pb2.LossLandscape) -> Landscape:
    metadata = proto.metadata
    return Landscape(
        landscape=_decode_point(proto, "landscape"),
        loss_path_intervals=tuple(proto.loss_path.intervals),
        loss_path_points=_decode_point(proto.loss_path, "points"),
        convergence_point=_decode_point(proto, "convergence_point"),
        decomposition=_optional(metadata, "decomposition"),
        unit=_optional(metadata, "unit"),
        step_per_epoch=_optional(metadata, "step_per_epoch"),
    )


def tag_text(tag: str | bytes) -> str:
    """A tag as text: protobuf hands a proto2 string that is not UTF-8 back as bytes.

    Such bytes are escaped (``b"a\\xff"`` -> ``"a\\\\xff"``) rather than replaced, so
    that two different damaged tags stay two tags (docs/reading.md).
    """
    return tag if isinstance(tag, str) else tag.decode("utf-8", "backslashreplace")


def decode_value(proto: summary_pb2.Summary.Value) -> SummaryValue:
    """Turn one ``Summary.Value`` into a :class:`SummaryValue`.

    The tag is always ``str`` (see :func:`tag_text`).

    Raises:
        WriterValueError: a tensor whose data_type is not numeric or whose
            element count does not match its dims (from the tensor codec).
    """
    which = proto.WhichOneof("value")
    value: float | np.ndarray[Any, Any] | Histogram | Image | Landscape | None
    if which == "scalar_value":
        value = proto.scalar_value
    elif which == "tensor":
        value = _decode_tensor(proto.tensor)
    elif which == "histogram":
        value = _decode_histogram(proto.histogram)
    elif which == "image":
        image = proto.image
        value = Image(image.height, image.width, image.colorspace, image.encoded_image)
    elif which == "loss_landscape":
        value = _decode_landscape(proto.loss_landscape)
    else:
        value = None
    return SummaryValue(tag_text(proto.tag), _PLUGIN_OF_FIELD.get(which or ""), value)


def _decode_graph(proto: anf_ir_pb2.GraphProto) -> Graph:
    return Graph(
        name=proto.name,
        nodes=tuple(GraphNode(n.name, n.op_type, n.scope, n.full_name) for n in proto.node),
        parameters=tuple(p.name for p in proto.parameters),
        proto=proto,
    )


def decode_event(event: summary_pb2.Event) -> SummaryEvent:
    """Turn a summary ``Event`` into plain Python values (see :class:`SummaryEvent`).

    Tensors and landscapes need the tensor codec (and NumPy); images keep
    their PNG bytes until :meth:`Image.pixels` is called.

    Raises:
        WriterValueError: a value cannot be decoded (see :func:`decode_value`).
    """
    what = event.WhichOneof("what")
    return SummaryEvent(
        wall_time=event.wall_time,
        step=_optional(event, "step"),
        what=what,
        version=event.version if what == "version" else None,
        graph=_decode_graph(event.graph_def) if what == "graph_def" else None,
        values=tuple(decode_value(v) for v in event.summary.value) if what == "summary" else (),
    )


def decode_lineage_event(event: lineage_pb2.LineageEvent) -> LineageRecord:
    """Turn a ``LineageEvent`` into a :class:`LineageRecord`.

    ``data`` is :func:`message_to_dict` of the set oneof (``train_lineage``,
    ``evaluation_lineage``, ``dataset_graph`` or ``user_defined_info``), or the
    string itself for ``version``; it is empty when nothing is set.

    Raises:
        WriterValueError: a string in the record is not UTF-8 (a damaged record).
    """
    what = event.WhichOneof("what")
    data: dict[str, Any] = {}
    if what == "version":
        if not isinstance(event.version, str):
            raise _not_text(event.DESCRIPTOR.fields_by_name["version"])
        data = {"version": event.version}
    elif what is not None:
        data = message_to_dict(getattr(event, what))
    return LineageRecord(event.wall_time, _optional(event, "step"), what, data)


def _is_repeated(descriptor: FieldDescriptor) -> bool:
    # protobuf 7 replaced `label` with `is_repeated`; the oldest protobuf we
    # support (6.31) may only have `label`.
    flag = getattr(descriptor, "is_repeated", None)
    if flag is None:
        flag = getattr(descriptor, "label", None) == FieldDescriptor.LABEL_REPEATED
    return bool(flag)


def _is_map(descriptor: FieldDescriptor) -> bool:
    message_type = descriptor.message_type
    return message_type is not None and bool(message_type.GetOptions().map_entry)


def _not_text(descriptor: FieldDescriptor) -> WriterValueError:
    return WriterValueError(
        f"field {descriptor.full_name} holds text that is not UTF-8; the record is damaged"
    )


def _field_value(descriptor: FieldDescriptor, value: Any) -> Any:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        return message_to_dict(value)
    # protobuf hands a proto2 string that is not UTF-8 back as bytes.
    if descriptor.type == FieldDescriptor.TYPE_STRING and not isinstance(value, str):
        raise _not_text(descriptor)
    if descriptor.type == FieldDescriptor.TYPE_ENUM and descriptor.enum_type is not None:
        known = descriptor.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def message_to_dict(message: Message) -> dict[str, Any]:
    """Return the fields set in ``message`` as a dict of plain Python values.

    Like ``json_format.MessageToDict(..., preserving_proto_field_name=True)``
    but lossless: float32 fields are the exact widened double (0.1 stays
    0.10000000149011612 instead of being rounded to a short decimal), 64-bit
    integers stay ints (not strings), NaN and infinities stay floats and bytes
    stay bytes. Only fields present on the wire appear (proto2 presence);
    repeated fields are lists in wire order, maps are dicts with sorted keys,
    enums are their names.

    Raises:
        WriterValueError: a string field or map key is not UTF-8 (a damaged record).
    """
    result: dict[str, Any] = {}
    for descriptor, value in message.ListFields():
        if descriptor.message_type is not None and _is_map(descriptor):
            key_field = descriptor.message_type.fields_by_name["key"]
            value_field = descriptor.message_type.fields_by_name["value"]
            try:
                keys = list(value)
            except UnicodeDecodeError as error:  # protobuf decodes map keys on access
                raise _not_text(key_field) from error
            if key_field.type == FieldDescriptor.TYPE_STRING and not all(
                isinstance(key, str) for key in keys
            ):
                raise _not_text(key_field)
            result[descriptor.name] = {
                key: _field_value(value_field, value[key]) for key in sorted(keys)
            }
        elif _is_repeated(descriptor):
            result[descriptor.name] = [_field_value(descriptor, item) for item in value]
        else:
            result[descriptor.name] = _field_value(descriptor, value)
    return result
