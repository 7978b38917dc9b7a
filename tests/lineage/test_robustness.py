"""Damaged lineage files are skipped with a warning naming them; other runs still answer."""

from __future__ import annotations

import builtins
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage, get_summary_lineage
from rankscribe.writer.files import frame


@pytest.fixture
def base(tmp_path: Path, lw: Any) -> Path:
    lw.write(tmp_path / "good1", [lw.train(network="Good1", loss=0.5)], mtime=300)
    lw.write(tmp_path / "good2", [lw.train(network="Good2"), lw.eval({"acc": 1.0})], mtime=200)
    return tmp_path


def networks(base: Path, **kwargs: Any) -> list[str]:
    result = filter_summary_lineage(str(base), **kwargs)
    return [item["model_lineage"]["network"] for item in result["object"]]


def damaged(base: Path, lw: Any, name: str, data: bytes) -> Path:
    path = lw.write(base / name, [], mtime=100)
    path.write_bytes(data)
    os.utime(path, (100, 100))
    return path


def good_bytes(lw: Any) -> bytes:
    return b"".join(
        frame(event.SerializeToString())
        for event in (lw.train(network="Bad", loss=1.0), lw.eval({"acc": 0.1}))
    )


def warnings_about(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and str(path) in record.getMessage()
    ]


@pytest.mark.parametrize("use_index", [False, True])
@pytest.mark.parametrize(
    ("kind", "make", "expected_words"),
    [
        ("empty", lambda data: b"", "empty"),
        (
            "payload crc flipped",
            lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:],
            "payload CRC",
        ),
        (
            "length crc flipped",
            lambda data: data[:9] + bytes([data[9] ^ 1]) + data[10:],
            "length CRC",
        ),
        ("garbage", lambda data: b"\x07" * 40, "CRC"),
        ("cut inside the first record", lambda data: data[:30], "incomplete record"),
        ("framed, but not a LineageEvent", lambda data: frame(b"\xff\xff\xff"), "LineageEvent"),
        ("header only", lambda data: data[:5], "incomplete record"),
    ],
)
def test_damaged_file_is_skipped_with_a_warning(
    base: Path,
    lw: Any,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    make: Any,
    expected_words: str,
    use_index: bool,
) -> None:
    path = damaged(base, lw, "bad", make(good_bytes(lw)))
    for _ in range(2):  # the second query may come from the index: it warns again
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert networks(base, use_index=use_index) == ["Good1", "Good2"]
        messages = warnings_about(caplog, path)
        assert messages, kind
        assert expected_words in messages[0]


