"""Read summary, lineage and TensorBoard event files back.

Three layers, each usable alone:

1. **File names** — :func:`parse_file_name` splits
   ``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}`` (and the older
   forms) into an :class:`EventFileName`; :func:`file_kind` classifies a name
   the way MindInsight and TensorBoard do; :func:`list_summary_files` lists a
   directory in reading order.
2. **Events** — :func:`read_events`, :func:`read_lineage_events` and
   :func:`read_tensorboard_events` return an :class:`EventReader`: iterate it
   for the protobuf messages of one file, or call :meth:`EventReader.records`
   for their byte offsets too. Both CRCs of every record are checked. A torn
   last record (the writer died mid-write) ends the iteration, is logged and
   is left in :attr:`EventReader.torn_tail`; damage before the end raises
   :class:`~rankscribe.writer.errors.CorruptRecordError` when ``strict``, and is
   otherwise logged, kept in :attr:`EventReader.corruptions` and skipped.
3. **Plain Python values** — :func:`decode_event` turns a summary ``Event``
   into a :class:`SummaryEvent` (floats, NumPy arrays, :class:`Histogram`,
   :class:`Image`, :class:`Graph`); :func:`decode_lineage_event` turns a
   ``LineageEvent`` into a :class:`LineageRecord` whose ``data`` is a dict.
   :func:`scalars`, :func:`load_dir` and :func:`load_lineage_dir` do all of it
   for a whole directory.

Example::

    from rankscribe.writer import reader

    for event in reader.load_dir("runs/exp1"):
        for value in event.values:
            print(event.step, value.tag, value.plugin, value.value)
    curves = reader.scalars("runs/exp1")   # {"loss": [(1, 2.375), ...], ...}
"""

from __future__ import annotations

import enum
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from rankscribe.writer.errors import CorruptRecordError, WriterValueError
from rankscribe.writer.framing import RecordReader, TornTail
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2, tensorboard_pb2

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EventFileName",
    "EventReader",
    "EventRecord",
    "FileKind",
    "Graph",
    "GraphNode",
    "Histogram",
    "HistogramBucket",
    "Image",
    "Landscape",
    "LandscapePoint",
    "LineageRecord",
    "SummaryEvent",
    "SummaryValue",
    "decode_event",
    "decode_lineage_event",
    "decode_value",
    "file_kind",
    "list_summary_files",
    "load_dir",
    "load_lineage_dir",
    "message_to_dict",
    "open_events",
    "parse_file_name",
    "read_events",
    "read_lineage_events",
    "read_tensorboard_events",
    "scalars",
]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
MessageT = TypeVar("MessageT", bound=Message)


# --------------------------------------------------------------------------
# File names
# --------------------------------------------------------------------------


class FileKind(str, enum.Enum):
    """What a file holds, as told by its name."""

    SUMMARY = "summary"  # summary_pb2.Event records (MindSpore's `_MS` files)
    LINEAGE = "lineage"  # lineage_pb2.LineageEvent records (`_lineage` files)
    TENSORBOARD = "tensorboard"  # tensorboard_pb2.Event records (`events.out.tfevents.*`)


# MindInsight's own tests (summary_watcher, ms_data_loader): a summary file is
# any name containing `summary.<digits>`; the ones ending in `_lineage` hold
# lineage and the ones ending in `_explain` hold MindSpore 1.x XAI data.
_MINDINSIGHT_SUMMARY = re.compile(r"summary\.(\d+)")
# TensorBoard's test (`IsTensorFlowEventsFile`): "tfevents" anywhere in the name.
_TENSORBOARD_EVENTS = re.compile(r"tfevents\.(\d+)")

_MINDSPORE_NAME = re.compile(
    r"^(?P<prefix>.+?)\.out\.events\.summary\.(?P<timestamp>\d+)\."
    r"(?:(?P<rank>\d+)\.)?(?P<host_and_suffix>.*)$"
)
_TENSORBOARD_NAME = re.compile(
    r"^(?P<prefix>.*?)\.?out\.tfevents\.(?P<timestamp>\d+)\.?(?P<host>.*)$"
)
# Suffixes MindSpore itself writes, longest first: `_MS_lineage` is the 0.1-0.2
# lineage name (`<summary file>_lineage`), `_explain` the 1.x XAI file.
_KNOWN_SUFFIXES = ("_MS_lineage", "_lineage", "_explain", "_MS")


@dataclass(frozen=True)
class EventFileName:
    """The parts of an event file name.

    ``rank`` is ``None`` for names written by MindSpore <= 1.1, which had no
    device id, and for TensorBoard files. For TensorBoard files ``host`` is
    everything after the timestamp and ``suffix`` is empty, because TensorBoard
    writers append free-form text there.
    """

    name: str
    kind: FileKind
    prefix: str
    timestamp: int
    rank: int | None
    host: str
    suffix: str


