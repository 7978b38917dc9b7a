"""The data-only format of the objects ranks send each other.

A file in a rendezvous folder or a value in a key-value store may have been
written by someone other than the job's own ranks (a TCP store accepts any
client; a shared folder any user with write access), so what a rank reads is
never unpickled: it is decoded from this format, which describes data and
nothing else. Nothing in it names a type to import or a function to call, so
no input can run code; a malformed input is a :class:`MessageError`.

A message is ``b"RSM1"`` followed by one value; each value is a one-byte tag
and its body (integers little-endian, lengths u64)::

    N None       T True      F False
    q int (i64)              I int (u32 length, signed little-endian bytes)
    d float (f64)            s str (length, UTF-8)     b bytes (length, data)
    l list, t tuple, S set, f frozenset (count, values)
    m dict (count, key and value pairs)
    a array.array (typecode, item size, length, little-endian items)
    n numpy array (dtype, ndim, each dimension, length, C-order items)
    g numpy scalar (dtype, length, item)

numpy arrays and scalars are those of numeric and boolean dtypes (kinds
``b i u f c``). Subclasses of these types arrive as the base type (an
``OrderedDict`` as a ``dict``, an ``IntEnum`` as an ``int``). See
``docs/layout.md``.

Decoding is bounded by the message: every length is checked against the bytes
that are left before anything is allocated, nesting is at most
:data:`MAX_DEPTH` levels and an integer at most :data:`MAX_INT_BYTES` bytes, and
at most 32 keys of a dict or members of a set share a hash (more would make
decoding take time quadratic in the message). Decoding takes time linear in the
message.
"""

from __future__ import annotations

import array
import re
import struct
import sys
from typing import Any

from rankscribe.ranks.errors import MessageError, RanksTypeError

__all__ = ["MAGIC", "MAX_DEPTH", "MAX_INT_BYTES", "decode", "encode"]

MAGIC = b"RSM1"
#: Containers nested deeper than this are refused both ways (a recursion bound).
MAX_DEPTH = 100
#: Largest integer outside int64, in bytes of its two's complement form.
MAX_INT_BYTES = 1024

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_INT64_RANGE = range(-(2**63), 2**63)
_ARRAY_TYPECODES = frozenset("bBhHiIlLqQfd")
_MAX_NDIM = 64
# Keys of one dict or members of one set that may share a hash. Inserting keys of one hash
# takes time quadratic in their count, and a sender makes any number of them share one
# (an int's hash is its value modulo 2**61 - 1; a tuple's follows from its items' hashes);
# values that differ share a hash by chance almost never.
_MOST_SHARING_A_HASH = 32
# The only numpy dtypes sent: byte order, a numeric or boolean kind, an item size.
_NUMPY_DTYPE = re.compile(r"[<>|][biufc][0-9]{1,2}", re.ASCII)
_SUPPORTED = (
    "None, bool, int, float, str, bytes, list, tuple, set, frozenset, dict, "
    "array.array and numpy arrays or scalars of numeric or boolean dtype"
)
_SEQUENCE_TAGS = ((tuple, b"t"), (list, b"l"), (frozenset, b"f"), (set, b"S"))


def encode(obj: object) -> bytearray:
    """``obj`` as a message; :class:`RanksTypeError` naming where an unsupported value sits."""
    out = bytearray(MAGIC)
    try:
        _encode(obj, out, 0)
    except _UnsupportedError as error:
        where = "the object" + "".join(f"[{key!r}]" for key in reversed(error.path))
        raise RanksTypeError(f"{where[:300]} {error.problem}") from None
    return out


def decode(data: bytes | bytearray | memoryview) -> Any:
    """The value a message holds; :class:`MessageError` if it is not a whole, valid message."""
    view = memoryview(data).cast("B")
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise MessageError(
            f"not a rankscribe.ranks message (it starts with {bytes(view[:8])!r}, "
            f"expected {MAGIC!r})"
        )
    reader = _Reader(view, len(MAGIC))
    value = reader.value(0)
    if reader.position != len(view):
        raise MessageError(
            f"{len(view) - reader.position} byte(s) follow the value at byte {reader.position}"
        )
    return value


