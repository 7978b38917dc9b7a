"""The index file: a JSON document and .npy columns in one .npz (docs/lineage-queries.md).

What is written reads back as the same document, whatever the values; numpy
opens the file; a file that does not add up, or whose bytes changed, is
ignored with one warning and rebuilt.

The encoding functions are private: imported to pin the column layout, which
has no public door but the file itself.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs, filter_summary_lineage

# private: the index container's codec, the algorithm under test
from rankscribe.lineage.index._index_encoding import decode_document, encode_document
from tests._support.npz_files import read_archive, read_members, write_archive, write_members
from tests.lineage._documented import INDEX_NAME, INDEX_VERSION
from tests.lineage._index_bases import (
    a_metric_per_run,
    assert_index_read_linearly,
    graph_base,
    many_runs,
    read_index,
)
from tests.lineage._index_reads import as_a_new_process, query


def _document() -> dict[str, Any]:
    return {
        "format": "rankscribe-lineage-index",
        "version": INDEX_VERSION,
        "path": ["./a", "./b\udcff", "./c"],  # a name that is not UTF-8 (surrogate-escaped)
        "dir_mtime": [1, 2, 3],
        "final": [True, False, True],
        "create_time": [0, -1, 2**63 - 1],
        "update_time": [5, 2**64, 7],  # beyond 64 bits: stays JSON
        "files": [["x\udcff", 1, 2, 3, 4], ["y", 5, 6, 7, 8], ["z", 9, 10, 11, 12]],
        "graph": ["g", None, "g"],
        "fields": {
            "loss": [0.5, -0.0, float("nan")],
            "network": ["Net", "Net\x00with NUL", "Net"],  # a NUL: stays JSON
            "epoch": [1, None, 3],
        },
        "metric": {"acc": [[0, 2], [0.25, float("inf")]]},
        "user_defined": {"note": [[1], ["ünïcode"]], "flag": [[0, 1], [True, False]]},
        "warnings": {},
        "graphs": {"g": {}},
    }


def _same(first: Any, second: Any) -> bool:
    """Equal, NaN equal to NaN and -0.0 told from 0.0 (what a byte-exact copy keeps)."""
    if isinstance(first, float) and isinstance(second, float):
        return (math.isnan(first) and math.isnan(second)) or (
            first == second and math.copysign(1, first) == math.copysign(1, second)
        )
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(_same, first, second))
    return type(first) is type(second) and first == second


def test_a_document_reads_back_as_written() -> None:
    document = _document()
    data = encode_document(document)
    header, arrays = read_archive(data)
    # Columns of one plain type are .npy arrays; the others stay in the JSON document.
    assert header["path"] == 0 and isinstance(header["update_time"], list)
    assert header["fields"]["network"] == document["fields"]["network"]
    assert [kind for kind, _ in header["columns"]][:3] == ["text", "i64", "bool"]
    assert arrays[1].tolist() == [1, 2, 3] and arrays[2].tolist() == [True, False, True]
    assert "ünïcode".encode() in b"".join(array.tobytes() for array in arrays)
    assert "ünïcode" not in json.dumps(header)  # an array column is not also in the document
    assert _same(decode_document(data), document)
    assert _same(document, _document())  # the document given is left as it was


def test_a_document_with_every_column_in_its_json_is_an_index_too() -> None:
    document = _document()
    document["update_time"] = [5, 6, 7]
    data = encode_document({**document, "path": ["./a", 1, "./c"]})  # mixed: JSON
    assert _same(decode_document(data)["path"], ["./a", 1, "./c"])


def _short_by_one(data: bytes) -> bytes:
    return data[:-1]


def _one_byte_more(data: bytes) -> bytes:
    return data + b"\0"


def _json_document(data: bytes) -> bytes:
    """The same columns, all of them one JSON document (not an archive)."""
    return json.dumps(decode_document(data)).encode()


def _version_4(data: bytes) -> bytes:
    """An archive of the same document, as another layout version."""
    document = decode_document(data)
    document["version"] = 4
    return encode_document(document)


def _a_value_changed(data: bytes) -> bytes:
    """0.2 turned 9.0 in a stored value, as a disk or a hand might."""
    assert data.count(struct.pack("<d", 0.2)) == 1
    return data.replace(struct.pack("<d", 0.2), struct.pack("<d", 9.0))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_short_by_one, "unreadable"),
        (_one_byte_more, "unreadable"),
        (_json_document, "unreadable"),
        (_a_value_changed, "CRC-32"),
        (_version_4, "another version (format rankscribe-lineage-index, version 4"),
    ],
    ids=["short-by-one-byte", "one-byte-more", "json", "a-value-changed", "version-4"],
)
def test_a_damaged_binary_index_is_rebuilt_with_one_warning(
    tmp_path: Path, lw: Any, damage: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    query(base)
    written = (base / INDEX_NAME).read_bytes()
    assert read_archive(written)[0]["columns"]
    (base / INDEX_NAME).write_bytes(damage(written))
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        scan = query(base)
        assert filter_summary_lineage(str(base)) == expected
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and INDEX_NAME in warnings[0] and said in warnings[0], warnings
    assert scan.parsed_runs == 3  # read again from the runs
    as_a_new_process(base)
    assert query(base).reused_runs == 3  # and written again, whole


def test_a_wrong_typed_entry_in_a_binary_index_is_read_again(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    query(base)
    index = read_index(base)
    index["fields"]["network"][index["path"].index("./run1")] = 5
    (base / INDEX_NAME).write_bytes(encode_document(index))  # the other columns stay binary
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        scan = query(base)
    assert (scan.parsed_runs, scan.reused_runs) == (1, 2)
    assert [record.getMessage() for record in caplog.records] == [
        f"lineage index {base / INDEX_NAME}: 1 malformed entry is read again from the runs"
    ]
    assert filter_summary_lineage(str(base)) == expected


def test_repeated_texts_are_stored_once_each() -> None:
    document = {
        "format": "rankscribe-lineage-index",
        "graph": ["g1"] * 7 + ["g2"],
        "fields": {"optimizer": ["Adam", "SGD"] * 4, "network": [f"n{at}" for at in range(8)]},
    }
    data = encode_document(document)
    header, arrays = read_archive(data)
    assert [kind for kind, _ in header["columns"]] == ["words", "words", "text"]
    assert bytes(arrays[0]) == b"g1\0g2" and arrays[1].tolist() == [0] * 7 + [1]
    assert bytes(arrays[2]) == b"Adam\0SGD"
    assert decode_document(data) == document
    # A number naming no stored word (an archive whose CRCs were made for it): the file
    # is unreadable, not misread.
    header["graph"] = 0
    del header["fields"]
    arrays[1][-1] = 5
    with pytest.raises(ValueError, match="names a word it does not hold"):
        decode_document(write_archive(header, arrays[:2]))


def _respelled_headers(header: bytes) -> list[bytes]:
    """Headers numpy would read as the same array, each spelled otherwise than ours."""
    shape = b"'shape': (8,), }"
    assert shape in header and header.endswith(b" \n")
    return [
        header.replace(shape + b" ", b"'shape': (08,), }"),  # a leading zero
        header[:8] + struct.pack("<H", len(header) + 54) + header[10:-1] + b" " * 64 + b"\n",
    ]


@pytest.mark.parametrize("spelling", [0, 1], ids=["shape-(08,)", "64-more-spaces"])
def test_an_array_header_spelled_otherwise_is_refused(spelling: int) -> None:
    """An archive is read only as written: an array's header too, byte for byte."""
    document = {"format": "rankscribe-lineage-index", "dir_mtime": list(range(8))}
    members = read_members(encode_document(document))
    assert decode_document(write_members(members)) == document  # zipfile writes it as we do
    header_size = 10 + struct.unpack_from("<H", members["0.npy"], 8)[0]
    header, body = members["0.npy"][:header_size], members["0.npy"][header_size:]
    members["0.npy"] = _respelled_headers(header)[spelling] + body
    with pytest.raises(ValueError, match=r"member 0\.npy's \.npy header is not as written"):
        decode_document(write_members(members))