def file_kind(path: PathLike) -> FileKind | None:
    """Return what the file named ``path`` holds, or ``None`` if it is no event file.

    The rules are MindInsight's and TensorBoard's, so a file one of them would
    load is recognised even when its name does not follow the default pattern.
    MindSpore 1.x ``_explain`` files are not recognised: nothing here reads them.
    """
    name = os.path.basename(os.fspath(path))
    if _MINDINSIGHT_SUMMARY.search(name):
        if name.endswith("_lineage"):
            return FileKind.LINEAGE
        if name.endswith("_explain"):
            return None
        return FileKind.SUMMARY
    if "tfevents" in name:
        return FileKind.TENSORBOARD
    return None


def parse_file_name(path: PathLike) -> EventFileName:
    """Split an event file name into prefix, timestamp, rank, host and suffix.

    Understands every form MindSpore wrote (FORMAT.md §3)::

        events.out.events.summary.1795244534.0.vm_MS       (>= 1.2: with rank)
        events.out.events.summary.1795244534.vm_MS         (<= 1.1: no rank)
        events.out.events.summary.1795244534.vm_MS_lineage (0.1-0.2 lineage)

    and TensorBoard's ``events.out.tfevents.{T}.{host}...``. Only the directory
    part of ``path`` is ignored.

    The host and the suffix touch without a separator, so they are told apart
    by MindSpore's own suffixes (``_MS``, ``_lineage``, ``_MS_lineage``,
    ``_explain``) and otherwise at the last ``_`` (host names rarely hold one);
    a name with no ``_`` after the timestamp has an empty suffix. A host whose
    first label is all digits is read as a rank, as in the current form.

    Raises:
        WriterValueError: the name is not an event file name.
    """
    name = os.path.basename(os.fspath(path))
    kind = file_kind(name)
    match = _MINDSPORE_NAME.match(name) if kind in (FileKind.SUMMARY, FileKind.LINEAGE) else None
    if kind is not None and match is not None:
        host, suffix = _split_host_and_suffix(match["host_and_suffix"])
        rank = match["rank"]
        return EventFileName(
            name=name,
            kind=kind,
            prefix=match["prefix"],
            timestamp=int(match["timestamp"]),
            rank=None if rank is None else int(rank),
            host=host,
            suffix=suffix,
        )
    tensorboard = _TENSORBOARD_NAME.match(name) if kind is FileKind.TENSORBOARD else None
    if tensorboard is not None:
        return EventFileName(
            name=name,
            kind=FileKind.TENSORBOARD,
            prefix=tensorboard["prefix"].rstrip("."),
            timestamp=int(tensorboard["timestamp"]),
            rank=None,
            host=tensorboard["host"],
            suffix="",
        )
    raise WriterValueError(
        f"{name!r} is not an event file name: expected "
        "'{prefix}.out.events.summary.{timestamp}.{rank}.{host}{suffix}' "
        "or 'events.out.tfevents.{timestamp}.{host}'"
    )


def _split_host_and_suffix(text: str) -> tuple[str, str]:
    for suffix in _KNOWN_SUFFIXES:
        if text.endswith(suffix):
            return text[: -len(suffix)], suffix
    cut = text.rfind("_")
    if cut < 0:
        return text, ""
    return text[:cut], text[cut:]


def _sort_timestamp(name: str) -> int:
    match = _MINDINSIGHT_SUMMARY.search(name) or _TENSORBOARD_EVENTS.search(name)
    return int(match[1]) if match else 0


def _coerce_kind(kind: FileKind | str | None) -> FileKind | None:
    if kind is None or isinstance(kind, FileKind):
        return kind
    try:
        return FileKind(kind)
    except ValueError:
        valid = ", ".join(repr(k.value) for k in FileKind)
        raise WriterValueError(f"kind must be one of {valid} or None, got {kind!r}") from None


def list_summary_files(directory: PathLike, kind: FileKind | str | None = None) -> list[Path]:
    """Return the event files directly inside ``directory``, in reading order.

    Args:
        directory: the run directory; subdirectories are not searched (to
            MindInsight each one is a run of its own).
        kind: ``"summary"``, ``"lineage"``, ``"tensorboard"`` (or the
            :class:`FileKind`) to keep only that kind; ``None`` keeps all three.

    The order is MindInsight's: by the timestamp in the name (when the writer
    was created), then by name. Symbolic links are skipped, as MindInsight
    skips them, so a link cannot pull files from outside the directory into a
    run. Files :func:`file_kind` does not recognise are ignored.

    Raises:
        FileNotFoundError, NotADirectoryError: ``directory`` is not a directory.
        WriterValueError: ``kind`` is not one of the above.
    """
    wanted = _coerce_kind(kind)
    found: list[Path] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                continue
            entry_kind = file_kind(entry.name)
            if entry_kind is None or (wanted is not None and entry_kind is not wanted):
                continue
            found.append(Path(entry.path))
    found.sort(key=lambda path: (_sort_timestamp(path.name), path.name))
    return found


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRecord(Generic[MessageT]):
    """One decoded record: where it starts in the file and the message it holds."""

    offset: int
    payload_length: int
    event: MessageT


