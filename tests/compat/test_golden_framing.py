"""Golden files written by MindSpore 2.10: record boundaries and stored CRCs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankscribe.writer.files import RecordReader

GOLDEN = Path(__file__).parent / "data" / "mindspore-2.10"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())
EVENT_FILES = [
    (case, entry)
    for case, info in MANIFEST["dirs"].items()
    for entry in info["files"]
    if entry["kind"] in ("summary", "lineage")
]


@pytest.mark.parametrize(("case", "entry"), EVENT_FILES, ids=[e["name"] for _, e in EVENT_FILES])
def test_every_record_is_found_at_the_manifest_offset(case, entry):
    reader = RecordReader(GOLDEN / case / entry["name"])
    records = list(reader)
    assert reader.torn_tail is None
    assert [(r.offset, len(r.payload)) for r in records] == [
        (rec["offset"], rec["payload_len"]) for rec in entry["records"]
    ]
    assert sum(r.record_length for r in records) == entry["size"]
