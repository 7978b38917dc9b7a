"""Golden files written by MindSpore 2.10: our encoders replayed on the same inputs.

The ``histogram_image_tensor`` case of MANIFEST.json lists every array the generator passed
to ``add_value``; each is written again by a SummaryRecord, read back from its file, and
compared with what MindSpore wrote, both with the manifest's decoded values and with the
message bytes in the golden file itself (PNGs decoded by Pillow, tensors by the reader).
Where our rules intentionally differ (integer histogram edges, uint8 images, raw_data for
int64), the test asserts the exact difference.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import read_events
from rankscribe.writer.files import RecordReader
from rankscribe.writer.pb import summary_pb2
from rankscribe.writer.reader import decode_value

GOLDEN = Path(__file__).parent / "data" / "mindspore-2.10"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())
CASE_NAME = "histogram_image_tensor"
CASE = MANIFEST["dirs"][CASE_NAME]
SUMMARY_FILE = next(entry for entry in CASE["files"] if entry["kind"] == "summary")
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def number(value: Any) -> Any:
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


def golden_array(spec: dict[str, Any]) -> np.ndarray:
    """The input array, checked against the sha256 of its bytes in the manifest."""
    flat = [number(value) for value in np.array(spec["values"], dtype=object).reshape(-1)]
    array = np.array(flat, dtype=spec["dtype"]).reshape(spec["shape"])
    assert hashlib.sha256(array.tobytes()).hexdigest() == spec["sha256_of_bytes"]
    return array


def as_float32_bits(values: list[Any]) -> bytes:
    return np.array([number(value) for value in values], np.float32).tobytes()


# (step, plugin, tag) -> input spec, manifest value, and the value message in the file.
CALLS = [
    (call["record_step"], add["plugin"], add["tag"], add["input"])
    for call in CASE["inputs"]["calls"]
    for add in call["add_value_calls"]
]
MANIFEST_VALUES = {
    (record["step"], value["tag"]): value
    for record in SUMMARY_FILE["records"]
    if record["what"] == "summary"
    for value in record["values"]
}


def _file_values() -> dict[tuple[int, str], summary_pb2.Summary.Value]:
    found = {}
    for record in RecordReader(GOLDEN / CASE_NAME / SUMMARY_FILE["name"]):
        event = summary_pb2.Event.FromString(record.payload)
        if event.WhichOneof("what") == "summary":
            for value in event.summary.value:
                found[(event.step, value.tag)] = value
    return found


FILE_VALUES = _file_values()


def written(folder: Path, plugin: str, array: np.ndarray) -> summary_pb2.Summary.Value:
    """The value a SummaryRecord writes for ``add_value(plugin, ..., array)``, read back."""
    directory = Path(tempfile.mkdtemp(dir=folder))
    with SummaryRecord(directory) as record:
        record.add_value(plugin, "value", array)
        record.record(1)
    [summary] = directory.glob("*_MS")
    [value] = [
        value
        for event in read_events(summary, strict=True)
        if event.WhichOneof("what") == "summary"
        for value in event.summary.value
    ]
    return value


def decode_png(data: bytes) -> np.ndarray:
    """Height x width x channels, as any PNG reader decodes it."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image)


def decode_tensor(value: summary_pb2.Summary.Value) -> np.ndarray:
    decoded = decode_value(value).value
    assert isinstance(decoded, np.ndarray)
    return decoded


def calls_of(plugin: str, *, having_values: bool = True) -> list[Any]:
    selected = [
        pytest.param(step, spec, id=f"step{step}-{tag}")
        for step, call_plugin, tag, spec in CALLS
        if call_plugin == plugin and ("values" in spec) == having_values
    ]
    assert selected
    return selected


def tag_of(spec: dict[str, Any]) -> str:
    return next(tag for _, _, tag, other in CALLS if other is spec)


def test_the_case_holds_what_the_readme_describes():
    plugins = [plugin for _, plugin, _, _ in CALLS]
    counts = (plugins.count("image"), plugins.count("histogram"), plugins.count("tensor"))
    assert counts == (5, 6, 5)
    assert len(MANIFEST_VALUES) == len(FILE_VALUES) == len(CALLS)


# --- histograms -------------------------------------------------------------------------


