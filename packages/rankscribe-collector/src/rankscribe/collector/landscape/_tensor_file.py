"""A landscape parameter file's bytes, laid out on the training thread, joined on the writer's.

A landscape file is a safetensors file: an 8-byte little-endian header length,
a JSON header naming each tensor's dtype, shape and byte range, padded with
spaces to a multiple of 8, then the tensors' bytes one after the other.
``safetensors.numpy.save`` builds all of it as one ``bytes`` object: on the
training thread that is two copies of every parameter (12-15 ms for the
12 MB of a 1,408-wide MLP, 19 times in a default run). Here the training
thread lays out the header from the arrays' dtypes and shapes (the budget
decides on the file's size before anything is copied), then makes one copy of
each parameter it keeps (the set must be the one of that step); the writer
thread writes the header and the copies' buffers as they are, with no
serialisation in between.

The layout is the library's own: tensors sorted by dtype (the library's order,
widest first) then by name, the JSON compact, so a file is byte-for-byte what
``safetensors.numpy.save`` would write for the same tensors
(tests/collector/test_landscape_files.py).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Layout", "TensorFile", "blank_arrays", "tensor_file"]

#: Each tensor's shape and stored dtype (little-endian), in the file's order: what the
#: arrays a set is copied into must be.
Layout = tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]
#: Bytes between two writes that make :func:`blank_arrays` touch every page (4 KiB pages,
#: and larger ones are multiples of them).
_PAGE = 4096

#: safetensors' dtype codes for NumPy's dtypes, in the library's order (it writes the
#: later ones first).
_DTYPES = (
    ("bool", "BOOL"),
    ("uint8", "U8"),
    ("int8", "I8"),
    ("int16", "I16"),
    ("uint16", "U16"),
    ("float16", "F16"),
    ("int32", "I32"),
    ("uint32", "U32"),
    ("float32", "F32"),
    ("complex64", "C64"),
    ("float64", "F64"),
    ("int64", "I64"),
    ("uint64", "U64"),
)
_CODE = {name: code for name, code in _DTYPES}
_ORDER = {name: index for index, (name, _) in enumerate(_DTYPES)}


class TensorFile:
    """One file's layout (its header and size, known before anything is copied); :meth:`copy`
    takes the tensors' own copies and :meth:`chunks` gives what to write."""

    def __init__(self, header: bytes, arrays: list[npt.NDArray[Any]]) -> None:
        self.header = header
        self._arrays = arrays
        #: The file's size in bytes.
        self.size = len(header) + sum(array.nbytes for array in arrays)

    @property
    def layout(self) -> Layout:
        """The shapes and stored dtypes of the tensors' copies (:data:`Layout`)."""
        return tuple((array.shape, array.dtype.newbyteorder("<")) for array in self._arrays)

    @property
    def arrays(self) -> list[npt.NDArray[Any]]:
        """The tensors: after :meth:`copy`, the file's own copies."""
        return self._arrays

    def copy(self, into: list[npt.NDArray[Any]] | None = None) -> None:
        """Copy the tensors (little-endian, C order): the set stays the one of this step
        while the network trains on. ``into``: arrays of :attr:`layout` to copy into (an
        earlier set's, written already, or :func:`blank_arrays`) instead of new ones."""
        if into is None:
            self._arrays = [
                np.array(array, dtype=array.dtype.newbyteorder("<"), order="C", copy=True)
                for array in self._arrays
            ]
            return
        for target, array in zip(into, self._arrays, strict=True):
            np.copyto(target, array, casting="equiv")
        self._arrays = into

    def chunks(self) -> list[bytes | memoryview]:
        """The file's bytes in order: the header, then each tensor's buffer (no copy; before
        :meth:`copy` the buffers are the network's own)."""
        parts: list[bytes | memoryview] = [self.header]
        parts.extend(memoryview(array.reshape(-1).view(np.uint8).data) for array in self._arrays)
        return parts


def blank_arrays(layout: Layout) -> list[npt.NDArray[Any]]:
    """New arrays of ``layout`` whose every page has been written once, so that a copy into
    them finds its memory ready. Made off the training thread: where the machine hands
    out memory at its first touch (a virtual machine's host), the first copy of a 20 MB
    set into new arrays took the training thread 96-100 ms, and 2.5 ms into these."""
    arrays = [np.empty(shape, dtype) for shape, dtype in layout]
    for array in arrays:
        array.reshape(-1).view(np.uint8)[::_PAGE] = 0
    return arrays


def tensor_file(named: Sequence[tuple[str, npt.NDArray[Any]]]) -> TensorFile:
    """Lay out the file of ``named``'s arrays (nothing copied yet: :meth:`TensorFile.copy`).

    Raises ``ValueError`` for a name given twice and ``TypeError`` for a dtype the
    format cannot hold (naming the parameter).
    """
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, array in named:
        if name in tensors:
            raise ValueError(f"the parameter name {name!r} is given twice")
        if array.dtype.name not in _CODE:
            raise TypeError(
                f"parameter {name!r} has dtype {array.dtype}, which a landscape file cannot "
                f"hold; the dtypes it holds: {', '.join(name for name, _ in _DTYPES)}"
            )
        tensors[name] = array
    ordered = sorted(tensors, key=lambda name: (-_ORDER[tensors[name].dtype.name], name))
    layout: dict[str, object] = {}
    offset = 0
    for name in ordered:
        array = tensors[name]
        layout[name] = {
            "dtype": _CODE[array.dtype.name],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    text = json.dumps(layout, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-(len(text) + 8) % 8)
    header = struct.pack("<Q", len(text)) + text
    return TensorFile(header, [tensors[name] for name in ordered])
