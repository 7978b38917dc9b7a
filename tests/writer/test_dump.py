"""rankscribe-dump: JSON lines for files and directories, and one-line errors."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest

from rankscribe.writer.dump import LISTED_ELEMENTS, main
from rankscribe.writer.files import RECORD_OVERHEAD, RecordReader, frame
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2, tensorboard_pb2
from tests._support.launchers import run_bounded

GOLDEN = Path(__file__).parent.parent / "compat" / "data" / "mindspore-2.10"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())
SUMMARY_NAME = "events.out.events.summary.1795244534.0.vm_MS"


def strict_json(line: str) -> dict:
    """Parse a line, refusing the NaN/Infinity literals that are not JSON."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-JSON constant {constant} in {line!r}")

    return json.loads(line, parse_constant=refuse)


def run(capsys, *argv: str) -> tuple[int, list[dict], str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, [strict_json(line) for line in captured.out.splitlines()], captured.err


def manifest_records() -> dict[tuple[str, int], dict]:
    return {
        (entry["name"], record["offset"]): record
        for info in MANIFEST["dirs"].values()
        for entry in info["files"]
        for record in entry.get("records", [])
    }


def write_events(path: Path, events: list) -> list[int]:
    offsets, position = [], 0
    for event in events:
        offsets.append(position)
        position += event.ByteSize() + RECORD_OVERHEAD
    path.write_bytes(b"".join(frame(e.SerializeToString()) for e in events))
    return offsets


def scalar_event(step: int, value: float) -> summary_pb2.Event:
    event = summary_pb2.Event(wall_time=100.0 + step, step=step)
    event.summary.value.add(tag="loss", scalar_value=value)
    return event


# --------------------------------------------------------------------------
# The golden files
# --------------------------------------------------------------------------


def test_every_golden_record_becomes_one_line_matching_the_manifest(capsys):
    status, lines, err = run(capsys, str(GOLDEN), "--recursive")

    assert status == 0
    assert err == ""
    expected = manifest_records()
    assert len(lines) == len(expected) == 48
    for line in lines:
        record = expected[(Path(line["file"]).name, line["offset"])]
        assert line["kind"] in ("summary", "lineage")
        assert line["what"] == record["what"]
        assert line["wall_time"] == record["wall_time"]
        assert line["step"] == (record["step"] if record["step_present"] else None)
        if record["what"] == "summary":
            assert [v["tag"] for v in line["values"]] == [v["tag"] for v in record["values"]]
            assert [v["plugin"] for v in line["values"]] == [v["plugin"] for v in record["values"]]
        elif record["what"] == "version":
            assert line["version"] == record["version"]
        elif record["what"] == "graph_def":
            assert line["graph"] == {
                "name": record["graph"]["name"],
                "node_count": record["graph"]["node_count"],
                "parameter_count": len(record["graph"]["parameters"]),
            }
        else:
            assert line[record["what"]] == record[record["what"]]


def test_files_come_in_directory_order_and_records_in_file_order(capsys):
    _, lines, _ = run(capsys, str(GOLDEN / "lineage_train_eval"))
    positions = [(Path(line["file"]).name, line["offset"]) for line in lines]
    assert positions == [
        (entry["name"], record["offset"])
        for entry in MANIFEST["dirs"]["lineage_train_eval"]["files"]
        for record in entry["records"]
    ]


def test_scalars_print_the_stored_float32_and_non_finite_values_as_strings(capsys):
    _, lines, _ = run(capsys, str(GOLDEN / "scalars"))
    values = {
        (line["step"], value["tag"], index): value["value"]
        for line in lines
        if line["what"] == "summary"
        for index, value in enumerate(line["values"])
    }
    assert values[(1, "lr", 1)] == 0.10000000149011612
    assert values[(7, "loss", 0)] == "NaN"
    extremes = [value for (_, tag, _), value in sorted(values.items()) if tag == "extremes"]
    assert "Infinity" in extremes
    assert "-Infinity" in extremes
    assert [values[(20, "loss", 0)], values[(20, "loss", 3)]] == [0.0, -0.5]


def test_histograms_images_and_tensors_are_summarised(capsys):
    _, lines, _ = run(capsys, str(GOLDEN / "histogram_image_tensor"))
    step_1 = {v["tag"]: v for v in lines[1]["values"]}
    manifest_step_1 = {
        v["tag"]: v
        for v in MANIFEST["dirs"]["histogram_image_tensor"]["files"][0]["records"][1]["values"]
    }

    only_nan = step_1["hist/only_nan_inf"]["value"]
    assert only_nan == {
        "count": 3,
        "nan_count": 1,
        "pos_inf_count": 1,
        "neg_inf_count": 1,
        "min": None,
        "max": None,
        "sum": None,
        "buckets": [],
    }
    constant = step_1["hist/constant"]["value"]
    assert constant["buckets"] == [
        [b["left"], b["width"], b["count"]]
        for b in manifest_step_1["hist/constant"]["histogram"]["buckets"]
    ]

    image = step_1["img/rgb_u8"]["value"]
    expected_image = manifest_step_1["img/rgb_u8"]["image"]
    assert image == {
        "height": expected_image["height"],
        "width": expected_image["width"],
        "colorspace": 3,
        "png_bytes": expected_image["encoded_image_len"],
        "png_sha256": expected_image["encoded_image_sha256"],
    }

    assert step_1["t/f32"]["value"] == {
        "dtype": "float32",
        "shape": [2, 3],
        "values": [[0.0, -1.5, 3.25], ["NaN", "Infinity", "-Infinity"]],
    }
    assert step_1["t/bool"]["value"]["values"] == [[True, False, True], [False, False, True]]


def test_a_single_file_can_be_dumped(capsys):
    name = MANIFEST["dirs"]["max_file_size"]["files"][1]["name"]
    status, lines, _ = run(capsys, str(GOLDEN / "max_file_size" / name))
    assert status == 0
    assert [line["what"] for line in lines] == ["train_lineage"] + ["user_defined_info"] * 3
    assert lines[0]["train_lineage"]["hyper_parameters"] == {
        "optimizer": "SGD",
        "learning_rate": 0.5,
        "batch_size": 8,
    }
    assert all(line["step"] is None and line["kind"] == "lineage" for line in lines)


def test_full_lists_graph_nodes(capsys):
    _, lines, _ = run(capsys, str(GOLDEN / "lineage_train_eval"), "--full")
    graph = next(line["graph"] for line in lines if line["what"] == "graph_def")
    expected = MANIFEST["dirs"]["lineage_train_eval"]["files"][0]["records"][1]["graph"]
    assert graph["nodes"] == expected["nodes"]
    assert graph["parameters"] == expected["parameters"]


# --------------------------------------------------------------------------
# Files made here
# --------------------------------------------------------------------------


def test_large_tensors_are_summarised_unless_full(tmp_path, capsys):
    count = LISTED_ELEMENTS + 1
    event = summary_pb2.Event(wall_time=1.0, step=1)
    event.summary.value.add(tag="big").tensor.CopyFrom(
        anf_ir_pb2.TensorProto(
            dims=[count],
            data_type=anf_ir_pb2.DT_FLOAT32,
            float_data=[float("nan")] + [float(i) for i in range(1, count)],
        )
    )
    path = tmp_path / SUMMARY_NAME
    write_events(path, [event])

    _, [line], _ = run(capsys, str(path))
    summary = line["values"][0]["value"]
    assert summary == {
        "dtype": "float32",
        "shape": [count],
        "non_finite": 1,
        "min": 1.0,
        "max": float(count - 1),
        "mean": count / 2,
        "head": ["NaN", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    }
    _, [line], _ = run(capsys, str(path), "--full")
    assert line["values"][0]["value"]["values"] == ["NaN"] + [float(i) for i in range(1, count)]


def test_tensorboard_files_are_dumped_too(tmp_path, capsys):
    path = tmp_path / "events.out.tfevents.1795244534.vm.1.0"
    version = tensorboard_pb2.Event(wall_time=1.0, file_version="brain.Event:2")
    scalar = tensorboard_pb2.Event(wall_time=2.0, step=5)
    scalar.summary.value.add(tag="loss", simple_value=0.1)
    write_events(path, [version, scalar])

    status, lines, _ = run(capsys, str(tmp_path))
    assert status == 0
    assert lines[0]["what"] == "file_version"
    assert lines[0]["file_version"] == "brain.Event:2"
    assert lines[1]["kind"] == "tensorboard"
    assert lines[1]["step"] == 5
    assert lines[1]["values"] == [{"tag": "loss", "simple_value": 0.10000000149011612}]


def test_a_torn_tail_is_reported_on_stderr_and_is_not_an_error(tmp_path, capsys):
    path = tmp_path / SUMMARY_NAME
    offsets = write_events(path, [scalar_event(1, 1.0), scalar_event(2, 2.0)])
    path.write_bytes(path.read_bytes()[:-5])

    status, lines, err = run(capsys, str(path))
    assert status == 0
    assert [line["step"] for line in lines] == [1]
    assert f"at byte {offsets[1]}, is incomplete" in err
    assert str(path) in err


def test_damage_is_skipped_with_a_warning_and_fails_with_strict(tmp_path, capsys):
    path = tmp_path / SUMMARY_NAME
    offsets = write_events(path, [scalar_event(1, 1.0), scalar_event(2, 2.0), scalar_event(3, 3.0)])
    damaged = bytearray(path.read_bytes())
    damaged[offsets[1] + 14] ^= 0x10
    path.write_bytes(bytes(damaged))

    status, lines, err = run(capsys, str(path))
    assert status == 0
    assert [line["step"] for line in lines] == [1, 3]
    assert (
        f"corrupt record in {str(path)!r} at byte {offsets[1]}: payload CRC mismatch; skipped"
        in err
    )

    status, lines, err = run(capsys, str(path), "--strict")
    assert status == 1
    assert [line["step"] for line in lines] == [1]
    assert err.splitlines() == [
        f"rankscribe-dump: error: corrupt record in {str(path)!r} at byte {offsets[1]}: "
        "payload CRC mismatch (without --strict the record is skipped)"
    ]


# --------------------------------------------------------------------------
# User mistakes: one line on stderr, no traceback
# --------------------------------------------------------------------------


def test_a_missing_path_is_a_one_line_error(tmp_path, capsys):
    missing = tmp_path / "nope"
    status, lines, err = run(capsys, str(missing))
    assert status == 2
    assert lines == []
    assert err.splitlines() == [
        f"rankscribe-dump: error: no such file or directory: {str(missing)!r}"
    ]


def test_a_directory_without_event_files_is_an_error_with_a_hint(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    status, _, err = run(capsys, str(tmp_path))
    assert status == 2
    assert err.splitlines() == [
        f"rankscribe-dump: error: no summary, lineage or TensorBoard event files in "
        f"{str(tmp_path)!r} (--recursive searches its subdirectories)"
    ]


def test_an_unknown_file_name_needs_kind(tmp_path, capsys):
    path = tmp_path / "copy.bin"
    write_events(path, [scalar_event(1, 1.0)])
    status, _, err = run(capsys, str(path))
    assert status == 2
    assert len(err.splitlines()) == 1
    assert "cannot tell what" in err and "--kind" in err

    status, lines, _ = run(capsys, str(path), "--kind", "summary")
    assert status == 0
    assert lines[0]["values"] == [{"tag": "loss", "plugin": "scalar", "value": 1.0}]


def test_kind_is_refused_for_a_directory(tmp_path, capsys):
    status, _, err = run(capsys, str(tmp_path), "--kind", "summary")
    assert status == 2
    assert err.splitlines() == [
        "rankscribe-dump: error: --kind applies to a single file, not to a directory"
    ]


def test_a_bad_option_returns_the_usage_status(capsys):
    assert main(["--no-such-option", "x"]) == 2
    assert "usage: rankscribe-dump" in capsys.readouterr().err


def test_an_unreadable_file_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    path = tmp_path / SUMMARY_NAME
    write_events(path, [scalar_event(1, 1.0)])

    def refuse(self):
        # What open() raises for a mode-0 file; simulated because CI may run as root.
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(RecordReader, "__iter__", refuse)
    status, lines, err = run(capsys, str(path))
    assert status == 1
    assert lines == []
    assert err.splitlines() == [f"rankscribe-dump: error: Permission denied: {str(path)!r}"]


def test_the_module_runs_as_a_program_without_a_traceback(tmp_path):
    result = run_bounded(
        [sys.executable, "-m", "rankscribe.writer.dump", str(tmp_path / "missing")],
        timeout=60,
        check=False,
        stderr_apart=True,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("rankscribe-dump: error: no such file or directory")


def test_an_undecodable_value_is_shown_with_its_error_and_fails_with_strict(tmp_path, capsys):
    event = scalar_event(1, 1.0)
    # Six values for dims [2, 2]: the tensor codec refuses it; the scalar beside it still shows.
    event.summary.value.add(tag="bad").tensor.CopyFrom(
        anf_ir_pb2.TensorProto(dims=[2, 2], data_type=anf_ir_pb2.DT_FLOAT32, float_data=[1.0] * 6)
    )
    path = tmp_path / SUMMARY_NAME
    write_events(path, [event])

    status, [line], err = run(capsys, str(path))
    assert status == 0
    loss, bad = line["values"]
    assert loss == {"tag": "loss", "plugin": "scalar", "value": 1.0}
    assert bad["tag"] == "bad"
    assert bad["value_field"] == "tensor"
    assert "float_data holds 6 values" in bad["error"]
    assert err.startswith(f"rankscribe-dump: WARNING: {str(path)!r} at byte 0: value 'bad' cannot")

    status, lines, err = run(capsys, str(path), "--strict")
    assert status == 1
    assert lines == []
    [message] = err.splitlines()
    assert message.startswith(f"rankscribe-dump: error: {str(path)!r} at byte 0: value 'bad'")
    assert message.endswith("(without --strict the value is shown with its error)")


@pytest.mark.parametrize("where", ["map key", "map value", "version"])
def test_lineage_text_that_is_not_utf8_is_reported_and_fails_with_strict(tmp_path, capsys, where):
    event = lineage_pb2.LineageEvent(wall_time=1.0, step=3)
    if where == "map key":
        event.user_defined_info.user_info.add().map_str["@@@@"] = "v"
    elif where == "map value":
        event.user_defined_info.user_info.add().map_str["k"] = "@@@@"
    else:
        event.version = "@@@@"
    good = lineage_pb2.LineageEvent(wall_time=2.0)
    good.user_defined_info.map_int32["seed"] = 7
    path = tmp_path / "events.out.events.summary.1795244534.0.vm_lineage"
    payload = event.SerializeToString().replace(b"@@@@", b"\xff\xfe\xfd\xfc")
    path.write_bytes(frame(payload) + frame(good.SerializeToString()))
    offset = len(payload) + RECORD_OVERHEAD

    status, lines, err = run(capsys, str(path))
    assert status == 0
    assert "Traceback" not in err
    damaged, after = lines
    what = "version" if where == "version" else "user_defined_info"
    assert damaged == {
        "file": str(path),
        "offset": 0,
        "kind": "lineage",
        "wall_time": 1.0,
        "step": 3,
        "what": what,
        "error": damaged["error"],
    }
    assert "not UTF-8" in damaged["error"]
    assert after["offset"] == offset
    assert after["user_defined_info"] == {"map_int32": {"seed": 7}}
    [warning] = err.splitlines()
    assert warning.startswith(
        f"rankscribe-dump: WARNING: {str(path)!r} at byte 0: lineage record cannot be decoded: "
    )

    status, lines, err = run(capsys, str(path), "--strict")
    assert status == 1
    assert lines == []
    [message] = err.splitlines()
    assert message.startswith(f"rankscribe-dump: error: {str(path)!r} at byte 0: lineage record")
    assert message.endswith("(without --strict the record is shown with its error)")


def test_the_program_exits_1_without_a_traceback_on_such_lineage(tmp_path):
    event = lineage_pb2.LineageEvent(wall_time=1.0)
    event.user_defined_info.user_info.add().map_str["@@@@"] = "v"
    path = tmp_path / "events.out.events.summary.1795244534.0.vm_lineage"
    path.write_bytes(frame(event.SerializeToString().replace(b"@@@@", b"\xff\xfe\xfd\xfc")))
    result = run_bounded(
        [sys.executable, "-m", "rankscribe.writer.dump", str(path), "--strict"],
        timeout=60,
        check=False,
        stderr_apart=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_summary_tag_that_is_not_utf8_is_printed_escaped(tmp_path, capsys):
    event = summary_pb2.Event(wall_time=1.0, step=1)
    event.summary.value.add(tag="@@", scalar_value=0.5)
    path = tmp_path / SUMMARY_NAME
    path.write_bytes(frame(event.SerializeToString().replace(b"@@", b"a\xff")))
    status, [line], _ = run(capsys, str(path))
    assert status == 0
    assert line["values"] == [{"tag": "a\\xff", "plugin": "scalar", "value": 0.5}]