def manifest_histogram(proto: summary_pb2.Summary.Histogram) -> dict[str, Any]:
    """Our message in the manifest's terms."""
    return {
        "fields_set": [field.name for field, _ in proto.ListFields()],
        "buckets": [{"left": b.left, "width": b.width, "count": b.count} for b in proto.buckets],
        "bucket_count": len(proto.buckets),
        "nan_count": proto.nan_count,
        "pos_inf_count": proto.pos_inf_count,
        "neg_inf_count": proto.neg_inf_count,
        "max": proto.max,
        "min": proto.min,
        "sum": proto.sum,
        "count": proto.count,
    }


FLOAT_HISTOGRAMS = [
    param for param in calls_of("histogram") if param.values[1]["dtype"].startswith("float")
]


@pytest.mark.parametrize(("step", "spec"), FLOAT_HISTOGRAMS)
def test_float_histograms_equal_mindspores_field_by_field_and_byte_by_byte(tmp_path, step, spec):
    ours = written(tmp_path, "histogram", golden_array(spec)).histogram
    tag = tag_of(spec)
    assert manifest_histogram(ours) == MANIFEST_VALUES[(step, tag)]["histogram"]
    assert ours.SerializeToString() == FILE_VALUES[(step, tag)].histogram.SerializeToString()


def test_int32_histogram_differs_only_by_the_integer_edge_fix(tmp_path):
    ((step, spec),) = [p.values for p in calls_of("histogram") if p.values[1]["dtype"] == "int32"]
    values = golden_array(spec)
    ours = manifest_histogram(written(tmp_path, "histogram", values).histogram)
    theirs = MANIFEST_VALUES[(step, tag_of(spec))]["histogram"]

    # Ours: float64 edges -3, 4.5, 12 split the 16 values -3..12 evenly.
    assert ours["buckets"] == [
        {"left": -3.0, "width": 7.5, "count": 8},
        {"left": 4.5, "width": 7.5, "count": 8},
    ]
    # MindSpore: the same edges truncated to int32 (4.5 -> 4), so 4 moved up a bucket.
    lefts = [bucket["left"] for bucket in ours["buckets"]]
    edges = np.trunc([*lefts, lefts[-1] + ours["buckets"][-1]["width"]])
    counts = np.histogram(values, edges)[0]
    assert theirs["buckets"] == [
        {"left": edges[i], "width": edges[i + 1] - edges[i], "count": int(counts[i])}
        for i in range(2)
    ]
    assert theirs["buckets"] == [
        {"left": -3.0, "width": 7.0, "count": 7},
        {"left": 4.0, "width": 8.0, "count": 9},
    ]
    # Everything else is the same.
    ours.pop("buckets")
    theirs = dict(theirs)
    theirs.pop("buckets")
    assert ours == theirs


def test_the_1000_value_histogram_has_mindspores_90_edges(tmp_path):
    # The manifest gives only the sha256 of this input, not its values. The edges depend
    # on nothing but the number of finite values, min and max, so 1000 values with the
    # recorded min and max must give MindSpore's lefts and widths.
    ((step, spec),) = [p.values for p in calls_of("histogram", having_values=False)]
    theirs = MANIFEST_VALUES[(step, tag_of(spec))]["histogram"]
    assert (theirs["count"], theirs["bucket_count"]) == (1000, 90)
    stand_in = np.zeros(1000, np.float32)
    stand_in[0], stand_in[1] = theirs["min"], theirs["max"]
    ours = manifest_histogram(written(tmp_path, "histogram", stand_in).histogram)
    assert [(b["left"], b["width"]) for b in ours["buckets"]] == [
        (b["left"], b["width"]) for b in theirs["buckets"]
    ]
    assert sum(b["count"] for b in theirs["buckets"]) == 1000


# --- images -----------------------------------------------------------------------------


def contrast_stretched(images: np.ndarray) -> np.ndarray:
    """MindSpore 2.10 on uint8: a float64 canvas, then (x - min) * 255 / (max - min + 1)."""
    n, _, h, w = images.shape
    canvas = np.zeros((h, w * n, 3))
    for i in range(n):
        canvas[:, i * w : (i + 1) * w] = images[i].transpose(1, 2, 0)
    low, high = canvas.min(), canvas.max()
    return ((canvas - low) * 255 / (high - low + 1)).astype(np.uint8)


