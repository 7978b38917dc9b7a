"""The MPI backend's wire format: chunk plans under MPI's int count limit, and headers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

# private: the MPI message header and chunking, a codec
from rankscribe.ranks.backends._message import (
    DEFAULT_CHUNK_BYTES,
    HEADER_SIZE,
    MPI_COUNT_LIMIT,
    Header,
    Operation,
    chunk_spans,
)
from rankscribe.ranks.errors import CollectiveMismatchError, RanksValueError

GiB = 1 << 30


def test_a_3_gib_pickle_goes_as_chunks_each_within_the_count_limit() -> None:
    size = 3 * GiB + 57  # a 3 GiB array plus its pickle framing
    spans = chunk_spans(size)
    assert len(spans) == 4
    assert all(stop - start <= DEFAULT_CHUNK_BYTES < MPI_COUNT_LIMIT for start, stop in spans)
    assert spans[0][0] == 0 and spans[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def test_default_chunk_is_half_the_limit() -> None:
    assert MPI_COUNT_LIMIT == 2_147_483_647
    assert DEFAULT_CHUNK_BYTES * 2 == MPI_COUNT_LIMIT + 1


@st.composite
def sizes_and_chunks(draw: st.DrawFn) -> tuple[int, int]:
    """A payload size up to 64 GiB and a chunk size that cuts it into at most 2,000 chunks."""
    size = draw(st.integers(min_value=0, max_value=64 * GiB))
    chunk = draw(st.integers(min_value=max(1, -(-size // 2000)), max_value=MPI_COUNT_LIMIT))
    return size, chunk


@given(sizes_and_chunks())
def test_spans_tile_the_payload(size_and_chunk: tuple[int, int]) -> None:
    size, chunk = size_and_chunk
    spans = chunk_spans(size, chunk)
    assert sum(stop - start for start, stop in spans) == size
    assert all(0 < stop - start <= chunk for start, stop in spans)
    assert [start for start, _ in spans] == list(range(0, size, chunk))


@pytest.mark.parametrize("chunk", [0, -1, MPI_COUNT_LIMIT + 1, 4 * GiB])
def test_chunk_size_must_fit_one_mpi_message(chunk: int) -> None:
    with pytest.raises(RanksValueError, match=r"chunk_size must be in 1\.\.2,147,483,647"):
        chunk_spans(10, chunk)


def test_header_round_trip() -> None:
    header = Header(Operation.GATHER, 12345, 3 * GiB + 57, GiB)
    packed = header.pack()
    assert len(packed) == HEADER_SIZE == 32
    assert Header.unpack(packed, source=1) == header


def test_header_of_another_collective_is_a_mismatch() -> None:
    header = Header(Operation.BCAST, 7, 10, GiB)
    with pytest.raises(CollectiveMismatchError, match=r"rank 2 sent bcast #7 while .* gather #7"):
        header.expect(Operation.GATHER, 7, source=2)
    with pytest.raises(CollectiveMismatchError, match=r"bcast #7 while this rank is in bcast #8"):
        header.expect(Operation.BCAST, 8, source=2)


def test_foreign_bytes_are_not_a_header() -> None:
    with pytest.raises(CollectiveMismatchError, match=r"not a rankscribe\.ranks header"):
        Header.unpack(b"\x00" * HEADER_SIZE, source=3)