class EventReader(Generic[MessageT]):
    """The decoded records of one event file; iterate it for the messages.

    Every iteration reads the file again from the start. After an iteration
    has run to its end:

    - :attr:`torn_tail` is the incomplete last record, if any (a crash
      mid-write leaves one); everything before it has been returned.
    - :attr:`corruptions` lists the records that were skipped (lenient mode
      only): a CRC mismatch, or a payload that is not a valid message. After a
      damaged *length* nothing further can be read, because the next record
      boundary is unknown.

    Both are logged as warnings naming the file.
    """

    def __init__(self, path: PathLike, message_type: type[MessageT], *, strict: bool = False):
        self.path = Path(path)
        self.message_type = message_type
        self.strict = strict
        self.torn_tail: TornTail | None = None
        self.corruptions: list[CorruptRecordError] = []

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({os.fspath(self.path)!r}, "
            f"{self.message_type.__name__}, strict={self.strict})"
        )

    def __iter__(self) -> Iterator[MessageT]:
        for record in self.records():
            yield record.event

    def records(self) -> Iterator[EventRecord[MessageT]]:
        """Yield every readable record with its byte offset."""
        self.torn_tail = None
        self.corruptions = []
        framing = RecordReader(self.path, strict=self.strict)
        reported = 0
        returned = 0
        for raw in framing:
            reported = self._report_framing_damage(framing, reported)
            event = self._parse(raw.offset, raw.payload)
            if event is not None:
                returned += 1
                yield EventRecord(raw.offset, len(raw.payload), event)
        self._report_framing_damage(framing, reported)
        if framing.torn_tail is not None:
            self.torn_tail = framing.torn_tail
            logger.warning(
                "%s: the last record, at byte %d, is incomplete (%s), as a writer that "
                "stopped mid-write leaves it; the %d records before it were read",
                self.path,
                framing.torn_tail.offset,
                framing.torn_tail.reason,
                returned,
            )

    def _report_framing_damage(self, framing: RecordReader, reported: int) -> int:
        for error in framing.corruptions[reported:]:
            self._skip(error)
        return len(framing.corruptions)

    def _parse(self, offset: int, payload: bytes) -> MessageT | None:
        try:
            return self.message_type.FromString(payload)
        except DecodeError as exc:
            error = CorruptRecordError(
                os.fspath(self.path),
                offset,
                f"payload of {len(payload)} bytes is not a valid "
                f"{self.message_type.DESCRIPTOR.full_name}: {exc}",
            )
            if self.strict:
                raise error from exc
            self._skip(error)
            return None

    def _skip(self, error: CorruptRecordError) -> None:
        self.corruptions.append(error)
        logger.warning("%s; skipped", error)


def _refuse_other_kind(path: PathLike, expected: FileKind, reader_name: str) -> None:
    kind = file_kind(path)
    if kind is not None and kind is not expected:
        raise WriterValueError(
            f"{os.fspath(path)!r} is a {kind.value} file by its name, not a "
            f"{expected.value} file; read it with {reader_name}() or open_events()"
        )


def read_events(path: PathLike, *, strict: bool = False) -> EventReader[summary_pb2.Event]:
    """Return a reader of the ``summary_pb2.Event`` records of a summary (``_MS``) file.

    Raises:
        WriterValueError: the name says the file holds lineage or TensorBoard events.
    """
    _refuse_other_kind(path, FileKind.SUMMARY, "read_lineage_events or read_tensorboard_events")
    return EventReader(path, summary_pb2.Event, strict=strict)


def read_lineage_events(
    path: PathLike, *, strict: bool = False
) -> EventReader[lineage_pb2.LineageEvent]:
    """Return a reader of the ``lineage_pb2.LineageEvent`` records of a ``_lineage`` file.

    Raises:
        WriterValueError: the name says the file holds summary or TensorBoard events.
    """
    _refuse_other_kind(path, FileKind.LINEAGE, "read_events or read_tensorboard_events")
    return EventReader(path, lineage_pb2.LineageEvent, strict=strict)


def read_tensorboard_events(
    path: PathLike, *, strict: bool = False
) -> EventReader[tensorboard_pb2.Event]:
    """Return a reader of the ``tensorboard_pb2.Event`` records of a TensorBoard file.

    Raises:
        WriterValueError: the name says the file holds summary or lineage events.
    """
    _refuse_other_kind(path, FileKind.TENSORBOARD, "read_events or read_lineage_events")
    return EventReader(path, tensorboard_pb2.Event, strict=strict)


