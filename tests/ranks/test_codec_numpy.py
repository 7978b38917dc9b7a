"""The message format's numpy values: arrays and scalars round-trip, other dtypes are refused.

numpy is no requirement of rankscribe.ranks (the ``ranks`` tox env installs none, and
these tests do not run there); every env that installs the writer runs them.
"""

from __future__ import annotations

from typing import Any

import pytest

# private: the data-only message codec
from rankscribe.ranks._codec import decode, encode  # the codec has no public door
from rankscribe.ranks.errors import MessageError, RanksTypeError

np = pytest.importorskip("numpy", reason="numpy is not installed: ranks alone needs none")


@pytest.mark.parametrize(
    "value",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(3, dtype=">i4"),  # big-endian: arrives with the same values
        np.arange(10)[::3],  # not contiguous
        np.zeros((0, 5)),
        np.array(3.0),
        np.array([True, False]),
        np.array([1 + 2j]),
    ],
)
def test_numpy_arrays_round_trip_writable(value: Any) -> None:
    back = decode(encode(value))
    assert isinstance(back, np.ndarray) and back.shape == value.shape
    assert back.dtype.kind == value.dtype.kind and back.dtype.itemsize == value.dtype.itemsize
    np.testing.assert_array_equal(back, value)
    assert back.flags.writeable


def test_numpy_scalars_keep_their_dtype() -> None:
    back = decode(encode([np.float64(2.5), np.int8(-3)]))
    assert repr(back) == "[np.float64(2.5), np.int8(-3)]"


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (np.array(["text"]), "a numpy ndarray of dtype <U4 (numeric and boolean dtypes are data)"),
        (np.array([None], dtype=object), "a numpy ndarray of dtype object"),
    ],
)
def test_arrays_that_are_not_data_are_refused(value: object, where: str) -> None:
    with pytest.raises(RanksTypeError) as caught:
        encode(value)
    assert where in str(caught.value)


def test_an_array_claiming_more_items_than_it_holds_is_a_message_error() -> None:
    message = b"RSM1n\x03<f8\x01" + (2**40).to_bytes(8, "little") + bytes(8)
    with pytest.raises(MessageError, match="does not take 0 bytes"):
        decode(message)
