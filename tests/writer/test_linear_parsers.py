"""Reading event files takes time linear in the file, whatever it holds.

Each reader of what another program or user may have written (the framing, the event
reader behind ``scalars`` and ``scalar_arrays``, ``rankscribe-dump``) is run on files of
a hostile shape at 1, 4 and 16 MB (``tests/_support/growth.py``): many tiny records,
many tags at one step, one event of many values, damaged records read leniently.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from rankscribe.writer import reader
from rankscribe.writer.dump import main as dump_main
from rankscribe.writer.files import SUMMARY_FILE_VERSION, frame, read_records
from rankscribe.writer.pb import summary_pb2
from tests._support.growth import assert_linear

_made = itertools.count()


def scalar_event(step: int, tags: Iterable[str]) -> bytes:
    event = summary_pb2.Event(wall_time=2.0, step=step)
    for tag in tags:
        value = event.summary.value.add()
        value.tag = tag
        value.scalar_value = 0.5
    return frame(event.SerializeToString())


def event_file(folder: Path, records: Iterable[bytes]) -> Path:
    path = folder / f"events.out.events.summary.{1_600_000_000 + next(_made)}.h_MS"
    opening = summary_pb2.Event(wall_time=1.0, version=SUMMARY_FILE_VERSION)
    with path.open("wb") as stream:
        stream.write(frame(opening.SerializeToString()))
        stream.writelines(records)
    return path


def many_tiny_records(folder: Path) -> Callable[[int], Path]:
    def build(size: int) -> Path:
        one = scalar_event(1, ["loss"])
        return event_file(
            folder, (scalar_event(step, ["loss"]) for step in range(size // len(one)))
        )

    return build


def many_tags_at_one_step(folder: Path) -> Callable[[int], Path]:
    def build(size: int) -> Path:
        tag = "t" * 200 + "{:07d}"
        count = size // len(scalar_event(7, [tag.format(0)]))
        return event_file(folder, (scalar_event(7, [tag.format(index)]) for index in range(count)))

    return build


def one_event_of_many_values(folder: Path) -> Callable[[int], Path]:
    def build(size: int) -> Path:
        tag = "v" * 100 + "{:07d}"
        count = size // (len(tag) + 16)
        return event_file(folder, [scalar_event(3, (tag.format(index) for index in range(count)))])

    return build


def damaged_records(folder: Path) -> Callable[[int], Path]:
    """Records whose payload CRC is wrong: each is stepped over and reported."""

    def build(size: int) -> Path:
        one = bytearray(scalar_event(1, ["loss" * 40]))
        one[-1] ^= 0xFF
        return event_file(folder, itertools.repeat(bytes(one), size // len(one)))

    return build


def framing(path: Path) -> object:
    return sum(1 for _ in read_records(path, strict=False))


def dump(path: Path) -> object:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return dump_main([str(path)])


@pytest.mark.growth
@pytest.mark.parametrize(
    ("read", "shape"),
    [
        (framing, many_tiny_records),
        (framing, damaged_records),
        (reader.scalars, many_tags_at_one_step),
        (reader.scalars, one_event_of_many_values),
        (reader.scalar_arrays, damaged_records),
        (dump, one_event_of_many_values),
        (dump, damaged_records),
    ],
    ids=lambda function: function.__name__,
)
def test_reading_takes_time_linear_in_a_hostile_file(
    tmp_path: Path, read: Callable[[Path], object], shape: Callable[[Path], Callable[[int], Path]]
) -> None:
    assert_linear(read, shape(tmp_path))


def test_the_hostile_files_read_as_written(tmp_path: Path) -> None:
    tiny = many_tiny_records(tmp_path)(1000)
    assert reader.scalars(tiny) == {
        "loss": [(step, 0.5) for step in range(len(reader.scalars(tiny)["loss"]))]
    }
    wide = one_event_of_many_values(tmp_path)(5000)
    steps, values = reader.scalar_arrays(wide)["v" * 100 + "0000003"]
    assert steps.tolist() == [3] and values.tolist() == [0.5]
    damaged = damaged_records(tmp_path)(2000)
    assert reader.scalars(damaged) == {}