FLOAT_IMAGES = [p for p in calls_of("image") if p.values[1]["dtype"].startswith("float")]


@pytest.mark.parametrize(("step", "spec"), FLOAT_IMAGES)
def test_float_images_decode_to_mindspores_pixels(tmp_path, step, spec):
    ours = written(tmp_path, "image", golden_array(spec)).image
    theirs = MANIFEST_VALUES[(step, tag_of(spec))]["image"]
    assert (ours.height, ours.width, ours.colorspace) == (
        theirs["height"],
        theirs["width"],
        theirs["colorspace"],
    )
    pixels = decode_png(ours.encoded_image)
    decoded = theirs["decoded"]
    assert list(pixels.shape) == decoded["array_shape"]
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == decoded["pixels_sha256"]
    assert pixels.tolist() == decoded["pixels_hwc"]
    # The PNG in MindSpore's file decodes to the same pixels as ours.
    assert np.array_equal(decode_png(FILE_VALUES[(step, tag_of(spec))].image.encoded_image), pixels)


def test_uint8_image_is_kept_as_is_where_mindspore_contrast_stretched_it(tmp_path):
    ((step, spec),) = [p.values for p in calls_of("image") if p.values[1]["dtype"] == "uint8"]
    images = golden_array(spec)
    ours = written(tmp_path, "image", images).image
    theirs = MANIFEST_VALUES[(step, tag_of(spec))]["image"]
    assert (ours.height, ours.width, ours.colorspace) == (3, 6, 3)
    assert (theirs["height"], theirs["width"], theirs["colorspace"]) == (3, 6, 3)

    as_is = np.concatenate([image.transpose(1, 2, 0) for image in images], axis=1)
    assert np.array_equal(decode_png(ours.encoded_image), as_is)
    their_pixels = np.array(theirs["decoded"]["pixels_hwc"], np.uint8)
    assert np.array_equal(their_pixels, contrast_stretched(images))
    assert not np.array_equal(their_pixels, as_is)


# --- tensors ----------------------------------------------------------------------------


EXPORTS = {
    entry["name"].rsplit("/", 1)[-1]: entry["array"]
    for entry in CASE["files"]
    if entry["kind"] == "npy_export"
}


@pytest.mark.parametrize(("step", "spec"), calls_of("tensor"))
def test_tensor_float_data_equals_mindspores(tmp_path, step, spec):
    values = golden_array(spec)
    ours = written(tmp_path, "tensor", values).tensor
    tag = tag_of(spec)
    theirs = MANIFEST_VALUES[(step, tag)]["tensor"]
    assert list(ours.dims) == theirs["dims"]
    assert ours.data_type == theirs["data_type"]
    assert np.array(ours.float_data, np.float32).tobytes() == as_float32_bits(theirs["float_data"])

    fields = [field.name for field, _ in ours.ListFields()]
    their_message = FILE_VALUES[(step, tag)].tensor
    if values.dtype == np.int64:
        # The one intentional difference: raw_data, so that int64 reads back exactly.
        assert fields == [*theirs["fields_set"], "raw_data"]
        ours.ClearField("raw_data")
    else:
        assert fields == theirs["fields_set"]
    assert ours.SerializeToString() == their_message.SerializeToString()


@pytest.mark.parametrize(("step", "spec"), calls_of("tensor"))
def test_our_tensor_reads_back_what_mindspore_exported_to_npy(tmp_path, step, spec):
    exported = EXPORTS[f"{tag_of(spec).replace('/', '%2F')}_{step}.npy"]
    decoded = decode_tensor(written(tmp_path, "tensor", golden_array(spec)))
    assert str(decoded.dtype) == exported["dtype"]
    assert hashlib.sha256(decoded.tobytes()).hexdigest() == exported["sha256_of_bytes"]


def test_mindsporess_int64_tensor_decodes_to_the_float32_values_it_holds():
    decoded = decode_tensor(FILE_VALUES[(1, "t/i64")])
    assert decoded.dtype == np.dtype(np.int64)
    assert decoded.tolist() == [0, -7, 2**40, 2**53]  # inputs were 2**40 + 1 and 2**53 + 1