def test_a_changed_value_is_neither_served_nor_matched(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """0.2 turned 9.0 in the index: not matched by a filter, shown as recorded, one warning."""
    base = graph_base(tmp_path, lw)
    assert filter_runs(str(base), "loss > 5")["count"] == 0
    index = base / INDEX_NAME
    index.write_bytes(_a_value_changed(index.read_bytes()))
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        matched = filter_runs(str(base), "loss > 5")
        shown = filter_runs(str(base), "loss = 0.2")
    assert matched["count"] == 0
    assert [row["summary_dir"] for row in shown["object"]] == [str(base / "run2")]
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "CRC-32" in warnings[0] and "rebuilding" in warnings[0]
    assert decode_document(index.read_bytes())["fields"]["loss"][0] == 0.2  # written again


def test_every_changed_byte_is_refused(tmp_path: Path, lw: Any) -> None:
    """Each byte of a small index changed in turn: never read as an index."""
    base = graph_base(tmp_path, lw, count=2)
    query(base)
    written = (base / INDEX_NAME).read_bytes()
    read = []
    for at in range(len(written)):
        damaged = bytearray(written)
        damaged[at] ^= 0x24
        try:
            decode_document(bytes(damaged))
        except ValueError:
            continue
        read.append(at)
    assert read == []


def test_an_index_of_the_earlier_name_is_left_unread(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    (base / ".rankscribe-lineage-index.json").write_bytes(b'{"format": "planted"}\n\0')
    with caplog.at_level(logging.WARNING):
        assert filter_runs(str(base), "loss < 0.15")["count"] == 2
    assert caplog.records == []
    assert (base / INDEX_NAME).exists()


def test_a_base_of_more_keys_than_an_archive_holds_arrays_keeps_the_rest_in_json() -> None:
    """A zip holds 65,535 members: 33,000 keys (two arrays each) do not all fit."""
    keys = {f"k{at}": [[0], [at]] for at in range(33_000)}
    document = {"format": "rankscribe-lineage-index", "path": ["./a"], "user_defined": keys}
    data = encode_document(document)
    header, arrays = read_archive(data)
    assert len(arrays) == 65_534 and header["user_defined"]["k32999"] == [[0], [32999]]
    assert decode_document(data) == document


@pytest.mark.growth
@pytest.mark.parametrize("shape", [many_runs, a_metric_per_run])
def test_a_hostile_index_of_array_columns_is_read_in_linear_time(
    tmp_path: Path, lw: Any, shape: Any
) -> None:
    # Its columns stored as .npy arrays, read by their own decoders (the JSON-document
    # form of each shape: test_index_growth.py).
    assert_index_read_linearly(graph_base(tmp_path, lw, count=1), shape, encode_document)