# -- encoding ------------------------------------------------------------------------


class _UnsupportedError(Exception):
    """A value that is not data; ``path`` is filled in, innermost key first, on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[object] = []


def _encode(obj: object, out: bytearray, depth: int) -> None:
    # The exact common types first: a lineage record is mostly these, and this path is
    # several times faster than the isinstance chain below (which takes subclasses).
    kind = type(obj)
    if kind is str:
        data = obj.encode("utf-8", "surrogatepass")  # type: ignore[attr-defined]
        out += b"s" + _U64.pack(len(data))
        out += data
        return
    if kind is float:
        out += b"d" + _F64.pack(obj)
        return
    if kind is int and -(2**63) <= obj < 2**63:  # type: ignore[operator]
        out += b"q" + _I64.pack(obj)
        return
    if depth > MAX_DEPTH:
        raise _UnsupportedError(f"is nested deeper than {MAX_DEPTH} levels")
    numpy = sys.modules.get("numpy")
    if obj is None:
        out += b"N"
    elif obj is True or obj is False:
        out += b"T" if obj else b"F"
    elif numpy is not None and isinstance(obj, (numpy.ndarray, numpy.generic)):
        _encode_numpy(numpy, obj, out)
    elif isinstance(obj, int):
        _encode_int(int(obj), out)
    elif isinstance(obj, float):
        out += b"d" + _F64.pack(obj)
    elif isinstance(obj, str):
        _encode_bytes(b"s", obj.encode("utf-8", "surrogatepass"), out)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        _encode_bytes(b"b", memoryview(obj).cast("B"), out)
    else:
        _encode_container(obj, out, depth)


def _encode_container(obj: object, out: bytearray, depth: int) -> None:
    if isinstance(obj, (list, tuple, set, frozenset)):
        out += next(tag for kind, tag in _SEQUENCE_TAGS if isinstance(obj, kind))
        out += _U64.pack(len(obj))
        for index, item in enumerate(obj):
            try:
                _encode(item, out, depth + 1)
            except _UnsupportedError as error:
                error.path.append(index)
                raise
    elif isinstance(obj, dict):
        out += b"m" + _U64.pack(len(obj))
        for key, value in obj.items():
            try:
                _encode(key, out, depth + 1)
                _encode(value, out, depth + 1)
            except _UnsupportedError as error:
                error.path.append(key)
                raise
    elif isinstance(obj, array.array) and obj.typecode in _ARRAY_TYPECODES:
        items = obj if sys.byteorder == "little" else _swapped(obj)
        out += b"a" + obj.typecode.encode("ascii") + _U8.pack(obj.itemsize)
        _encode_bytes(b"", memoryview(items).cast("B"), out)
    else:
        raise _UnsupportedError(
            f"cannot be sent to another rank: {type(obj).__name__} is not data ({_SUPPORTED} are)"
        )


def _encode_int(value: int, out: bytearray) -> None:
    if value in _INT64_RANGE:
        out += b"q" + _I64.pack(value)
        return
    size = (value.bit_length() + 8) // 8
    if size > MAX_INT_BYTES:
        raise _UnsupportedError(f"is an int of {size} bytes, more than {MAX_INT_BYTES}")
    out += b"I" + _U32.pack(size) + value.to_bytes(size, "little", signed=True)


def _encode_bytes(tag: bytes, data: bytes | memoryview, out: bytearray) -> None:
    out += tag + _U64.pack(len(data))
    out += data


def _swapped(items: array.array[Any]) -> array.array[Any]:
    copy = array.array(items.typecode, items)
    copy.byteswap()
    return copy


def _encode_numpy(numpy: Any, obj: Any, out: bytearray) -> None:
    dtype = obj.dtype
    if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        raise _UnsupportedError(
            f"cannot be sent to another rank: a numpy {type(obj).__name__} of dtype "
            f"{dtype} (numeric and boolean dtypes are data)"
        )
    little = (
        dtype.newbyteorder("<")
        if dtype.byteorder not in "|<=" or (dtype.byteorder == "=" and sys.byteorder != "little")
        else dtype
    )
    items = numpy.asarray(obj, dtype=little, order="C")
    name = items.dtype.str.encode("ascii")
    if isinstance(obj, numpy.generic):
        out += b"g" + _U8.pack(len(name)) + name
    else:
        out += b"n" + _U8.pack(len(name)) + name + _U8.pack(items.ndim)
        out += b"".join(_U64.pack(size) for size in items.shape)
    _encode_bytes(b"", memoryview(items.reshape(-1)).cast("B"), out)


# -- decoding ------------------------------------------------------------------------


class _Reader:
    """Reads values from ``view``, checking every length against what is left."""

    def __init__(self, view: memoryview, position: int) -> None:
        self.view = view
        self.position = position

    def take(self, size: int, what: str) -> memoryview:
        end = self.position + size
        if size < 0 or end > len(self.view):
            raise MessageError(
                f"{what} at byte {self.position} needs {size} byte(s), "
                f"{len(self.view) - self.position} are left"
            )
        chunk = self.view[self.position : end]
        self.position = end
        return chunk

    def unpack(self, layout: struct.Struct, what: str) -> Any:
        return layout.unpack(self.take(layout.size, what))[0]

    def length(self, what: str) -> int:
        size: int = self.unpack(_U64, what)
        if size > len(self.view) - self.position:
            raise MessageError(
                f"{what} at byte {self.position} claims {size} item(s) or byte(s), "
                f"{len(self.view) - self.position} byte(s) are left"
            )
        return size

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise MessageError(f"values nested deeper than {MAX_DEPTH} levels")
        position = self.position
        if position < len(self.view):
            # The common scalars inline: a lineage record is mostly these.
            code = self.view[position]
            if code == 0x64 and position + 9 <= len(self.view):  # d: float
                self.position = position + 9
                return _F64.unpack_from(self.view, position + 1)[0]
            if code == 0x71 and position + 9 <= len(self.view):  # q: int
                self.position = position + 9
                return _I64.unpack_from(self.view, position + 1)[0]
        tag = bytes(self.take(1, "a value's tag"))
        decoder = _DECODERS.get(tag)
        if decoder is None:
            raise MessageError(f"unknown value tag {tag!r} at byte {self.position - 1}")
        return decoder(self, depth)

    def items(self, depth: int) -> list[Any]:
        count = self.length("a list's length")
        value, inner = self.value, depth + 1
        return [value(inner) for _ in range(count)]

    def members(self, depth: int) -> list[Any]:
        """The items of a set: each must be hashable, and few may share a hash."""
        items = self.items(depth)
        hashes: dict[int, int] = {}
        for item in items:
            try:
                _count_hash(hashes, item, "a set's members")
            except TypeError:
                raise MessageError(
                    f"a set holds a {type(item).__name__}, which cannot be in a set"
                ) from None
        return items

    def mapping(self, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        hashes: dict[int, int] = {}
        for _ in range(self.length("a dict's length")):
            key = self.value(depth + 1)
            try:
                _count_hash(hashes, key, "a dict's keys")
            except TypeError:
                raise MessageError(
                    f"a dict key is a {type(key).__name__}, which cannot be a key"
                ) from None
            result[key] = self.value(depth + 1)
        return result

    def text(self) -> str:
        data = self.take(self.length("a str's length"), "a str")
        try:
            return str(data, "utf-8", "surrogatepass")
        except UnicodeDecodeError as error:
            raise MessageError(f"a str is not UTF-8: {error}") from None

    def big_int(self) -> int:
        size: int = self.unpack(_U32, "an int's length")
        if size > MAX_INT_BYTES:
            raise MessageError(f"an int of {size} bytes, more than {MAX_INT_BYTES}")
        return int.from_bytes(self.take(size, "an int"), "little", signed=True)

    def array(self) -> array.array[Any]:
        typecode = bytes(self.take(1, "an array's typecode")).decode("latin-1")
        itemsize: int = self.unpack(_U8, "an array's item size")
        if typecode not in _ARRAY_TYPECODES:
            raise MessageError(
                f"array typecode {typecode!r} is not one of {''.join(sorted(_ARRAY_TYPECODES))}"
            )
        items = array.array(typecode)
        if items.itemsize != itemsize:
            raise MessageError(
                f"array typecode {typecode!r} has {itemsize}-byte items there "
                f"and {items.itemsize}-byte items here"
            )
        data = self.take(self.length("an array's length"), "an array")
        if len(data) % itemsize:
            raise MessageError(f"an array of {len(data)} bytes is not whole {itemsize}-byte items")
        items.frombytes(data)
        if sys.byteorder != "little":
            items.byteswap()
        return items

    def numpy_value(self, scalar: bool) -> Any:
        name = bytes(self.take(self.unpack(_U8, "a dtype's length"), "a dtype")).decode("latin-1")
        if not _NUMPY_DTYPE.fullmatch(name):
            raise MessageError(f"numpy dtype {name!r} is not a numeric or boolean one")
        try:
            import numpy  # noqa: PLC0415 - only a message that holds an array needs it
        except ImportError:  # numpy is no requirement of this package
            raise MessageError(f"a numpy {name} arrived, but numpy is not installed here") from None
        dtype = numpy.dtype(name)
        shape: tuple[int, ...] = ()
        if not scalar:
            ndim = self.unpack(_U8, "an array's ndim")
            if ndim > _MAX_NDIM:
                raise MessageError(f"an array of {ndim} dimensions, more than {_MAX_NDIM}")
            shape = tuple(self.unpack(_U64, "an array dimension") for _ in range(ndim))
        data = self.take(self.length("an array's length"), "an array's items")
        count = 1
        for size in shape:
            count *= size
        if count * dtype.itemsize != len(data):
            raise MessageError(
                f"an array of shape {shape} and dtype {name} does not take {len(data)} bytes"
            )
        items = numpy.frombuffer(data, dtype=dtype).copy()
        return items[0] if scalar else items.reshape(shape)


def _count_hash(hashes: dict[int, int], value: Any, what: str) -> None:
    """Count ``value``'s hash in ``hashes``; :class:`MessageError` past ``_MOST_SHARING_A_HASH``.

    ``TypeError`` when ``value`` has no hash. A hash is an int below 2**61 in size, whose
    own hash is itself: ``hashes`` never holds two keys of one hash.
    """
    value_hash = hash(value)
    shared = hashes.get(value_hash, 0) + 1
    if shared > _MOST_SHARING_A_HASH:
        raise MessageError(f"more than {_MOST_SHARING_A_HASH} of {what} share one hash")
    hashes[value_hash] = shared


_DECODERS: dict[bytes, Any] = {
    b"N": lambda reader, depth: None,
    b"T": lambda reader, depth: True,
    b"F": lambda reader, depth: False,
    b"q": lambda reader, depth: reader.unpack(_I64, "an int"),
    b"I": lambda reader, depth: reader.big_int(),
    b"d": lambda reader, depth: reader.unpack(_F64, "a float"),
    b"s": lambda reader, depth: reader.text(),
    b"b": lambda reader, depth: bytes(reader.take(reader.length("a bytes' length"), "bytes")),
    b"l": lambda reader, depth: reader.items(depth),
    b"t": lambda reader, depth: tuple(reader.items(depth)),
    b"S": lambda reader, depth: set(reader.members(depth)),
    b"f": lambda reader, depth: frozenset(reader.members(depth)),
    b"m": lambda reader, depth: reader.mapping(depth),
    b"a": lambda reader, depth: reader.array(),
    b"n": lambda reader, depth: reader.numpy_value(scalar=False),
    b"g": lambda reader, depth: reader.numpy_value(scalar=True),
}
