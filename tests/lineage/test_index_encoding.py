"""The index file's encoding: a JSON line, then raw columns (docs/lineage-queries.md, "The index").

What is written reads back as the same document, whatever the values; a
file that does not add up is ignored with one warning and rebuilt.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage

# private: the index file's name and scan rule (the index container)
from rankscribe.lineage.index._cache import INDEX_NAME, forget_scans, scan_base_dir

# private: the index container's codec
from rankscribe.lineage.index._index_encoding import decode_document, encode_document

# private: the index container's version and loader
from rankscribe.lineage.index._index_file import INDEX_VERSION, load_index
from tests.lineage._index_bases import graph_base, read_index


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
    line, _, rest = data.partition(b"\n")
    header = json.loads(line)
    # Columns of one plain type are raw bytes after the line; the others stay in it.
    assert header["path"] == 0 and isinstance(header["update_time"], list)
    assert header["fields"]["network"] == document["fields"]["network"]
    assert [kind for kind, _, _ in header["columns"]][:3] == ["text", "i64", "bool"]
    assert b"Net\\u0000with NUL" in line and "ünïcode".encode() in rest
    assert b"\\u00fcn" not in line  # a binary text column is not also in the line
    assert _same(decode_document(data), document)
    assert _same(document, _document())  # the document given is left as it was


def test_a_json_document_is_an_index_too() -> None:
    document = _document()
    document["update_time"] = [5, 6, 7]
    text = json.dumps(document).encode()
    assert _same(decode_document(text), document)


def _short_by_one(data: bytes) -> bytes:
    return data[:-1]


def _one_byte_more(data: bytes) -> bytes:
    return data + b"\0"


def _version_3(data: bytes) -> bytes:
    """The previous format: the same columns, all of them one JSON document."""
    document = decode_document(data)
    document["version"] = 3
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_short_by_one, "unreadable"),
        (_one_byte_more, "unreadable"),
        (_version_3, "another version (format rankscribe-lineage-index, version 3"),
    ],
    ids=["short-by-one-byte", "one-byte-more", "version-3-json"],
)
def test_a_damaged_binary_index_is_rebuilt_with_one_warning(
    tmp_path: Path, lw: Any, damage: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    scan_base_dir(str(base))
    written = (base / INDEX_NAME).read_bytes()
    assert b"\n" in written and json.loads(written.partition(b"\n")[0])["columns"]
    (base / INDEX_NAME).write_bytes(damage(written))
    forget_scans()  # as a new process
    with caplog.at_level(logging.WARNING):
        scan = scan_base_dir(str(base))
        assert filter_summary_lineage(str(base)) == expected
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and INDEX_NAME in warnings[0] and said in warnings[0], warnings
    assert scan.parsed_runs == 3  # read again from the runs
    loaded = load_index(str(base))  # and written again, whole
    assert loaded is not None and loaded.dropped == 0


def test_a_wrong_typed_entry_in_a_binary_index_is_read_again(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    scan_base_dir(str(base))
    index = read_index(base)
    index["fields"]["network"][index["path"].index("./run1")] = 5
    (base / INDEX_NAME).write_bytes(encode_document(index))  # the other columns stay binary
    forget_scans()
    with caplog.at_level(logging.WARNING):
        scan = scan_base_dir(str(base))
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
    line, _, rest = data.partition(b"\n")
    described = json.loads(line)["columns"]
    assert [kind for kind, _, _ in described] == ["words", "words", "text"]
    assert rest.count(b"g1") == 1 and rest.count(b"Adam") == 1
    assert decode_document(data) == document
    # A number naming no stored word: the file is unreadable, not misread.
    words, _ = described[0][1]
    damaged = bytearray(data)
    first_code = len(line) + 1 + words
    damaged[first_code : first_code + 8] = (5).to_bytes(8, "little")
    with pytest.raises(ValueError, match="names a word it does not hold"):
        decode_document(bytes(damaged))
