"""The data-only message format: what round-trips, what is refused, and that nothing runs.

numpy is no requirement of rankscribe.ranks (the ``ranks`` tox env installs none): the
numpy values' tests skip there, and every env that installs the writer runs them.
"""

from __future__ import annotations

import array
import itertools
import math
import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.ranks.errors import MessageError, RanksTypeError

# private: the data-only message codec
from rankscribe.ranks.messages._codec import MAX_DEPTH, decode, encode
from tests._support.growth import assert_linear

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
keys = st.one_of(st.text(), st.integers(), st.tuples(st.text(), st.integers()))
data = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner),
        st.tuples(inner, inner),
        st.dictionaries(keys, inner),
        st.sets(keys),
        st.frozensets(keys),
    ),
    max_leaves=30,
)


@given(data)
def test_data_round_trips_with_its_types(value: Any) -> None:
    back = decode(encode(value))
    assert back == value
    assert type(back) is type(value)


def test_the_collectors_payload_round_trips() -> None:
    payload = {
        "lineage": {
            "summary_dir": "runs/exp1",
            "loss": 0.25,
            "device_num": 2,
            "metric": {"accuracy": 0.9},
            "nan": math.nan,
            "inf": -math.inf,
        },
        "series": {"loss": (array.array("q", [1, 2, 2**62]), array.array("f", [0.5, 0.25, 1.0]))},
    }
    back = decode(encode(payload))
    steps, values = back["series"]["loss"]
    assert isinstance(steps, array.array) and steps.typecode == "q"
    assert list(steps) == [1, 2, 2**62] and list(values) == [0.5, 0.25, 1.0]
    assert math.isnan(back["lineage"]["nan"]) and back["lineage"]["inf"] == -math.inf
    assert back["lineage"]["metric"] == {"accuracy": 0.9}


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (object(), "the object cannot be sent to another rank: object is not data"),
        (
            {"a": [1, {"b": Path("x")}]},
            "the object['a'][1]['b'] cannot be sent to another rank: PosixPath is not data",
        ),
        (2**10000, "is an int of 1251 bytes, more than 1024"),
    ],
)
def test_what_is_not_data_is_refused_naming_where_it_sits(value: object, where: str) -> None:
    with pytest.raises(RanksTypeError) as caught:
        encode(value)
    assert where in str(caught.value)


def test_nesting_is_bounded_both_ways() -> None:
    nested: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        nested = [nested]
    with pytest.raises(RanksTypeError, match="nested deeper than"):
        encode(nested)
    deep = b"RSM1" + b"l\x01\x00\x00\x00\x00\x00\x00\x00" * (MAX_DEPTH + 5) + b"N"
    with pytest.raises(MessageError, match="nested deeper than"):
        decode(deep)


