"""Golden files written by MindSpore 2.10: the reader's decoded values equal MANIFEST.json.

Every summary and lineage file is decoded with rankscribe.writer.reader and each
record is compared with the manifest field by field. Floats are compared bit for
bit (the manifest holds the exact widened double of float32 fields, and
"NaN"/"Infinity"/"-Infinity" for non-finite values). Each test collects every
mismatch of one file, so a failure lists them all with their location.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.writer.events import (
    EventRecord,
    Graph,
    Histogram,
    Image,
    decode_event,
    decode_lineage_event,
    open_events,
)
from rankscribe.writer.files import FileKind, parse_file_name
from rankscribe.writer.reader import list_summary_files, scalars

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "mindspore-2.10"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())
MINDINSIGHT_VIEW = json.loads((DATA / "mindinsight-2.3.1-view.json").read_text())

EVENT_FILES = [
    (case, entry)
    for case, info in MANIFEST["dirs"].items()
    for entry in info["files"]
    if entry["kind"] in ("summary", "lineage")
]
NPY_FILES = [
    (case, entry)
    for case, info in MANIFEST["dirs"].items()
    for entry in info["files"]
    if entry["kind"] == "npy_export"
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The numpy dtype our tensor decoder must return for each DataType number
# MindSpore writes (docs/file-format.md).
NUMPY_DTYPE_OF_DATA_TYPE = {
    1: np.bool_,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.uint8,
    7: np.uint16,
    8: np.uint32,
    9: np.uint64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
}


# --------------------------------------------------------------------------
# Manifest encoding helpers
# --------------------------------------------------------------------------


def manifest_float(value: float | str) -> float:
    """A float as the manifest encodes it: non-finite values are strings."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[value]
    return float(value)


def manifest_encoding(value: Any) -> Any:
    """Encode our decoded value the way the manifest does (non-finite floats as strings)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {key: manifest_encoding(item) for key, item in value.items()}
    if isinstance(value, list):
        return [manifest_encoding(item) for item in value]
    return value


def float_bits(value: float) -> bytes:
    """The exact bits of a double, so that -0.0 != 0.0 and NaN == NaN."""
    if math.isnan(value):
        return b"nan"  # NaN payloads are compared through the float32 hex where it matters
    return struct.pack(">d", value)


def f32_hex(value: float) -> str:
    return struct.pack(">f", value).hex()


class Diffs:
    """Mismatches found in one file, each with where it was found."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def equal(self, where: str, actual: Any, expected: Any) -> None:
        if actual != expected:
            self.items.append(f"{where}: got {actual!r}, manifest has {expected!r}")

    def same_float(self, where: str, actual: float | None, expected: float | str) -> None:
        want = manifest_float(expected)
        if actual is None or float_bits(float(actual)) != float_bits(want):
            self.items.append(f"{where}: got {actual!r}, manifest has {expected!r}")


# --------------------------------------------------------------------------
# Per-record comparison
# --------------------------------------------------------------------------


def check_record_frame(diffs: Diffs, where: str, record: EventRecord[Any], expected: dict) -> None:
    event = record.event
    diffs.equal(f"{where} offset", record.offset, expected["offset"])
    diffs.equal(f"{where} payload_len", record.payload_length, expected["payload_len"])
    diffs.equal(f"{where} record_len", record.payload_length + 16, expected["record_len"])
    diffs.equal(
        f"{where} wall_time present", event.HasField("wall_time"), expected["wall_time_present"]
    )
    diffs.same_float(f"{where} wall_time", event.wall_time, expected["wall_time"])
    diffs.equal(f"{where} what", event.WhichOneof("what"), expected["what"])
    # The manifest's CRCs were recomputed by hand; a strict read that got this
    # far has verified the same two CRCs.
    assert expected["len_crc_ok"] and expected["payload_crc_ok"]


def check_step(diffs: Diffs, where: str, step: int | None, expected: dict) -> None:
    if expected["step_present"]:
        diffs.equal(f"{where} step", step, expected["step"])
    else:
        diffs.equal(f"{where} step (absent)", step, None)


