"""Record framing: the TFRecord layout, both CRCs, torn tails and corruption."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.writer.errors import CorruptRecordError
from rankscribe.writer.files import RECORD_OVERHEAD, RecordReader, frame, read_records
from tests._support.crc import crc32c, masked_crc32c


def test_the_oracle_has_crc32cs_check_value():
    assert crc32c(b"123456789") == 0xE3069283


@given(st.binary(max_size=64))
def test_both_crcs_are_the_masked_crc32c_of_what_they_cover(payload):
    # The mask: rotate right by 15 bits, add 0xA282EAD8 (docs/file-format.md).
    record = frame(payload)
    length, length_crc = struct.unpack("<QI", record[:12])
    assert length == len(payload) and length_crc == masked_crc32c(record[:8])
    assert struct.unpack("<I", record[-4:])[0] == masked_crc32c(payload)


def test_version_event_header_matches_the_original_bytes():
    # docs/file-format.md: a 28-byte version event starts with 1c00000000000000 c8c1951d.
    record = frame(b"\0" * 28)
    assert record[:12].hex() == "1c00000000000000c8c1951d"
    assert len(record) == 28 + RECORD_OVERHEAD


@given(st.lists(st.binary(max_size=300), max_size=8))
def test_framed_payloads_read_back_in_order(payloads):
    data = b"".join(frame(p) for p in payloads)
    assert list(read_records(io.BytesIO(data))) == payloads


@given(st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=5), st.data())
def test_any_truncation_is_a_torn_tail_with_earlier_records_intact(payloads, data):
    blob = b"".join(frame(p) for p in payloads)
    cut = data.draw(st.integers(min_value=1, max_value=len(blob) - 1))
    reader = RecordReader(io.BytesIO(blob[:cut]))
    got = [r.payload for r in reader]
    assert got == payloads[: len(got)]
    boundaries = {0}
    position = 0
    for p in payloads:
        position += len(p) + RECORD_OVERHEAD
        boundaries.add(position)
    if cut in boundaries:
        assert reader.torn_tail is None
    else:
        assert reader.torn_tail is not None
        assert reader.torn_tail.offset == sum(len(p) + RECORD_OVERHEAD for p in got)


def test_payload_corruption_in_the_middle_raises_in_strict_mode():
    blob = bytearray(frame(b"first") + frame(b"second") + frame(b"third"))
    blob[len(frame(b"first")) + 12] ^= 0xFF  # flip a payload byte of "second"
    with pytest.raises(CorruptRecordError, match=r"at byte 21: payload CRC mismatch"):
        list(read_records(io.BytesIO(bytes(blob))))


def test_payload_corruption_is_skipped_when_not_strict():
    blob = bytearray(frame(b"first") + frame(b"second") + frame(b"third"))
    blob[len(frame(b"first")) + 12] ^= 0xFF
    reader = RecordReader(io.BytesIO(bytes(blob)), strict=False)
    assert [r.payload for r in reader] == [b"first", b"third"]
    assert [c.offset for c in reader.corruptions] == [21]


def test_length_corruption_stops_a_lenient_reader():
    blob = bytearray(frame(b"first") + frame(b"second"))
    blob[len(frame(b"first"))] ^= 0x01
    reader = RecordReader(io.BytesIO(bytes(blob)), strict=False)
    assert [r.payload for r in reader] == [b"first"]
    assert "length CRC mismatch" in str(reader.corruptions[0])


def test_masked_crc_is_stored_little_endian():
    record = frame(b"abc")
    assert struct.unpack("<I", record[-4:])[0] == masked_crc32c(b"abc")


def _huge_length_header(length: int) -> bytes:
    length_bytes = struct.pack("<Q", length)
    return length_bytes + struct.pack("<I", masked_crc32c(length_bytes))


class _MeteredStream(io.BytesIO):
    """A stream that fails the test if asked for more than 64 MiB in one read."""

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None and 0 <= size <= 64 << 20, f"read({size}) would over-allocate"
        return super().read(size)


@pytest.mark.parametrize("length", [2**31, 2**40, 2**64 - 1])
def test_a_length_no_record_can_have_is_corruption_in_strict_mode(length):
    blob = frame(b"first") + _huge_length_header(length) + b"\0" * 32
    with pytest.raises(CorruptRecordError, match=r"at byte 21: length field .* exceeds"):
        list(read_records(_MeteredStream(blob)))


@pytest.mark.parametrize("length", [2**31, 2**40, 2**64 - 1])
def test_a_length_no_record_can_have_stops_a_lenient_reader(length):
    reader = RecordReader(
        _MeteredStream(frame(b"first") + _huge_length_header(length)), strict=False
    )
    assert [r.payload for r in reader] == [b"first"]
    assert [c.offset for c in reader.corruptions] == [21]
    assert reader.torn_tail is None


def test_a_plausible_length_beyond_the_end_is_read_in_bounded_pieces(tmp_path):
    # 2 GiB - 1 could be a real record cut short by a crash: a torn tail, and
    # the reader asks for no more than one bounded piece at a time.
    blob = frame(b"first") + _huge_length_header(2**31 - 1) + b"\0" * 100
    reader = RecordReader(_MeteredStream(blob))
    assert [r.payload for r in reader] == [b"first"]
    assert reader.torn_tail is not None and reader.torn_tail.offset == 21
