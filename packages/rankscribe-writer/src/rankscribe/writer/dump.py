"""``rankscribe-dump``: print summary, lineage and TensorBoard event files as JSON lines.

    rankscribe-dump PATH [--strict] [--full] [--recursive] [--kind KIND]

PATH is one event file or a directory (its event files are printed in reading
order, see :func:`rankscribe.writer.reader.list_summary_files`; with
``--recursive`` its subdirectories follow, in name order). Each record becomes
one JSON object on its own line::

    {"file": "...", "offset": 44, "kind": "summary", "wall_time": 1795245260.65,
     "step": 1, "what": "summary", "values": [{"tag": "loss", "plugin": "scalar",
     "value": 2.375}]}

- ``step`` is ``null`` when the record has none (version, graph and lineage records).
- The record's content sits under the key named by ``what``: ``values`` for
  ``summary``, ``version``, ``graph`` (name and sizes; nodes with ``--full``),
  or the lineage message as a dict (``train_lineage``, ...).
- Scalars are the stored float32 widened to double. Histograms give their
  counts, ``min``/``max``/``sum`` (``null`` when absent) and ``buckets`` as
  ``[left, width, count]``. Images give their size and the PNG's length and
  SHA-256. Tensors give ``dtype``, ``shape`` and ``values`` when they hold at
  most 64 elements (or with ``--full``), otherwise ``min``/``max``/``mean`` of
  the finite elements and how many are not finite.
- A value that cannot be decoded (say, a tensor whose size does not match its
  dims) is given as ``{"tag", "value_field", "error"}`` and reported on stderr.
  A lineage record whose text is not UTF-8 (in a value or a map key) is given
  with ``error`` in place of its content, and reported on stderr. A scalar tag
  that is not UTF-8 is printed with backslash escapes (``"loss\\xff"``).
- NaN and infinities are the strings ``"NaN"``, ``"Infinity"`` and
  ``"-Infinity"``; bytes are given as their length and SHA-256.

A torn last record or, without ``--strict``, a damaged record is reported on
stderr and the dump goes on. Exit status: 0 on success, 1 when a file cannot be
read or ``--strict`` meets damage or an undecodable value or record, 2 for a bad
command line or path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from rankscribe.writer.errors import CorruptRecordError, WriterValueError
from rankscribe.writer.events import (
    Graph,
    Histogram,
    Image,
    Landscape,
    LandscapePoint,
    decode_event,
    decode_lineage_event,
    message_to_dict,
    open_events,
)
from rankscribe.writer.files import FileKind
from rankscribe.writer.pb import lineage_pb2, summary_pb2, tensorboard_pb2
from rankscribe.writer.reader import EventReader, decode_value, list_summary_files
from rankscribe.writer.reader._decoded import tag_text

__all__ = ["main"]

PROGRAM = "rankscribe-dump"
# Enough to read a small tensor in full on one line; larger ones are summarised.
LISTED_ELEMENTS = 64

_EXIT_OK = 0
_EXIT_UNREADABLE = 1
_EXIT_USAGE = 2


class _UsageError(Exception):
    """A mistake on the command line: reported in one line, exit status 2."""


class _UndecodableValueError(Exception):
    """With --strict, a value or record that cannot be decoded: one line, exit status 1."""

    def __init__(self, message: str, what: str = "value") -> None:
        super().__init__(message)
        self.what = what


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rankscribe-dump`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        args = _parse_arguments(argv)
    except SystemExit as exc:  # argparse has printed the usage or the help
        return exc.code if isinstance(exc.code, int) else _EXIT_USAGE
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROGRAM}: %(levelname)s: %(message)s"))
    package_logger = logging.getLogger("rankscribe")
    package_logger.addHandler(handler)
    try:
        readers = _readers(
            Path(args.path), kind=args.kind, strict=args.strict, recursive=args.recursive
        )
        return _dump(readers, full=args.full, strict=args.strict)
    except _UsageError as exc:
        _error(str(exc))
        return _EXIT_USAGE
    except (CorruptRecordError, _UndecodableValueError) as exc:
        if isinstance(exc, CorruptRecordError):
            instead = "the record is skipped"
        else:
            instead = f"the {exc.what} is shown with its error"
        _error(f"{exc} (without --strict {instead})")
        return _EXIT_UNREADABLE
    except BrokenPipeError:  # pragma: no cover - depends on the reader of stdout
        # `rankscribe-dump DIR | head` closes stdout early: not an error. Point
        # stdout at /dev/null so that the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _EXIT_OK
    except OSError as exc:
        _error(_describe_os_error(exc))
        return _EXIT_UNREADABLE
    finally:
        package_logger.removeHandler(handler)


def _parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Print summary, lineage and TensorBoard event files as JSON lines, "
        "one line per record.",
    )
    parser.add_argument("path", help="an event file, or a directory of them")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail at the first damaged record instead of reporting and skipping it",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"list every tensor element (default: up to {LISTED_ELEMENTS}) and every graph node",
    )
    parser.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also dump the subdirectories of a directory (each one is a run to MindInsight)",
    )
    parser.add_argument(
        "--kind",
        choices=[kind.value for kind in FileKind],
        help="what PATH holds, when its name does not say (files only)",
    )
    return parser.parse_args(argv)


def _error(message: str) -> None:
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)


def _describe_os_error(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {os.fspath(exc.filename)!r}"
    return str(exc)


def _dump(readers: Iterator[EventReader[Message]], *, full: bool, strict: bool) -> int:
    for reader in readers:
        for line in _lines(reader, full=full, strict=strict):
            print(json.dumps(line, allow_nan=False, ensure_ascii=False))
    return _EXIT_OK


def _readers(
    path: Path, *, kind: str | None, strict: bool, recursive: bool
) -> Iterator[EventReader[Message]]:
    if path.is_dir():
        if kind is not None:
            raise _UsageError("--kind applies to a single file, not to a directory")
        files = _directory_files(path, recursive=recursive)
        if not files:
            hint = "" if recursive else " (--recursive searches its subdirectories)"
            raise _UsageError(
                f"no summary, lineage or TensorBoard event files in {str(path)!r}{hint}"
            )
        for file in files:
            yield open_events(file, strict=strict)
    elif path.exists():
        try:
            yield open_events(path, kind=kind, strict=strict)
        except WriterValueError as exc:
            raise _UsageError(f"{exc}; or pass --kind") from None
    else:
        raise _UsageError(f"no such file or directory: {str(path)!r}")


def _directory_files(directory: Path, *, recursive: bool) -> list[Path]:
    if not recursive:
        return list_summary_files(directory)
    files: list[Path] = []
    # Sorted, and without following links, for the same reason the listing
    # skips linked files: a run directory shows only what is inside it.
    for current, subdirectories, _ in os.walk(directory, followlinks=False):
        subdirectories.sort()
        files.extend(list_summary_files(current))
    return files


def _lines(reader: EventReader[Message], *, full: bool, strict: bool) -> Iterator[dict[str, Any]]:
    for record in reader.records():
        event = record.event
        line: dict[str, Any] = {"file": str(reader.path), "offset": record.offset}
        if isinstance(event, summary_pb2.Event):
            where = f"{str(reader.path)!r} at byte {record.offset}"
            line.update(_summary_line(event, full=full, strict=strict, where=where))
        elif isinstance(event, lineage_pb2.LineageEvent):
            where = f"{str(reader.path)!r} at byte {record.offset}"
            line.update(_lineage_line(event, strict=strict, where=where))
        elif isinstance(event, tensorboard_pb2.Event):
            line.update(_tensorboard_line(event))
        yield _jsonable(line)


def _summary_line(
    event: summary_pb2.Event, *, full: bool, strict: bool, where: str
) -> dict[str, Any]:
    what = event.WhichOneof("what")
    line: dict[str, Any] = {
        "kind": FileKind.SUMMARY.value,
        "wall_time": event.wall_time,
        "step": event.step if event.HasField("step") else None,
        "what": what,
    }
    if what == "summary":
        # Value by value, so that one undecodable tensor does not hide the rest.
        line["values"] = [
            _value(value, full=full, strict=strict, where=where) for value in event.summary.value
        ]
        return line
    decoded = decode_event(event)
    if decoded.version is not None:
        line["version"] = decoded.version
    if decoded.graph is not None:
        line["graph"] = _graph(decoded.graph, full=full)
    return line


def _lineage_line(event: lineage_pb2.LineageEvent, *, strict: bool, where: str) -> dict[str, Any]:
    try:
        decoded = decode_lineage_event(event)
    except WriterValueError as exc:  # text that is not UTF-8: a damaged record
        message = f"{where}: lineage record cannot be decoded: {exc}"
        if strict:
            raise _UndecodableValueError(message, "record") from exc
        print(f"{PROGRAM}: WARNING: {message}", file=sys.stderr)
        return {
            "kind": FileKind.LINEAGE.value,
            "wall_time": event.wall_time,
            "step": event.step if event.HasField("step") else None,
            "what": event.WhichOneof("what"),
            "error": str(exc),
        }
    line: dict[str, Any] = {
        "kind": FileKind.LINEAGE.value,
        "wall_time": decoded.wall_time,
        "step": decoded.step,
        "what": decoded.what,
    }
    if decoded.what == "version":
        line["version"] = decoded.data["version"]
    elif decoded.what is not None:
        line[decoded.what] = decoded.data
    return line


def _tensorboard_line(event: tensorboard_pb2.Event) -> dict[str, Any]:
    what = event.WhichOneof("what")
    line: dict[str, Any] = {
        "kind": FileKind.TENSORBOARD.value,
        "wall_time": event.wall_time,
        "step": event.step,
        "what": what,
    }
    if what == "summary":
        line["values"] = [message_to_dict(value) for value in event.summary.value]
    elif what is not None:
        line[what] = getattr(event, what)
    return line


def _graph(graph: Graph, *, full: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "name": graph.name,
        "node_count": len(graph.nodes),
        "parameter_count": len(graph.parameters),
    }
    if full:
        summary["nodes"] = [node._asdict() for node in graph.nodes]
        summary["parameters"] = list(graph.parameters)
    return summary


def _value(
    proto: summary_pb2.Summary.Value, *, full: bool, strict: bool, where: str
) -> dict[str, Any]:
    try:
        value = decode_value(proto)
    except WriterValueError as exc:
        tag = tag_text(proto.tag)
        message = f"{where}: value {tag!r} cannot be decoded: {exc}"
        if strict:
            raise _UndecodableValueError(message) from exc
        print(f"{PROGRAM}: WARNING: {message}", file=sys.stderr)
        return {"tag": tag, "value_field": proto.WhichOneof("value"), "error": str(exc)}
    return {"tag": value.tag, "plugin": value.plugin, "value": _payload(value.value, full=full)}


def _payload(value: object, *, full: bool) -> Any:
    if isinstance(value, Histogram):
        return _histogram(value)
    if isinstance(value, Image):
        return {
            "height": value.height,
            "width": value.width,
            "colorspace": value.colorspace,
            "png_bytes": len(value.png),
            "png_sha256": hashlib.sha256(value.png).hexdigest(),
        }
    if isinstance(value, Landscape):
        return _landscape(value, full=full)
    if value is None or isinstance(value, float):
        return value
    return _array(value, full=full)


def _histogram(histogram: Histogram) -> dict[str, Any]:
    return {
        "count": histogram.count,
        "nan_count": histogram.nan_count,
        "pos_inf_count": histogram.pos_inf_count,
        "neg_inf_count": histogram.neg_inf_count,
        "min": histogram.min,
        "max": histogram.max,
        "sum": histogram.sum,
        "buckets": [[b.left, b.width, b.count] for b in histogram.buckets],
    }


def _landscape(landscape: Landscape, *, full: bool) -> dict[str, Any]:
    def point(value: LandscapePoint | None) -> dict[str, Any] | None:
        if value is None:
            return None
        axes = {"x": value.x, "y": value.y, "z": value.z}
        return {axis: _array(data, full=full) for axis, data in axes.items() if data is not None}

    return {
        "landscape": point(landscape.landscape),
        "loss_path_intervals": list(landscape.loss_path_intervals),
        "loss_path_points": point(landscape.loss_path_points),
        "convergence_point": point(landscape.convergence_point),
        "decomposition": landscape.decomposition,
        "unit": landscape.unit,
        "step_per_epoch": landscape.step_per_epoch,
    }


def _array(value: Any, *, full: bool) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415 - only tensors need NumPy

    array = np.asarray(value)
    summary: dict[str, Any] = {"dtype": str(array.dtype), "shape": list(array.shape)}
    if full or array.size <= LISTED_ELEMENTS:
        summary["values"] = array.tolist()
        return summary
    if array.dtype.kind in "biuf":
        numbers = array.astype(np.float64, copy=False)
        finite = numbers[np.isfinite(numbers)]
        summary["non_finite"] = int(numbers.size - finite.size)
        if finite.size:
            summary["min"] = float(finite.min())
            summary["max"] = float(finite.max())
            summary["mean"] = float(finite.mean())
    summary["head"] = array.reshape(-1)[:8].tolist()
    return summary


def _json_float(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _jsonable(value: Any) -> Any:
    """Make ``value`` strict JSON: non-finite floats as strings, bytes as length and hash."""
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, complex):
        return [_json_float(value.real), _json_float(value.imag)]
    return value


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