def check_scalar(diffs: Diffs, where: str, value: Any, expected: dict) -> None:
    diffs.equal(f"{where} type", type(value), float)
    diffs.equal(f"{where} float32 bits", f32_hex(value), expected["scalar_value_f32_hex"])
    diffs.same_float(f"{where} value", value, expected["scalar_value"])


def check_histogram(diffs: Diffs, where: str, value: Any, proto: Any, expected: dict) -> None:
    assert isinstance(value, Histogram), f"{where}: {value!r} is not a Histogram"
    diffs.equal(
        f"{where} fields_set", [f.name for f, _ in proto.ListFields()], expected["fields_set"]
    )
    diffs.equal(f"{where} bucket_count", len(value.buckets), expected["bucket_count"])
    for index, (bucket, want) in enumerate(zip(value.buckets, expected["buckets"], strict=False)):
        diffs.same_float(f"{where} bucket {index} left", bucket.left, want["left"])
        diffs.same_float(f"{where} bucket {index} width", bucket.width, want["width"])
        diffs.equal(f"{where} bucket {index} count", bucket.count, want["count"])
    for name in ("count", "nan_count", "pos_inf_count", "neg_inf_count"):
        diffs.equal(f"{where} {name}", getattr(value, name), expected[name])
    for name in ("min", "max", "sum"):
        actual = getattr(value, name)
        if name in expected["fields_set"]:
            diffs.same_float(f"{where} {name}", actual, expected[name])
        else:
            # Absent on the wire (all values NaN/inf): None, never a made-up 0.0.
            diffs.equal(f"{where} {name} (absent)", actual, None)


def check_image(diffs: Diffs, where: str, value: Any, expected: dict) -> None:
    assert isinstance(value, Image), f"{where}: {value!r} is not an Image"
    diffs.equal(f"{where} height", value.height, expected["height"])
    diffs.equal(f"{where} width", value.width, expected["width"])
    diffs.equal(f"{where} colorspace", value.colorspace, expected["colorspace"])
    diffs.equal(f"{where} encoded_image_len", len(value.png), expected["encoded_image_len"])
    diffs.equal(
        f"{where} encoded_image_sha256",
        hashlib.sha256(value.png).hexdigest(),
        expected["encoded_image_sha256"],
    )
    diffs.equal(
        f"{where} png signature", value.png.startswith(PNG_SIGNATURE), expected["png_signature_ok"]
    )
    decoded = expected["decoded"]
    pixels = value.pixels()
    diffs.equal(f"{where} pixel dtype", pixels.dtype, np.dtype(np.uint8))
    diffs.equal(f"{where} pixel shape", list(pixels.shape), decoded["array_shape"])
    diffs.equal(f"{where} size_wh", [pixels.shape[1], pixels.shape[0]], decoded["size_wh"])
    diffs.equal(f"{where} mode RGB", decoded["mode"], "RGB")
    diffs.equal(
        f"{where} pixels_sha256",
        hashlib.sha256(np.ascontiguousarray(pixels).tobytes()).hexdigest(),
        decoded["pixels_sha256"],
    )
    if "pixels_hwc" in decoded:
        diffs.equal(f"{where} pixels_hwc", pixels.tolist(), decoded["pixels_hwc"])


def check_tensor(diffs: Diffs, where: str, value: Any, proto: Any, expected: dict) -> None:
    assert isinstance(value, np.ndarray), f"{where}: {value!r} is not an array"
    diffs.equal(
        f"{where} fields_set", [f.name for f, _ in proto.ListFields()], expected["fields_set"]
    )
    diffs.equal(f"{where} dims", list(value.shape), expected["dims"])
    diffs.equal(f"{where} wire dims", list(proto.dims), expected["dims"])
    diffs.equal(f"{where} data_type", int(proto.data_type), expected["data_type"])
    diffs.equal(
        f"{where} data_type_name",
        type(proto)
        .DESCRIPTOR.fields_by_name["data_type"]
        .enum_type.values_by_number[proto.data_type]
        .name,
        expected["data_type_name"],
    )
    diffs.equal(
        f"{where} dtype", value.dtype, np.dtype(NUMPY_DTYPE_OF_DATA_TYPE[expected["data_type"]])
    )
    wire = expected["float_data"]
    diffs.equal(f"{where} element count", value.size, len(wire))
    for index, (actual, want) in enumerate(zip(value.reshape(-1).tolist(), wire, strict=False)):
        diffs.same_float(f"{where} element {index}", float(actual), want)
    for index, (actual, want) in enumerate(zip(proto.float_data, wire, strict=False)):
        diffs.same_float(f"{where} float_data[{index}]", actual, want)