def test_an_array_where_numpy_is_not_installed_is_a_message_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # numpy is no requirement of ranks: a rank without it refuses an array it is sent.
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` fails, as without it
    message = b"RSM1n\x03<f8\x01" + (1).to_bytes(8, "little") + (8).to_bytes(8, "little")
    with pytest.raises(MessageError, match="a numpy <f8 arrived, but numpy is not installed here"):
        decode(message + bytes(8))


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"", "not a rankscribe.ranks message"),
        (b"RSM1", "a value's tag at byte 4 needs 1 byte(s), 0 are left"),
        (b"RSM1X", "unknown value tag b'X'"),
        (b"RSM1N\x00", "1 byte(s) follow the value"),
        (b"RSM1l" + b"\xff" * 8, "claims 18446744073709551615 item(s)"),
        (b"RSM1s\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe", "a str is not UTF-8"),
        (
            b"RSM1m\x01\x00\x00\x00\x00\x00\x00\x00l\x00\x00\x00\x00\x00\x00\x00\x00N",
            "a dict key is a list",
        ),
        (b"RSM1n\x03|O8\x00\x00\x00\x00\x00\x00\x00\x00\x00", "numpy dtype '|O8' is not"),
        (b"RSM1aw\x04" + bytes(8), "array typecode 'w' is not one of"),
        (
            b"RSM1S\x01\x00\x00\x00\x00\x00\x00\x00l\x00\x00\x00\x00\x00\x00\x00\x00",
            "a set holds a list",
        ),
    ],
)
def test_malformed_messages_are_message_errors(message: bytes, error: str) -> None:
    with pytest.raises(MessageError) as caught:
        decode(message)
    assert error in str(caught.value)
    assert isinstance(caught.value, ValueError)


class Planted:
    """Unpickling this would create the marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    planted = pickle.dumps(Planted(str(marker)))
    for message in (
        planted,
        b"RSM1" + planted,
        b"RSM1b" + len(planted).to_bytes(8, "little") + planted,
    ):
        try:
            value = decode(message)
        except MessageError:
            continue
        assert value == planted  # carried as bytes, never loaded
    assert not marker.exists()


def numpy_or_skip() -> Any:
    return pytest.importorskip("numpy", reason="numpy is not installed: ranks alone needs none")


NUMPY_VALUES: dict[str, Any] = {
    "float32 matrix": lambda np: np.arange(12, dtype=np.float32).reshape(3, 4),
    "big-endian": lambda np: np.arange(3, dtype=">i4"),  # arrives with the same values
    "not contiguous": lambda np: np.arange(10)[::3],
    "empty": lambda np: np.zeros((0, 5)),
    "0-d": lambda np: np.array(3.0),
    "bool": lambda np: np.array([True, False]),
    "complex": lambda np: np.array([1 + 2j]),
}


@pytest.mark.parametrize("make", NUMPY_VALUES.values(), ids=list(NUMPY_VALUES))
def test_numpy_arrays_round_trip_writable(make: Any) -> None:
    np = numpy_or_skip()
    value = make(np)
    back = decode(encode(value))
    assert isinstance(back, np.ndarray) and back.shape == value.shape
    assert back.dtype.kind == value.dtype.kind and back.dtype.itemsize == value.dtype.itemsize
    np.testing.assert_array_equal(back, value)
    assert back.flags.writeable


def test_numpy_scalars_keep_their_dtype() -> None:
    np = numpy_or_skip()
    back = decode(encode([np.float64(2.5), np.int8(-3)]))
    assert repr(back) == "[np.float64(2.5), np.int8(-3)]"


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (
            lambda np: np.array(["text"]),
            "a numpy ndarray of dtype <U4 (numeric and boolean dtypes are data)",
        ),
        (lambda np: np.array([None], dtype=object), "a numpy ndarray of dtype object"),
    ],
    ids=["text", "object"],
)
def test_numpy_arrays_that_are_not_data_are_refused(make: Any, where: str) -> None:
    value = make(numpy_or_skip())
    with pytest.raises(RanksTypeError) as caught:
        encode(value)
    assert where in str(caught.value)


def test_an_array_claiming_more_items_than_it_holds_is_a_message_error() -> None:
    numpy_or_skip()
    message = b"RSM1n\x03<f8\x01" + (2**40).to_bytes(8, "little") + bytes(8)
    with pytest.raises(MessageError, match="does not take 0 bytes"):
        decode(message)


# -- time linear in the message ------------------------------------------------------
# An int's hash is its value modulo this prime: its multiples all share the hash 0.
HASH_MODULUS = 2**61 - 1


def big_int(value: int) -> bytes:
    return b"I" + struct.pack("<I", 16) + value.to_bytes(16, "little", signed=True)


def colliding_dict(size: int) -> bytes:
    """A dict of ints that share one hash, written by hand (building it here is quadratic)."""
    count = size // 22
    keys = (big_int(HASH_MODULUS * index) + b"N" for index in range(1, count + 1))
    return b"RSM1m" + struct.pack("<Q", count) + b"".join(keys)


def colliding_tuple_set(size: int) -> bytes:
    """A set of tuples of int64s that share one hash, through their items' hashes."""
    same_hash = [index * HASH_MODULUS + 5 for index in range(4)]  # 4 ints, within int64
    items = [b"q" + struct.pack("<q", item) for item in same_hash]
    count = size // 99
    members = itertools.islice(itertools.product(items, repeat=10), count)
    body = b"".join(b"t" + struct.pack("<Q", 10) + b"".join(member) for member in members)
    return b"RSM1S" + struct.pack("<Q", count) + body


def many_floats(size: int) -> bytes | bytearray:
    return encode([[0.5] * 8] * (size // 90))


def deep_lists(size: int) -> bytes:
    one = encode([[[[[[[[[["deep" * 100]]]]]]]]]])[4:]
    count = size // len(one)
    return b"RSM1l" + struct.pack("<Q", count) + one * count


def many_keys(size: int) -> bytes | bytearray:
    return encode({f"{index:064d}": index for index in range(size // 90)})


def largest_ints(size: int) -> bytes | bytearray:
    return encode([-(2**8190)] * (size // 1029))


def decoded(message: bytes | bytearray) -> object:
    try:
        return decode(message)
    except MessageError:
        return None


@pytest.mark.growth
@pytest.mark.parametrize(
    "build",
    [colliding_dict, colliding_tuple_set, many_floats, deep_lists, many_keys, largest_ints],
)
def test_decoding_takes_time_linear_in_a_hostile_message(build: Any) -> None:
    assert_linear(decoded, build)


def test_keys_or_members_sharing_one_hash_are_refused_past_32() -> None:
    thirty_two = [HASH_MODULUS * index for index in range(1, 33)]
    assert decode(encode(dict.fromkeys(thirty_two))) == dict.fromkeys(thirty_two)
    assert decode(encode(set(thirty_two))) == set(thirty_two)
    with pytest.raises(MessageError, match="more than 32 of a dict's keys share one hash"):
        decode(colliding_dict(33 * 22))
    with pytest.raises(MessageError, match="more than 32 of a set's members share one hash"):
        decode(colliding_tuple_set(33 * 99))