def test_truncated_file_keeps_its_complete_records(
    base: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    data = good_bytes(lw)
    path = damaged(base, lw, "crashed", data[:-7])  # the eval record lost its tail
    with caplog.at_level(logging.WARNING):
        assert networks(base) == ["Good1", "Good2", "Bad"]
    (message,) = warnings_about(caplog, path)
    assert "incomplete record" in message and "1 complete records" in message
    assert get_summary_lineage(str(path.parent))["metric"] == {}


def test_unreadable_file(
    base: Path, lw: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = damaged(base, lw, "locked", good_bytes(lw))
    real_open = open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(file) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(file, *args, **kwargs)

    real_os_open = os.open

    def guarded_os_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(file) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_os_open(file, *args, **kwargs)

    # Every open goes through builtins or os.open (the parser reads small files with
    # bare descriptors), whichever module of the writer or the lineage reads the file.
    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    with caplog.at_level(logging.WARNING):
        assert networks(base) == ["Good1", "Good2"]
    assert "Permission denied" in warnings_about(caplog, path)[0]
    # not cached as bad: once readable it is read
    monkeypatch.undo()
    assert networks(base) == ["Good1", "Good2", "Bad"]


def test_metric_that_is_not_json(base: Path, lw: Any, caplog: pytest.LogCaptureFixture) -> None:
    from rankscribe.writer.pb import lineage_pb2

    event = lineage_pb2.LineageEvent(wall_time=1.0)
    event.evaluation_lineage.metric = "{not json"
    path = lw.write(base / "badmetric", [event], mtime=50)
    with caplog.at_level(logging.WARNING):
        assert networks(base) == ["Good1", "Good2"]
    assert "not JSON" in warnings_about(caplog, path)[0]


def test_a_metric_nested_past_the_bound_is_skipped_like_one_that_is_not_json(
    base: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # json.loads raised RecursionError out of every query over the base dir.
    from rankscribe.writer.pb import lineage_pb2

    event = lineage_pb2.LineageEvent(wall_time=1.0)
    event.evaluation_lineage.metric = "[" * 100_000 + "]" * 100_000
    path = lw.write(base / "nestedmetric", [event], mtime=50)
    with caplog.at_level(logging.WARNING):
        assert networks(base) == ["Good1", "Good2"]
    assert "nested deeper than 64 levels" in warnings_about(caplog, path)[0]


def test_one_bad_file_does_not_hide_the_others_of_its_run(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    lw.write(tmp_path, [lw.train(network="N")], timestamp=10)
    bad = lw.write(tmp_path, [lw.eval({"acc": 1.0})], timestamp=20)
    bad.write_bytes(b"\x00" * 30)
    with caplog.at_level(logging.WARNING):
        result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {"network": "N"}
    assert warnings_about(caplog, bad)


def test_nothing_parseable(tmp_path: Path, lw: Any) -> None:
    damaged(tmp_path, lw, "bad", b"garbage garbage garbage")
    assert filter_summary_lineage(str(tmp_path)) == {"customized": {}, "object": [], "count": 0}
    assert get_summary_lineage(str(tmp_path / "bad")) == {}


def test_file_removed_between_listing_and_reading(
    base: Path, lw: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = lw.write(base / "vanishing", [lw.train(network="Gone")], mtime=10)
    real_open = os.open

    def removed_when_opened(file: Any, *args: Any, **options: Any) -> int:
        # The scan listed the file; it is gone by the time the scan opens it to read.
        if os.fspath(file) == str(path):
            path.unlink()
        return real_open(file, *args, **options)

    monkeypatch.setattr(os, "open", removed_when_opened)
    with caplog.at_level(logging.WARNING):
        assert networks(base) == ["Good1", "Good2"]
    assert warnings_about(caplog, path)


PLACEHOLDER = "@@@@"
NOT_UTF8 = b"\xff\xfe\xfd\xfc"  # as long as the placeholder, so protobuf's lengths still hold


def _not_utf8(event: Any) -> bytes:
    """``event`` framed, with its placeholder text replaced by bytes that are not UTF-8."""
    payload = event.SerializeToString()
    assert PLACEHOLDER.encode() in payload
    return frame(payload.replace(PLACEHOLDER.encode(), NOT_UTF8))


def _huge_length(length: int) -> bytes:
    import struct

    # A record header claiming ``length`` bytes, its CRC right: a framed record ends with
    # its payload's masked CRC-32C, so framing the 8 length bytes gives theirs.
    length_bytes = struct.pack("<Q", length)
    return length_bytes + frame(length_bytes)[-4:] + b"\0" * 16


HOSTILE_FILES = [
    ("optional string", lambda lw: _not_utf8(lw.train(network=PLACEHOLDER)), "not UTF-8"),
    ("metric", lambda lw: _not_utf8(lw.eval({PLACEHOLDER: 1.0})), "not UTF-8"),
    ("map_str key", lambda lw: _not_utf8(lw.custom({PLACEHOLDER: "v"})), "not UTF-8"),
    ("map_str value", lambda lw: _not_utf8(lw.custom({"k": PLACEHOLDER})), "not UTF-8"),
    (
        "mapStr key",
        lambda lw: _not_utf8(lw.graph({"op_type": "Batch", PLACEHOLDER: "x"})),
        "not UTF-8",
    ),
    (
        "mapStr value",
        lambda lw: _not_utf8(lw.graph({"op_type": "Batch", "mode": PLACEHOLDER})),
        "not UTF-8",
    ),
    ("length 2^31", lambda lw: _huge_length(2**31), "length field"),
    ("length 2^40", lambda lw: _huge_length(2**40), "length field"),
    ("length 2^64-1", lambda lw: _huge_length(2**64 - 1), "length field"),
]


@pytest.mark.parametrize("use_index", [False, True])
@pytest.mark.parametrize(
    ("kind", "make", "expected_words"), HOSTILE_FILES, ids=[case[0] for case in HOSTILE_FILES]
)
def test_a_hostile_file_is_skipped_and_every_good_run_answers(
    base: Path,
    lw: Any,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    make: Any,
    expected_words: str,
    use_index: bool,
) -> None:
    import json

    # The hostile record follows a good train record in the same file.
    path = damaged(
        base, lw, "hostile", frame(lw.train(network="Bad").SerializeToString()) + make(lw)
    )
    for _ in range(2):  # the second query may come from the index
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = filter_summary_lineage(str(base), use_index=use_index)
        assert [item["model_lineage"]["network"] for item in result["object"]] == ["Good1", "Good2"]
        json.dumps(result)  # plain JSON types only
        messages = warnings_about(caplog, path)
        assert len(messages) == 1, messages  # logged once, naming the file
        assert expected_words in messages[0], kind
    assert get_summary_lineage(str(path.parent)) == {}