def check_graph(diffs: Diffs, where: str, graph: Graph | None, expected: dict) -> None:
    assert graph is not None, f"{where}: no graph decoded"
    diffs.equal(f"{where} name", graph.name, expected["name"])
    diffs.equal(f"{where} node_count", len(graph.nodes), expected["node_count"])
    diffs.equal(f"{where} nodes", [node._asdict() for node in graph.nodes], expected["nodes"])
    diffs.equal(f"{where} parameters", list(graph.parameters), expected["parameters"])
    diffs.equal(f"{where} outputs_count", len(graph.proto.outputs), expected["outputs_count"])
    diffs.equal(
        f"{where} const_vals_count", len(graph.proto.const_vals), expected["const_vals_count"]
    )
    diffs.equal(f"{where} serialized_len", graph.proto.ByteSize(), expected["serialized_len"])


def check_summary_record(
    diffs: Diffs, where: str, record: EventRecord[Any], expected: dict
) -> None:
    decoded = decode_event(record.event)
    check_step(diffs, where, decoded.step, expected)
    diffs.equal(f"{where} decoded what", decoded.what, expected["what"])
    if expected["what"] == "version":
        diffs.equal(f"{where} version", decoded.version, expected["version"])
    elif expected["what"] == "graph_def":
        check_graph(diffs, f"{where} graph", decoded.graph, expected["graph"])
    elif expected["what"] == "summary":
        protos = list(record.event.summary.value)
        diffs.equal(f"{where} value count", len(decoded.values), len(expected["values"]))
        for index, (value, proto, want) in enumerate(
            zip(decoded.values, protos, expected["values"], strict=False)
        ):
            at = f"{where} value {index} ({want['tag']})"
            diffs.equal(f"{at} tag", value.tag, want["tag"])
            diffs.equal(f"{at} plugin", value.plugin, want["plugin"])
            diffs.equal(f"{at} value_field", proto.WhichOneof("value"), want["value_field"])
            if want["plugin"] == "scalar":
                check_scalar(diffs, at, value.value, want)
            elif want["plugin"] == "histogram":
                check_histogram(diffs, at, value.value, proto.histogram, want["histogram"])
            elif want["plugin"] == "image":
                check_image(diffs, at, value.value, want["image"])
            elif want["plugin"] == "tensor":
                check_tensor(diffs, at, value.value, proto.tensor, want["tensor"])
            else:
                diffs.items.append(f"{at}: the manifest has a plugin this test does not know")
    else:
        diffs.items.append(f"{where}: the manifest has a record kind this test does not know")


