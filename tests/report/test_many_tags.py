"""Big inputs stay usable: a run and a job of 10,000 scalar tags give a page under 15 MB.

The page draws the first MAX_TAGS tags (the loss first) and names how many are not
drawn, with their names listed (docs/report.md, "Many tags").
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from rankscribe.lineage import merge_run_dir
from rankscribe.writer import SummaryRecord
from tests._support.report_page import write_page

TAGS = 10_000
STEPS = 3
PAGE_LIMIT = 15 * 1024 * 1024
# docs/report.md, "Many tags": a job draws at most 50 scalar tags, and the collapsed list of
# those left out names the first 1,000.
MAX_TAGS = 50
LISTED_TAGS = 1000


def record_many_tags(directory: Path, rank: int) -> None:
    with SummaryRecord(directory, rank=rank) as record:
        for step in range(1, STEPS + 1):
            record.add_value("scalar", "loss/auto", 1.0 / step + rank)
            for index in range(TAGS):
                record.add_value("scalar", f"layer/{index:05d}", float(index * step))
            record.record(step)


def test_ten_thousand_tags_give_a_small_page_that_names_what_is_left_out(
    tmp_path: Path,
) -> None:
    base = tmp_path / "runs"
    record_many_tags(base / "single", 0)
    for rank in range(2):
        record_many_tags(base / "job" / f"rank_{rank}", rank)
    merge_run_dir(base / "job")

    started = time.monotonic()
    page_path = write_page(base, tmp_path / "report.html").path
    seconds = time.monotonic() - started
    size = page_path.stat().st_size
    print(f"report of 3 x {TAGS + 1} tags: {size / 1e6:.2f} MB in {seconds:.1f} s")
    assert size < PAGE_LIMIT

    page = page_path.read_text()
    left_out = TAGS + 1 - MAX_TAGS  # loss/auto and layer/00000..layer/09999
    for where in ("of this job", "of these runs"):
        assert f"{left_out} more scalar tags {where} are not drawn" in page
    assert page.count(f"{left_out} tags not drawn") == 2
    # drawn: the loss, then the first tags by name; the first left out is listed, by name
    assert re.search(r"<summary>layer/00048</summary>", page)
    assert "<summary>layer/00049</summary>" not in page
    listed = page.split(f"{left_out} tags not drawn</summary>", 1)[1].split("</details>", 1)[0]
    assert listed.count("layer/") == LISTED_TAGS
    assert listed.startswith('<p class="note">layer/00049, layer/00050')
    assert f", and {left_out - LISTED_TAGS} more" in listed