_MESSAGE_TYPES: dict[FileKind, type[Message]] = {
    FileKind.SUMMARY: summary_pb2.Event,
    FileKind.LINEAGE: lineage_pb2.LineageEvent,
    FileKind.TENSORBOARD: tensorboard_pb2.Event,
}


def open_events(
    path: PathLike, *, kind: FileKind | str | None = None, strict: bool = False
) -> EventReader[Message]:
    """Return a reader for any event file, choosing the message type by ``kind``.

    ``kind`` defaults to what :func:`file_kind` says of the name.

    Raises:
        WriterValueError: no ``kind`` was given and the name is not an event file name.
    """
    resolved = _coerce_kind(kind) or file_kind(path)
    if resolved is None:
        raise WriterValueError(
            f"cannot tell what {os.fspath(path)!r} holds from its name; "
            "pass kind='summary', 'lineage' or 'tensorboard'"
        )
    return EventReader(path, _MESSAGE_TYPES[resolved], strict=strict)


# --------------------------------------------------------------------------
# Plain Python values
# --------------------------------------------------------------------------


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
        from rankscribe.writer.image import decode_png  # noqa: PLC0415

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
    from rankscribe.writer.tensor import decode_tensor  # noqa: PLC0415

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


def decode_value(proto: summary_pb2.Summary.Value) -> SummaryValue:
    """Turn one ``Summary.Value`` into a :class:`SummaryValue`.

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
    return SummaryValue(proto.tag, _PLUGIN_OF_FIELD.get(which or ""), value)


def _decode_graph(proto: anf_ir_pb2.GraphProto) -> Graph:
    return Graph(
        name=proto.name,
        nodes=tuple(GraphNode(n.name, n.op_type, n.scope, n.full_name) for n in proto.node),
        parameters=tuple(p.name for p in proto.parameters),
        proto=proto,
    )


def decode_event(event: summary_pb2.Event) -> SummaryEvent:
    """Turn a summary ``Event`` into plain Python values (see :class:`SummaryEvent`).

    Tensors and landscapes need :mod:`rankscribe.writer.tensor`; images keep
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
    """
    what = event.WhichOneof("what")
    data: dict[str, Any] = {}
    if what == "version":
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


def _field_value(descriptor: FieldDescriptor, value: Any) -> Any:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        return message_to_dict(value)
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
    """
    result: dict[str, Any] = {}
    for descriptor, value in message.ListFields():
        if descriptor.message_type is not None and _is_map(descriptor):
            value_field = descriptor.message_type.fields_by_name["value"]
            result[descriptor.name] = {
                key: _field_value(value_field, value[key]) for key in sorted(value)
            }
        elif _is_repeated(descriptor):
            result[descriptor.name] = [_field_value(descriptor, item) for item in value]
        else:
            result[descriptor.name] = _field_value(descriptor, value)
    return result


# --------------------------------------------------------------------------
# Whole directories
# --------------------------------------------------------------------------


def _summary_files(source: PathLike) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return list_summary_files(path, FileKind.SUMMARY)
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {os.fspath(path)!r}")
    return [path]


def load_dir(directory: PathLike, *, strict: bool = False) -> list[SummaryEvent]:
    """Return every event of every summary (``_MS``) file in ``directory``, decoded.

    Files come in :func:`list_summary_files` order and events in file order.
    ``directory`` may also name a single summary file.
    """
    return [
        decode_event(event)
        for path in _summary_files(directory)
        for event in read_events(path, strict=strict)
    ]


def load_lineage_dir(directory: PathLike, *, strict: bool = False) -> list[LineageRecord]:
    """Return every record of every ``_lineage`` file in ``directory``, decoded, in order."""
    return [
        decode_lineage_event(event)
        for path in list_summary_files(directory, FileKind.LINEAGE)
        for event in read_lineage_events(path, strict=strict)
    ]


def scalars(source: PathLike, *, strict: bool = False) -> dict[str, list[tuple[int, float]]]:
    """Return every scalar in a summary file or directory: ``{tag: [(step, value), ...]}``.

    Tags keep their first-seen order and each list keeps file order. Nothing is
    merged: a tag written twice in one step appears twice (MindInsight would
    keep only the last). An event without a step counts as step 0, as it does
    for MindInsight. Values are the stored float32, widened.
    """
    curves: dict[str, list[tuple[int, float]]] = {}
    for path in _summary_files(source):
        # Straight from the protobuf: no need to decode the tensors and
        # images that share these events.
        for event in read_events(path, strict=strict):
            if event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                if value.WhichOneof("value") == "scalar_value":
                    curves.setdefault(value.tag, []).append((event.step, value.scalar_value))
    return curves