def check_lineage_record(
    diffs: Diffs, where: str, record: EventRecord[Any], expected: dict
) -> None:
    decoded = decode_lineage_event(record.event)
    check_step(diffs, where, decoded.step, expected)
    diffs.equal(f"{where} decoded what", decoded.what, expected["what"])
    # Our dict keeps float32 fields as the widened double and maps as dicts:
    # exactly the manifest's representation once non-finite floats are encoded.
    diffs.equal(
        f"{where} {expected['what']}", manifest_encoding(decoded.data), expected[expected["what"]]
    )
    if "metric_json_decoded" in expected:
        diffs.equal(
            f"{where} metric (JSON)",
            json.loads(decoded.data["metric"]),
            expected["metric_json_decoded"],
        )


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "entry"), EVENT_FILES, ids=[f"{c}/{e['name']}" for c, e in EVENT_FILES]
)
def test_every_record_decodes_to_the_manifest_values(case, entry):
    reader = open_events(GOLDEN / case / entry["name"], strict=True)
    records = list(reader.records())

    assert reader.torn_tail is None
    assert reader.corruptions == []
    assert len(records) == entry["record_count"] == len(entry["records"])
    assert sum(r.payload_length + 16 for r in records) == entry["size"]
    diffs = Diffs()
    check = check_summary_record if entry["kind"] == "summary" else check_lineage_record
    for record, expected in zip(records, entry["records"], strict=True):
        where = f"record {expected['index']}"
        check_record_frame(diffs, where, record, expected)
        check(diffs, where, record, expected)
    assert diffs.items == []


@pytest.mark.parametrize(
    ("case", "entry"), EVENT_FILES, ids=[f"{c}/{e['name']}" for c, e in EVENT_FILES]
)
def test_file_names_parse_into_the_manifest_parts(case, entry):
    parts = parse_file_name(GOLDEN / case / entry["name"])
    expected = entry["name_parts"]
    assert (parts.prefix, parts.timestamp, parts.rank, parts.host, parts.suffix) == (
        expected["prefix"],
        expected["timestamp"],
        expected["device_id"],
        expected["host"],
        expected["suffix"],
    )
    assert parts.kind is FileKind(entry["kind"])


@pytest.mark.parametrize("case", sorted(MANIFEST["dirs"]))
def test_each_directory_lists_its_event_files_in_timestamp_order(case):
    files = MANIFEST["dirs"][case]["files"]
    expected = sorted(
        (e["name"] for e in files if e["kind"] in ("summary", "lineage")),
        key=lambda name: (parse_file_name(name).timestamp, name),
    )
    # The npy exports live in export_<T>/tensor/, which is not an event file.
    assert [p.name for p in list_summary_files(GOLDEN / case)] == expected


@pytest.mark.parametrize(
    ("case", "entry"), NPY_FILES, ids=[f"{c}/{e['name']}" for c, e in NPY_FILES]
)
def test_npy_exports_hold_the_manifest_arrays(case, entry):
    array = np.load(GOLDEN / case / entry["name"], allow_pickle=False)
    expected = entry["array"]
    assert str(array.dtype) == expected["dtype"]
    assert list(array.shape) == expected["shape"]
    assert manifest_encoding(array.tolist()) == expected["values"]
    assert hashlib.sha256(array.tobytes()).hexdigest() == expected["sha256_of_bytes"]


def test_duplicate_tags_in_one_step_are_both_returned():
    curves = scalars(GOLDEN / "scalars")
    step_20 = [value for step, value in curves["loss"] if step == 20]
    assert step_20 == [0.0, -0.5]  # MindSpore wrote both; MindInsight shows only -0.5


@pytest.mark.parametrize("run", MINDINSIGHT_VIEW["runs"], ids=lambda run: run["relative_path"])
def test_scalars_agree_with_what_mindinsight_showed(run):
    """MindInsight keeps the last value of each (tag, step) and adds "/scalar" to tags."""
    shown: dict[str, dict[int, float]] = {}
    for tag, points in scalars(GOLDEN / run["relative_path"]).items():
        for step, value in points:
            shown.setdefault(f"{tag}/scalar", {})[step] = value
    expected = {
        tag: {point["step"]: manifest_float(point["value"]) for point in points}
        for tag, points in run.get("scalars", {}).items()
    }
    assert {tag: {s: float_bits(v) for s, v in steps.items()} for tag, steps in shown.items()} == {
        tag: {s: float_bits(v) for s, v in steps.items()} for tag, steps in expected.items()
    }
    assert [p.name for p in list_summary_files(GOLDEN / run["relative_path"], "summary")] == run[
        "summary_files"
    ]
    assert [p.name for p in list_summary_files(GOLDEN / run["relative_path"], "lineage")] == run[
        "lineage_files"
    ]
