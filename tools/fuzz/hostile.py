#!/usr/bin/env python3
"""Structure-aware hostile inputs for the fuzz targets, and a driver that runs them.

    python tools/fuzz/hostile.py claim --count 100000
    python tools/fuzz/hostile.py --list

A mutation fuzzer rarely gets past a CRC or a length prefix, and never writes
4,300 digits in a row. Each generator here makes inputs of one format that a
reader takes from a file or a message, valid in structure (the CRCs, lengths,
zip records and JSON syntax the reader checks first are right) and hostile in
content: nesting past every depth limit, unterminated strings of escaped
quotes after many brackets, numbers of thousands of digits, duplicate keys,
values of the wrong type or out of range, declared sizes beyond the data, many
tags sharing their length and first and last steps, wrong CRCs, non-UTF-8
text. The driver runs ``--count`` of them through the generator's target of
``targets.py`` (a failure, as there: a raw exception, a wrong answer, or more
than ``targets.TIME_LIMIT`` s of CPU time for one input), reports the counts,
the failures grouped by message and the slowest input, and saves every
failing input under ``--out`` (``.cache/fuzz-hostile/<generator>/``) with its
message beside it. Input ``i`` of seed ``s`` is always the same bytes
(``--seed s --first i --count 1`` makes it again). Sizes are drawn
log-uniformly up to each generator's ``max_bytes``, so most inputs are small
and a few are large enough to show a reader slower than linear.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import random
import re
import signal
import struct
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import targets

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------- JSON


class Raw(str):
    """JSON text put into a document as it is (a number of 5,000 digits, brackets)."""

    __slots__ = ()


class Pairs(list[tuple[Any, Any]]):
    """An object written from its pairs in order: a key may come twice."""


def render(value: Any) -> str:
    """The JSON text of ``value`` (:class:`Raw` pieces as they are, :class:`Pairs` in order)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{render(k)}:{render(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{render(k)}:{render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render(item) for item in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value)


def _size(rng: random.Random, max_bytes: int) -> int:
    """A size from 1 to ``max_bytes``, log-uniform: mostly small, now and then large."""
    return max(1, int(math.exp(rng.uniform(0.0, math.log(max_bytes)))))


def _deep(rng: random.Random, levels: int) -> Raw:
    opening, closing = rng.choice((("[", "]"), ('{"a":', "}"), ('[{"k":', "}]")))
    inner = rng.choice(("1", '"x"', "[]", "{}", "null"))
    unit = max(1, len(opening))
    levels = max(1, levels // unit) if unit > 1 else levels
    return Raw(opening * levels + inner + closing * levels)


def _unterminated(rng: random.Random, size: int) -> Raw:
    """More than any depth limit of brackets, then a string of escaped quotes (closed or not)."""
    brackets = rng.choice((17, 20, 33, 64, 200))
    escape = rng.choice(('\\"', "\\\\", '\\"\\\\', "\\u00"))
    text = "[" * brackets + '"' + escape * max(1, (size - brackets) // len(escape))
    if rng.random() < 0.3:
        text += '"' + "]" * brackets
    return Raw(text)


def _huge_number(rng: random.Random, size: int) -> Raw:
    digits = rng.choice((4299, 4300, 4301, 5000, max(1, size)))
    body = rng.choice("123456789") + "0" * (digits - 1)
    form = rng.randrange(7)
    if form == 0:
        return Raw("-" + body)
    if form == 1:
        return Raw("1e" + body[: rng.choice((3, 4, 20, digits))])
    if form == 2:
        return Raw("0." + body)
    if form == 3:
        return Raw(body + ".5e-" + body[:5])
    if form == 4:
        return Raw(rng.choice(("1e400", "-1e400", "NaN", "Infinity", "-Infinity", "-0", "1e-400")))
    return Raw(body)


_ODD_STRINGS = (
    "",
    "\x00",
    "²",
    "１２",
    "-1",
    "+1",
    " 1",
    "1 ",
    "0x10",
    "1_000",
    "..",
    "/",
    "/etc",
    "../../..",
    "rank_0",
    "\ud800",
    "\u202e",
    "NaN",
)


def _odd_scalar(rng: random.Random, size: int) -> Any:  # noqa: PLR0911 - one per kind
    choice = rng.randrange(10)
    if choice == 0:
        return rng.choice((0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1))
    if choice == 1:
        return rng.choice((0.0, -0.0, 1e-320, 1.5, float("nan"), float("inf"), -float("inf")))
    if choice == 2:
        return rng.choice((True, False, None))
    if choice == 3:
        return rng.choice(_ODD_STRINGS)
    if choice == 4:
        return "x" * size
    if choice == 5:
        return Raw('"' + "\\u" + rng.choice(("d800", "dfff", "0000", "zzzz", "12")) + '"')
    if choice == 6:
        return []
    if choice == 7:
        return {}
    return rng.choice(("9" * 30, str(2**64)))


def hostile_value(rng: random.Random, size: int) -> Any:  # noqa: PLR0911 - one per kind
    """One value a reader of JSON must survive, its text about ``size`` characters at most."""
    kind = rng.randrange(8)
    if kind == 0:
        return _deep(rng, rng.choice((15, 16, 17, 100, 1000, 2000, max(1, size // 2))))
    if kind == 1:
        return _unterminated(rng, size)
    if kind == 2:
        return _huge_number(rng, size)
    if kind == 3:
        return Raw("[" * rng.choice((17, 40, max(1, size))))  # brackets that never close
    if kind == 4:
        return [rng.random()] * max(1, min(size // 20, 5000))
    if kind == 5:
        return Pairs([("k", 1)] * max(2, min(size // 6, 5000)))
    return _odd_scalar(rng, size)


def hostile_document(rng: random.Random, template: dict[str, Any], max_bytes: int) -> bytes:
    """``template`` (a valid document of the format) made hostile, as bytes."""
    size = _size(rng, max_bytes)
    strategy = rng.randrange(10)
    items = list(template.items())
    if strategy <= 2 and items:  # some fields replaced
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(items))
            items[at] = (items[at][0], hostile_value(rng, size))
        text = render(Pairs(items))
    elif strategy == 3 and items:  # a key twice, the second time hostile or of another type
        key, _ = rng.choice(items)
        items.insert(rng.randrange(len(items) + 1), (key, hostile_value(rng, size)))
        text = render(Pairs(items))
    elif strategy == 4:  # the whole document another thing
        text = render(hostile_value(rng, size))
    elif strategy == 5:  # the document nested in brackets
        levels = rng.choice((1, 16, 17, 100, max(1, size // 2)))
        text = "[" * levels + render(template) + "]" * levels
    elif strategy == 6:  # unknown keys, many of them, or long ones
        items += [(f"k{n}" * rng.randint(1, 3), n) for n in range(max(1, min(size // 8, 4000)))]
        rng.shuffle(items)
        text = render(Pairs(items))
    elif strategy == 7:  # nested values deep inside a valid field
        if not items:
            text = render(hostile_value(rng, size))
        else:
            at = rng.randrange(len(items))
            items[at] = (items[at][0], _unterminated(rng, size))
            text = render(Pairs(items))
    elif strategy == 8:  # torn: cut anywhere
        whole = render(template)
        text = whole[: rng.randrange(len(whole) + 1)]
    else:
        text = render(template)
    data = text.encode("utf-8", "surrogatepass")
    return _byte_damage(rng, data)


def _byte_damage(rng: random.Random, data: bytes) -> bytes:
    """Now and then, bytes no JSON text holds (not UTF-8, a BOM, padding, a tail)."""
    choice = rng.randrange(12)
    if choice == 0 and data:
        at = rng.randrange(len(data))
        return data[:at] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00")) + data[at:]
    if choice == 1:
        return b"\xef\xbb\xbf" + data
    if choice == 2:
        return data + rng.choice((b" " * 1000, b"\n", b"x", b"}", b"]", b"\x00"))
    return data


# ------------------------------------------------------------------- protobuf and records


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, value: bytes | int | float, kind: str = "") -> bytes:
    """One protobuf field: bytes (length-delimited), an int (varint), or a float with
    ``kind`` "d" (64-bit) or "f" (32-bit)."""
    if isinstance(value, (bytes, bytearray)):
        return varint(number << 3 | 2) + varint(len(value)) + bytes(value)
    if isinstance(value, float) or kind:
        if kind == "f":
            return varint(number << 3 | 5) + struct.pack("<f", value)
        return varint(number << 3 | 1) + struct.pack("<d", value)
    return varint(number << 3) + varint(value)


def _masked_crc(data: bytes) -> int:
    from rankscribe.writer.format._crc import masked_crc32c

    return int(masked_crc32c(data))


def record(rng: random.Random, payload: bytes) -> bytes:
    """``payload`` framed as one TFRecord record; now and then with a lying frame."""
    length = struct.pack("<Q", len(payload))
    head, tail = _masked_crc(length), _masked_crc(payload)
    damage = rng.randrange(40)
    if damage == 0:  # a length beyond anything, its CRC right
        length = struct.pack("<Q", rng.choice((2**31, 2**40, 2**63, 2**64 - 1, len(payload) + 1)))
        head = _masked_crc(length)
    elif damage == 1:
        head ^= 1 << rng.randrange(32)
    elif damage == 2:
        tail ^= 1 << rng.randrange(32)
    elif damage == 3:
        return length + struct.pack("<I", head) + payload[: rng.randrange(len(payload) + 1)]
    return length + struct.pack("<I", head) + payload + struct.pack("<I", tail)


def _text(rng: random.Random, size: int) -> bytes:
    """A string field's bytes: a name, one that is not UTF-8, or a long one."""
    choice = rng.randrange(8)
    if choice == 0:
        return b"\xff\xfe" + b"x" * rng.randrange(4)
    if choice == 1:
        return b"a" * size
    if choice == 2:
        return b""
    if choice == 3:
        return "²/µ".encode()
    return f"tag{rng.randrange(5)}".encode()


def _nested_message(levels: int, number: int) -> bytes:
    inner = b""
    for _ in range(levels):
        inner = field(number, inner)
    return inner


# ------------------------------------------------------------------------- summary files


_MANY_TAGS_STEPS = (3, 4, 5)


def _step(rng: random.Random) -> int:
    return rng.choice((0, 1, 2, 3, 7, 100, 2**31, 2**63 - 1, -1, -(2**63)))


def _float(rng: random.Random) -> float:
    return rng.choice((0.5, -1.0, 0.0, float("nan"), float("inf"), -float("inf"), 1e38, 3.4e38))


def _shared_step_scalars(
    rng: random.Random, size: int
) -> list[tuple[int, list[tuple[bytes, float]]]]:
    """(step, [(tag, value)]) of many tags whose steps share their count, first and last:
    tag n has the steps 0, n + 1 and a last one common to all (each tag a group of its own
    under the same key)."""
    tags = max(2, min(size // 40, 2000))
    last = tags + 10
    events: dict[int, list[tuple[bytes, float]]] = {0: [], last: []}
    for number in range(tags):
        tag = f"t{number}".encode()
        events[0].append((tag, 0.5))
        events.setdefault(number + 1, []).append((tag, 1.0))
        events[last].append((tag, 0.25))
    return sorted(events.items())


def _summary_value(rng: random.Random, size: int, tensorboard: bool) -> bytes:
    tag = field(1, _text(rng, size))
    kind = rng.randrange(6)
    if kind <= 1:  # a scalar
        return tag + field(2 if tensorboard else 3, _float(rng), "f")
    if kind == 2:  # a tensor whose dims say far more than it holds
        dims = [rng.choice((0, 1, 3, -1, 2**31, 2**40, 2**62)) for _ in range(rng.randint(0, 3))]
        data = struct.pack("<3f", 1.0, 2.0, 3.0)
        if tensorboard:
            shape = b"".join(field(2, field(1, dim)) for dim in dims)
            return tag + field(
                8, field(1, rng.choice((1, 2, 19, 99))) + field(2, shape) + field(4, data)
            )
        body = b"".join(field(1, dim) for dim in dims) + field(2, rng.choice((11, 12, 99)))
        return tag + field(8, body + field(8, data))
    if kind == 3 and not tensorboard:  # an image of a size its bytes do not hold
        sizes = (1, 2**31 - 1, 0, -1)
        body = field(1, rng.choice(sizes)) + field(2, rng.choice(sizes)) + field(3, 3)
        return tag + field(4, body + field(4, b"\x89PNG\r\n\x1a\n" + b"\x00" * rng.randrange(30)))
    if kind == 4:  # a histogram, buckets in any order, counts of any size
        buckets = b"".join(
            field(1, field(1, _float(rng), "d") + field(2, _float(rng), "d") + field(3, _step(rng)))
            for _ in range(rng.randint(0, 5))
        )
        return tag + field(5 if tensorboard else 9, buckets + field(8, _step(rng)))
    # a value nested past protobuf's recursion limit, or a field protobuf does not know
    return tag + rng.choice((_nested_message(rng.choice((50, 101, 200)), 10), field(99, b"?")))


def summary_events(rng: random.Random, max_bytes: int, *, tensorboard: bool) -> bytes:
    """Records of events: scalars of many tags sharing steps, odd values and steps."""
    size = _size(rng, max_bytes)
    version = b"brain.Event:2" if tensorboard else b"Mindspore.Event:1"
    out = [record(rng, field(1, 1.7e9, "d") + field(3, version))]
    if rng.random() < 0.4:
        for step, points in _shared_step_scalars(rng, size):
            body = b"".join(
                field(1, field(1, tag) + field(2 if tensorboard else 3, value, "f"))
                for tag, value in points
            )
            out.append(record(rng, field(1, 1.7e9, "d") + field(2, step) + field(5, body)))
        return b"".join(out)
    for _ in range(rng.randint(1, 8)):
        values = b"".join(
            field(1, _summary_value(rng, size, tensorboard)) for _ in range(rng.randint(1, 4))
        )
        event = field(1, 1.7e9, "d") + field(2, _step(rng)) + field(5, values)
        if rng.random() < 0.1:
            event += field(2, _step(rng))  # a second step: the last one counts
        out.append(record(rng, event))
    return b"".join(out)


# ------------------------------------------------------------------------- lineage files


def _metric_text(rng: random.Random, size: int) -> bytes:
    return hostile_document(rng, {"accuracy": 0.91, "loss": 0.25}, size)


def _train_lineage(rng: random.Random, size: int) -> bytes:
    def text() -> bytes:
        return _text(rng, size) if rng.random() < 0.5 else b"Momentum"

    def int32() -> int:
        return rng.choice((1, 8, 0, -1, 2**31 - 1, -(2**31), 2**40))

    hyper = (
        field(1, text())
        + field(2, _float(rng), "f")
        + field(3, text())
        + field(4, int32())
        + field(5, text())
        + field(6, int32())
        + field(8, int32())
    )
    dataset = field(1, text()) + field(2, int32())
    algorithm = field(1, text()) + field(2, _float(rng), "f")
    model = field(3, text()) + field(4, _step(rng))
    parts = [field(1, hyper), field(2, dataset), field(3, algorithm), field(4, model)]
    rng.shuffle(parts)
    return b"".join(parts[: rng.randint(1, 4)])


def _user_defined(rng: random.Random, size: int) -> bytes:
    def entry(number: int, key: bytes, value: bytes | int | float, kind: str = "") -> bytes:
        return field(number, field(1, key) + field(2, value, kind))

    choice = rng.randrange(4)
    if choice == 0:  # many keys
        return b"".join(
            entry(4, f"k{n}".encode(), b"v") for n in range(max(1, min(size // 12, 3000)))
        )
    if choice == 1:  # nested dicts past any limit
        inner = entry(3, b"x", 1)
        for _ in range(rng.choice((20, 101, 300))):
            inner = entry(2, b"d", inner)
        return inner
    if choice == 2:
        return entry(5, _text(rng, size), _float(rng), "d") + entry(
            3, b"i", rng.choice((-1, 2**40))
        )
    return entry(4, _text(rng, size), _text(rng, size))


def _lineage_event(rng: random.Random, size: int) -> bytes:
    kind = rng.randrange(5)
    wall = field(1, rng.choice((1.7e9, float("nan"), -1.0)), "d")
    if kind == 0:
        body = field(6, _train_lineage(rng, size))
    elif kind <= 2:  # an evaluation: its metric is JSON text
        dataset = field(3, field(1, _text(rng, size)) + field(2, rng.choice((1, -1, 2**40))))
        body = field(7, field(2, _metric_text(rng, size)) + dataset)
    elif kind == 3:
        body = field(10, _user_defined(rng, size))
    else:  # a dataset graph nested deep
        body = field(9, _nested_message(rng.choice((2, 50, 101, 200)), 1))
    return wall + field(2, _step(rng)) + body


def lineage_events(rng: random.Random, max_bytes: int) -> bytes:
    size = _size(rng, max_bytes)
    out = [record(rng, field(1, 1.7e9, "d") + field(3, b"Mindspore.Event:1"))]
    out += [record(rng, _lineage_event(rng, size)) for _ in range(rng.randint(1, 4))]
    return b"".join(out)


def train_start(rng: random.Random, max_bytes: int) -> bytes:
    size = _size(rng, max_bytes)
    out = [record(rng, field(1, 1.7e9, "d") + field(3, b"Mindspore.Event:1"))]
    for _ in range(rng.randint(1, 3)):
        event = field(1, 1.7e9, "d") + field(6, _train_lineage(rng, size))
        out.append(record(rng, event if rng.random() < 0.8 else _lineage_event(rng, size)))
    return b"".join(out)


# ------------------------------------------------------------------------------- job view


def job_view(rng: random.Random, max_bytes: int) -> bytes:
    """A job of 2 or 3 ranks: hostile summary files (many tags sharing steps among them)
    and hostile or golden lineage files."""
    golden = _golden_lineage()
    ranks = rng.choice((2, 3))
    files: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(ranks):
        summary = summary_events(rng, max_bytes, tensorboard=False) if rng.random() < 0.9 else None
        lineage = rng.choice((golden, None, lineage_events(rng, max_bytes // 4)))
        files.append((summary, lineage))
    packed: bytes = targets.pack_job_files(rng.randrange(3), files)
    return packed


@functools.cache
def _golden_lineage() -> bytes:
    good: Path = targets.GOOD_RUN
    return sorted(good.glob("*_lineage"))[0].read_bytes()


# ---------------------------------------------------------------------- the .npz container

_NPY_MAGIC = b"\x93NUMPY\x01\x00"


def _npy_header(kind: str, count_text: str) -> bytes:
    header = f"{{'descr': '{kind}', 'fortran_order': False, 'shape': ({count_text},), }}"
    padding = -(len(_NPY_MAGIC) + 2 + len(header) + 1) % 64
    text = (header + " " * padding + "\n").encode("ascii")
    return _NPY_MAGIC + struct.pack("<H", len(text)) + text


def archive(
    rng: random.Random, document: bytes, arrays: list[tuple[str, bytes]], *, damage: bool = True
) -> bytes:
    """An archive laid out as ``_npz.pack`` lays it out, of a ``document`` given as bytes
    (any text), its CRCs right; with ``damage``, now and then a lying header, shape or CRC."""
    members: list[tuple[bytes, bytes]] = [(b"document.json", document)]
    for number, (kind, data) in enumerate(arrays):
        count = str(len(data) // {"<i8": 8, "<f8": 8, "|b1": 1, "|u1": 1}.get(kind, 1))
        if damage and rng.random() < 0.03:
            count = rng.choice(("0" + count, str(int(count) + 1), "9" * 19, "1" + "0" * 30))
        members.append((f"{number}.npy".encode(), _npy_header(kind, count) + data))
    local = struct.Struct("<4sHHHHHLLLHH")
    entry = struct.Struct("<4sBBBBHHHHLLLHHHHHLL")
    parts, entries, offset = [], [], 0
    for name, data in members:
        crc = zlib.crc32(data)
        if damage and rng.random() < 0.01:
            crc ^= 1 << rng.randrange(32)
        size = len(data)
        declared = size
        if damage and rng.random() < 0.01:
            declared = rng.choice((size + 1, 2**32 - 1, 0))
        common = (0, 33, crc, declared, declared, len(name))
        parts += [local.pack(b"PK\x03\x04", 20, 0, 0, *common, 0), name, data]
        entries.append(
            entry.pack(b"PK\x01\x02", 20, 3, 20, 0, 0, 0, *common, 0, 0, 0, 0, 0o600 << 16, offset)
            + name
        )
        offset += local.size + len(name) + size
    directory = b"".join(entries)
    end = struct.pack(
        "<4sHHHHLLH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), offset, 0
    )
    return b"".join([*parts, directory, end])


def _i64(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}Q", *[value & ((1 << 64) - 1) for value in values])


def _f64(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


_PARTIAL_TAGS = ("loss/auto", "rankscribe/step_time", "rankscribe/param_fingerprint", "acc")


def _partial_parts(rng: random.Random, size: int) -> tuple[dict[str, Any], list[int], list[float]]:
    """A partial's header and its int and float blocks, consistent or nearly so."""
    header: dict[str, Any] = {
        "format": "rankscribe-job-partial",
        "version": 4,
        "tags": [],
        "one_rank": [],
        "per_rank": [],
        "last_steps": [],
        "nonfinite_loss": [],
        "finished": [],
    }
    ints: list[int] = []
    floats: list[float] = []
    shape = rng.randrange(4)
    if shape == 0:  # one rank's many tags, same count and ends, other middles
        tags = max(2, min(size // 48, 2000))
        rank = rng.choice((0, 1, 3))
        for number in range(tags):
            header["one_rank"].append([f"t{number}", rank, 3])
            ints += [0, number + 1, tags + 10]
            floats += [0.5, 1.0, 0.25]
        header["last_steps"] = [[rank, tags + 10]]
    elif shape == 1:  # whole statistics: 7 int rows and 4 float rows per tag
        for tag in rng.sample(_PARTIAL_TAGS, rng.randint(1, 3)):
            count = rng.choice((1, 2, 5))
            steps = sorted(rng.sample(range(1, 100), count))
            header["tags"].append([tag, count])
            ints += steps + [2] * count + [0] * count + [1] * count + [0] * count * 3
            floats += [_float(rng) for _ in range(4 * count)]
        header["last_steps"] = [[0, 99], [1, 99]]
    elif shape == 2:  # per-rank timings
        ranks = sorted(rng.sample(range(7), rng.randint(1, 3)))
        counts = [rng.choice((1, 3)) for _ in ranks]
        header["per_rank"].append(["rankscribe/step_time", ranks, counts])
        for count in counts:
            ints += list(range(1, count + 1))
        for count in counts:
            floats += [_float(rng) for _ in range(count)]
        header["last_steps"] = [[rank, 3] for rank in ranks]
    else:  # a rank's own points, few
        rank = rng.choice((0, 1, 4, 2**62, -1))
        for tag in rng.sample(_PARTIAL_TAGS, 2):
            count = rng.choice((1, 2))
            header["one_rank"].append([tag, rank, count])
            ints += [_step(rng) for _ in range(count)]
            floats += [_float(rng) for _ in range(count)]
        header["nonfinite_loss"] = [[rank, 1]]
        header["finished"] = [rank]
    return header, ints, floats


def _hostile_header(rng: random.Random, header: dict[str, Any], size: int) -> bytes:
    if rng.random() < 0.6:
        return render(header).encode()
    return hostile_document(rng, header, size)


def job_partial_bytes(rng: random.Random, max_bytes: int) -> bytes:
    size = _size(rng, max_bytes)
    header, ints, floats = _partial_parts(rng, size)
    if rng.random() < 0.1 and ints:  # the blocks do not add up
        ints = ints[: rng.randrange(len(ints))]
    arrays = [("<i8", _i64(ints)), ("<f8", _f64(floats))]
    if rng.random() < 0.05:
        arrays = rng.choice(([], arrays[::-1], [*arrays, ("|u1", b"x")], [("|b1", b"\x01")] * 2))
    return archive(rng, _hostile_header(rng, header, size), arrays)


def job_partial(rng: random.Random, max_bytes: int) -> bytes:
    """A job-view partial in the container (read as an index too by the target)."""
    return job_partial_bytes(rng, max_bytes)


@functools.cache
def _index_seed() -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    import seeds

    from rankscribe.jobview import _npz

    document, arrays = _npz.unpack_arrays(seeds.container_seeds()["seed-index-golden-run"])
    return document, [(kind, bytes(data)) for kind, data in arrays]


def lineage_index(rng: random.Random, max_bytes: int) -> bytes:
    """The lineage index of a base dir, its CRCs right, its document and columns hostile."""
    document, arrays = _index_seed()
    document = json.loads(json.dumps(document))
    arrays = list(arrays)
    size = _size(rng, max_bytes)
    choice = rng.randrange(6)
    if choice == 0 and arrays:  # a column of another kind or length
        at = rng.randrange(len(arrays))
        data = arrays[at][1]
        new_kind = rng.choice(("<i8", "<f8", "|b1", "|u1"))
        width = {"<i8": 8, "<f8": 8, "|b1": 1, "|u1": 1}[new_kind]
        data = data[: len(data) - len(data) % width] if rng.random() < 0.5 else data * 2
        data = data[: len(data) - len(data) % width]
        arrays[at] = (new_kind, data)
    elif choice == 1:  # a column number that points elsewhere, or nowhere
        fields = document.get("fields", {})
        if fields:
            key = rng.choice(sorted(fields))
            fields[key] = rng.choice((0, len(arrays), -1, 2**63, "0", None, [1, 2]))
    elif choice == 2:  # warnings, metric and user-defined names of any kind
        section = rng.choice(("warnings", "metric", "user_defined"))
        document[section] = {
            rng.choice(("²", "\x00", "a" * 300, "", "1")): rng.choice(([19, 20], "x", [1], {}))
        }
    elif choice == 3:  # the files list, lying
        document["files"] = rng.choice(([], [[None]], [["x", -1, 2**64, 1.5, "y"]], [[]] * 50))
    return archive(
        rng,
        hostile_document(rng, document, size) if choice >= 4 else render(document).encode(),
        arrays,
    )


# ------------------------------------------------------------------------- tree messages


def tree_message(rng: random.Random, max_bytes: int) -> bytes:
    """Rank 1's message: a partial for the target to wrap, or the envelope rank 1's channel
    puts around it (whatever this code's envelope is), its numbers (sequence, round, size)
    or magic now and then replaced."""
    partial = job_partial_bytes(rng, max_bytes)
    if rng.random() < 0.5:
        return b"\x01" + partial
    envelope = bytearray(_envelope(partial, rng.choice((1, 2, 2**62))))
    header = len(envelope) - len(partial)
    if rng.random() < 0.05:
        envelope[:4] = rng.choice((b"RSJT", b"RSJ2", b"RSJX", b"\x00\x00\x00\x00"))
    numbers = (header - 4) // 8
    if numbers > 0 and rng.random() < 0.2:
        at = 4 + 8 * rng.randrange(numbers)
        (old,) = struct.unpack_from("<Q", envelope, at)
        new = rng.choice((0, 1, old + 1, 2**62, 2**63, 2**64 - 1))
        struct.pack_into("<Q", envelope, at, new & (2**64 - 1))
    return b"\x00" + bytes(envelope)


def _envelope(payload: bytes, round_number: int) -> bytes:
    from rankscribe.ranks.testing import MemoryTreeChannel, MemoryTreeHub

    hub = MemoryTreeHub()
    sender = MemoryTreeChannel(hub, targets.TREE_SENDER, targets.TREE_WORLD, targets.TREE_FAN_IN)
    sender.send(round_number, payload, timeout=1)
    made: bytes = hub.boxes[targets.TREE_SENDER][-1]
    return made


# ------------------------------------------------------------------------ JSON documents

_CLAIM = {
    "job_id": "0123456789abcdef",
    "host": "fuzzhost",
    "pid": 4242,
    "world_size": 4,
    "claimed_at": 1_700_000_000.5,
}
_LIVE_STATE = {
    "interval": 12,
    "wall_time": 1_700_000_000.25,
    "final": False,
    "written_through_step": 480,
    "ranks_in_interval": 2,
    "missing_in_interval": "2",
    "dropped_points": 4,
    "world_size": 3,
    "verdicts": {"job/missing_ranks": "2", "job/last_step/0": 480, "job/straggler_cost/1": 0.012},
}
_CONTROL = {"job_view_interval": 30, "cost_floor": 0.01, "confidence": 7, "window_steps": 400}
_MEMBERS = {
    "0": {"host": "fuzzhost", "pid": 10, "world_size": 2, "launch": "mpiexec:1"},
    "1": {"host": "fuzzhost", "pid": 11, "world_size": 2, "launch": "mpiexec:1"},
}


def _rank_dirs_document(rng: random.Random, size: int) -> dict[str, Any]:
    entries: list[tuple[Any, Any]] = [("0", "/tmp/rank0"), ("1", "/tmp/rank1")]
    for _ in range(rng.randint(0, 3)):
        rank = rng.choice(
            ("2", "0", "1" + "0" * rng.choice((4299, 4300, 5000)), "²", "１", "-1", "01", "9" * 30)
        )
        path = rng.choice(("/etc", "/", "..", "relative", "/tmp/" + "a" * size, "/tmp/x\x00y"))
        entries.append((rank, path))
    if rng.random() < 0.1:
        entries += [(str(n), f"/tmp/r{n}") for n in range(min(size // 12, 5000))]
    return {"rank_dirs": Pairs(entries)}


def json_generator(
    template: Callable[[random.Random, int], Any],
) -> Callable[[random.Random, int], bytes]:
    def make(rng: random.Random, max_bytes: int) -> bytes:
        return hostile_document(rng, template(rng, max_bytes), max_bytes)

    return make


def _fixed(document: dict[str, Any]) -> Callable[[random.Random, int], Any]:
    return lambda rng, size: document


# ----------------------------------------------------------------------------- checkpoints


def checkpoint(rng: random.Random, max_bytes: int) -> bytes:
    """A safetensors checkpoint: its header JSON, its metadata's JSON texts (the digest
    made again over them, as anyone can), tensors that do or do not fit the offsets."""
    import numpy as np

    from rankscribe.collector.checkpoint import _format

    size = _size(rng, max_bytes)
    tensors = {"w": np.arange(4, dtype=np.float32)}
    scalars = {"epoch_num": 3, "step_num": 12}
    metadata: dict[str, Any] = {
        "format": "np",
        _format._KEY_VERSION: _format._VERSION,
        _format._KEY_APPEND: json.dumps(scalars),
        _format._KEY_APPEND_TENSORS: json.dumps([]),
    }
    choice = rng.randrange(5)
    if choice <= 1:  # the append info's JSON text hostile, the digest right
        key = rng.choice((_format._KEY_APPEND, _format._KEY_APPEND_TENSORS))
        metadata[key] = hostile_document(rng, scalars, size).decode("utf-8", "replace")
    metadata[_format._KEY_DIGEST] = _format._digest(metadata, tensors)
    header: dict[str, Any] = {
        "__metadata__": metadata,
        "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    }
    if choice == 2:  # shapes and offsets that do not fit the data
        header["w"] = {
            "dtype": rng.choice(("F32", "F64", "I8", "BOOL", "X")),
            "shape": rng.choice(([4], [2**40], [-1], [0], [2, 2], [])),
            "data_offsets": rng.choice(([0, 16], [16, 0], [0, 2**40], [0, 8])),
        }
    text = render(header).encode() if choice != 3 else hostile_document(rng, header, size)
    length = len(text)
    if choice == 4:
        length = rng.choice((2**63, len(text) + 1, 0, 2**64 - 1))
    return struct.pack("<Q", length) + text + np.arange(4, dtype=np.float32).tobytes()


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Generator:
    """What a generator makes inputs for: its target, and the largest input size (bytes)."""

    target: str
    make: Callable[[random.Random, int], bytes]
    max_bytes: int


GENERATORS: dict[str, Generator] = {
    "summary": Generator("summary", functools.partial(summary_events, tensorboard=False), 48_000),
    "tensorboard": Generator(
        "tensorboard", functools.partial(summary_events, tensorboard=True), 48_000
    ),
    "lineage": Generator("lineage", lineage_events, 48_000),
    "jobview": Generator("jobview", job_view, 48_000),
    "livestate": Generator("livestate", json_generator(_fixed(_LIVE_STATE)), 48_000),
    "claim": Generator("claim", json_generator(_fixed(_CLAIM)), 48_000),
    "control": Generator("control", json_generator(_fixed(_CONTROL)), 8_000),
    "rankdirs": Generator("rankdirs", json_generator(_rank_dirs_document), 48_000),
    "trainstart": Generator("trainstart", train_start, 16_000),
    "members": Generator("members", json_generator(_fixed(_MEMBERS)), 48_000),
    "checkpoint": Generator("checkpoint", checkpoint, 48_000),
    "partial": Generator("container", job_partial, 96_000),
    "index": Generator("container", lineage_index, 48_000),
    "treemessage": Generator("treemessage", tree_message, 96_000),
}


def make_input(name: str, seed: int, number: int) -> bytes:
    """Input ``number`` of generator ``name`` with ``seed``: always the same bytes."""
    generator = GENERATORS[name]
    return generator.make(random.Random(f"{seed}:{number}"), generator.max_bytes)


# ----------------------------------------------------------------------------- the driver


def _signature(message: str) -> str:
    """A failure's message without its numbers and quoted parts: failures of one kind group."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "…", message.splitlines()[0] if message else "")
    return re.sub(r"[0-9]+(\.[0-9]+)?", "N", text)[:160]


@dataclass
class Campaign:
    """What a run of the driver saw."""

    inputs: int = 0
    failures: int = 0
    input_bytes: int = 0
    slowest_cpu: float = 0.0
    slowest_number: int = -1
    slowest_size: int = 0
    slowest_wall: float = 0.0
    #: Whether the run was stopped (SIGTERM, Ctrl-C) before its count: the counts so far.
    stopped: bool = False


def run(
    name: str,
    count: int,
    *,
    seed: int = 0,
    first: int = 0,
    out: Path | None = None,
    report: Callable[[str], None] = print,
) -> tuple[Campaign, dict[str, int]]:
    """Run inputs ``first`` .. ``first + count - 1`` of generator ``name`` through its target.

    Returns the campaign's counts and the failures by kind (:func:`_signature`);
    each failing input is written to ``out`` (if given) as ``fail-<sha1>`` with
    ``fail-<sha1>.txt`` saying what went wrong.
    """
    generator = GENERATORS[name]
    target = targets.TARGETS[generator.target]
    campaign = Campaign()
    kinds: dict[str, int] = {}
    # The first call imports the readers: that is no input's time.
    with contextlib.suppress(Exception):
        getattr(target, "__wrapped__", target)(b"")
    started = time.monotonic()
    for number in range(first, first + count):
        if _stop_requested:
            campaign.stopped = True
            break
        data = make_input(name, seed, number)
        cpu, wall = time.process_time(), time.monotonic()
        message = None
        try:
            target(data)
        except Exception as error:  # FuzzFailureError, or the target itself broken: both fail
            message = f"{type(error).__name__}: {error}"
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        campaign.inputs += 1
        campaign.input_bytes += len(data)
        if cpu > campaign.slowest_cpu:
            campaign.slowest_cpu, campaign.slowest_wall = cpu, wall
            campaign.slowest_number, campaign.slowest_size = number, len(data)
        if message is not None:
            campaign.failures += 1
            kind = _signature(message)
            kinds[kind] = kinds.get(kind, 0) + 1
            if out is not None:
                _save(out / name, data, f"seed {seed} input {number}\n{message}\n")
            if kinds[kind] == 1:
                report(f"{name}: input {number} ({len(data)} bytes) failed: {message[:300]}")
        if (number - first + 1) % 10_000 == 0:
            elapsed = time.monotonic() - started
            report(
                f"{name}: {number - first + 1} inputs, {campaign.failures} failed, {elapsed:.0f} s"
            )
    return campaign, kinds


_stop_requested = False


def _request_stop(_signum: int, _frame: object) -> None:
    """SIGTERM: finish the input under way, then stop and report (a campaign cut short)."""
    global _stop_requested  # noqa: PLW0603 - set by the signal, read by the loop
    _stop_requested = True


def _save(folder: Path, data: bytes, note: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    name = "fail-" + hashlib.sha1(data).hexdigest()
    (folder / name).write_bytes(data)
    (folder / f"{name}.txt").write_text(note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("generator", nargs="?", choices=sorted(GENERATORS))
    parser.add_argument("--count", type=int, default=1000, help="inputs to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the inputs' seed (default 0)")
    parser.add_argument("--first", type=int, default=0, help="the number of the first input")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / ".cache" / "fuzz-hostile",
        help="where failing inputs are saved (default .cache/fuzz-hostile/<generator>/)",
    )
    parser.add_argument("--list", action="store_true", help="list the generators and stop")
    options = parser.parse_args(argv)
    if options.list or options.generator is None:
        for name, generator in sorted(GENERATORS.items()):
            print(
                f"{name:12} -> target {generator.target:12} (inputs up to {generator.max_bytes} B)"
            )
        return 0 if options.list else 2
    signal.signal(signal.SIGTERM, _request_stop)
    started = time.monotonic()
    campaign, kinds = run(
        options.generator, options.count, seed=options.seed, first=options.first, out=options.out
    )
    elapsed = time.monotonic() - started
    print(
        json.dumps(
            {
                "generator": options.generator,
                "target": GENERATORS[options.generator].target,
                "seed": options.seed,
                "inputs": campaign.inputs,
                "stopped_early": campaign.stopped,
                "failures": campaign.failures,
                "failure_kinds": kinds,
                "wall_s": round(elapsed, 1),
                "mean_input_bytes": round(campaign.input_bytes / max(1, campaign.inputs)),
                "slowest_input": {
                    "number": campaign.slowest_number,
                    "bytes": campaign.slowest_size,
                    "cpu_s": round(campaign.slowest_cpu, 3),
                    "wall_s": round(campaign.slowest_wall, 3),
                },
            },
            indent=1,
        )
    )
    return 1 if campaign.failures else 0


if __name__ == "__main__":
    sys.exit(main())