@pytest.mark.parametrize("tag", ["t/f32", "t/f16", "t/bool"])
def test_mindsporess_other_tensors_decode_exactly(tag):
    decoded = decode_tensor(FILE_VALUES[(1, tag)])
    exported = EXPORTS[f"{tag.replace('/', '%2F')}_1.npy"]
    assert str(decoded.dtype) == exported["dtype"]
    assert hashlib.sha256(decoded.tobytes()).hexdigest() == exported["sha256_of_bytes"]


# --- the whole path: SummaryRecord replays every call -----------------------------------


def replay(case: str, directory: Path, **options: Any) -> list[summary_pb2.Event]:
    """Feed a case's add_value/record calls to SummaryRecord; its summary events, in order."""
    with SummaryRecord(directory, **options) as record:
        for call in MANIFEST["dirs"][case]["inputs"]["calls"]:
            for add in call["add_value_calls"]:
                if "values" in add["input"]:  # hist/large_1000 is given by its hash only
                    record.add_value(add["plugin"], add["tag"], golden_array(add["input"]))
            record.record(call["record_step"])
    [summary] = directory.glob("*_MS")
    events = [summary_pb2.Event.FromString(record.payload) for record in RecordReader(summary)]
    assert events[0].version == "MindSpore.Event:1"
    return [event for event in events[1:] if event.WhichOneof("what") == "summary"]


def last_value_per_tag(values: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What MindInsight shows of one step: the last value of each tag, in first-seen order."""
    shown: dict[str, dict[str, Any]] = {}
    for value in values:
        shown[value["tag"]] = value
    return shown


def test_replayed_scalars_read_as_mindinsight_reads_mindspores_file(tmp_path: Path) -> None:
    events = replay("scalars", tmp_path)
    golden = [
        record
        for record in MANIFEST["dirs"]["scalars"]["files"][0]["records"]
        if record["what"] == "summary"
    ]
    assert [event.step for event in events] == [record["step"] for record in golden]
    for event, record in zip(events, golden, strict=True):
        ours = [
            (value.tag, struct.pack(">f", value.scalar_value).hex())
            for value in event.summary.value
        ]
        # MindSpore wrote a tag added twice in one step twice and MindInsight shows the
        # last; we write only that last value, where the tag first appeared.
        theirs = [
            (tag, value["scalar_value_f32_hex"])
            for tag, value in last_value_per_tag(record["values"]).items()
        ]
        assert ours == theirs


def test_replayed_histograms_tensors_images_and_exports_match_mindspores(
    tmp_path: Path,
) -> None:
    events = replay(CASE_NAME, tmp_path, export_options={"tensor_format": "npy"})
    golden = [record for record in SUMMARY_FILE["records"] if record["what"] == "summary"]
    assert [event.step for event in events] == [record["step"] for record in golden]
    for event, record in zip(events, golden, strict=True):
        # Values grouped by plugin in first-seen order, then in add order, as MindSpore.
        assert [value.tag for value in event.summary.value] == [
            value["tag"] for value in record["values"] if value["tag"] != "hist/large_1000"
        ]
        for value in event.summary.value:
            theirs = FILE_VALUES[(event.step, value.tag)]
            kind = value.WhichOneof("value")
            if kind == "histogram" and value.tag != "hist/int32":  # int32: the edge fix
                assert value.histogram.SerializeToString() == (theirs.histogram.SerializeToString())
            elif kind == "tensor":
                assert (
                    np.array(value.tensor.float_data, np.float32).tobytes()
                    == np.array(theirs.tensor.float_data, np.float32).tobytes()
                )  # NaN included
                assert list(value.tensor.dims) == list(theirs.tensor.dims)
            elif kind == "image" and value.tag != "img/rgb_u8":  # uint8: kept as is
                assert (
                    hashlib.sha256(decode_png(value.image.encoded_image).tobytes()).hexdigest()
                    == MANIFEST_VALUES[(event.step, value.tag)]["image"]["decoded"]["pixels_sha256"]
                )
    [folder] = tmp_path.glob("export_*/tensor")
    exported = {path.name: np.load(path) for path in folder.iterdir()}
    assert sorted(exported) == sorted(EXPORTS)  # the same names: <quoted tag>_<step>.npy
    for name, array in exported.items():
        assert str(array.dtype) == EXPORTS[name]["dtype"]
        assert hashlib.sha256(array.tobytes()).hexdigest() == EXPORTS[name]["sha256_of_bytes"]
