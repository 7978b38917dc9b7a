"""What rankscribe.ranks reads from a job's files takes time linear in the file.

The rank-dirs note (``read_rank_dirs``) is read by the merge from a job directory that
another user may have written to; it is parsed at 1, 4 and 16 MB of a hostile shape
(``tests/_support/growth.py``), below the note's 16 MB bound. The other files and
messages read as JSON (the claim, the rendezvous members) go through the same
``parse_json``, whose own growth test is ``test_jsondata_growth.py``; the messages
between ranks through the codec, tested in ``test_codec.py``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rankscribe.ranks.files import RANK_DIRS_FILE_NAME, read_rank_dirs
from tests._support.growth import MEGABYTE, assert_linear

_made = itertools.count()
# Below the note's bound at 16 times this.
BASE = MEGABYTE - 4096


def note(folder: Path, text: str) -> Path:
    job = folder / f"job{next(_made)}"
    job.mkdir()
    (job / RANK_DIRS_FILE_NAME).write_text(text, encoding="utf-8")
    return job


def deep_then_open_escaped_string(folder: Path) -> Callable[[int], Path]:
    return lambda size: note(folder, '{"rank_dirs": ' + "[" * 20 + '"' + '\\"' * (size // 2 - 20))


def many_ranks(folder: Path) -> Callable[[int], Path]:
    """Ranks whose directories are in the job's parent (``folder``), as the merge takes them."""

    def build(size: int) -> Path:
        per_entry = len(json.dumps({"999999999": str(folder / "rank_999999999")})) - 1
        entries = {str(rank): str(folder / f"rank_{rank}") for rank in range(size // per_entry)}
        return note(folder, json.dumps({"rank_dirs": entries}))

    return build


@pytest.mark.growth
@pytest.mark.parametrize("shape", [deep_then_open_escaped_string, many_ranks])
def test_the_rank_dirs_note_is_read_in_linear_time(
    tmp_path: Path, shape: Callable[[Path], Callable[[int], Path]]
) -> None:
    assert_linear(read_rank_dirs, shape(tmp_path), base=BASE)


def test_the_hostile_notes_read_as_none_or_as_written(tmp_path: Path) -> None:
    assert read_rank_dirs(deep_then_open_escaped_string(tmp_path)(1000)) == {}
    job = many_ranks(tmp_path)(1000)
    written = json.loads((job / RANK_DIRS_FILE_NAME).read_text(encoding="utf-8"))["rank_dirs"]
    assert len(written) >= 5
    assert read_rank_dirs(job) == {int(rank): path for rank, path in written.items()}
