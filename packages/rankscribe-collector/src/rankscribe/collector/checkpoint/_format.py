"""The checkpoint file: safetensors tensors, append info, integrity digest, atomic writes.

A checkpoint is a standard safetensors file (no pickle: any safetensors reader
opens it) holding the network's parameters under their own names, with three
entries in the string-to-string ``__metadata__``:

- ``"format": "np"`` and ``"rankscribe.checkpoint": "2"`` (the layout version);
- ``"rankscribe.append_info"``: JSON object of the scalar append values (int,
  float, bool, str keep their JSON types, so ``epoch_num`` reads back an int);
- ``"rankscribe.append_tensors"``: JSON list of the append keys whose values are
  arrays; each is stored as a tensor named ``"__append_info__/<key>"`` (the
  reserved prefix no parameter may use), so arrays keep dtype and shape exactly;
- ``"rankscribe.sha256"``: SHA-256 over every other ``__metadata__`` entry
  (canonical JSON, keys sorted), then every tensor's name, dtype, shape and
  bytes in name order. safetensors has no checksum of its own; this makes a
  flipped byte in a plain file, in a weight or in the append info alike, an
  error instead of a silently wrong value.

Loading is strict about files that claim to be RankScribe checkpoints (any
``rankscribe.*`` metadata entry or ``__append_info__/`` tensor): the digest
must be present and match, and the layout version must be ``"2"``. Version
``"1"`` digested the tensors only; it was never released, and such a file is
refused with a message naming it (re-save it from the network). A safetensors
file with none of these entries (written by another program) loads as plain
tensors with empty append info. The digest detects corruption, not tampering:
whoever can rewrite the file can recompute it, which is what ``enc_key``'s
authenticated encryption is for.

With ``enc_key`` the whole file is sealed in the envelope of
:mod:`rankscribe.collector.checkpoint._crypto`.

Files are written to a hidden temporary file in the target directory, synced,
made read-only (0400, or 0440 with ``RANKSCRIBE_GROUP_READABLE=1``, see
``rankscribe.ranks.files.file_mode``) and renamed over the final name, so a crash at any point
leaves either the complete previous state or the complete new file under that
name, never a partial one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import safetensors.numpy
from safetensors import SafetensorError

from rankscribe.collector.adapters._parameters import network_parameters, to_numpy
from rankscribe.collector.checkpoint._config import (
    check_append_value,
    check_enc_key,
    check_enc_mode,
)
from rankscribe.collector.checkpoint._crypto import decrypt, encrypt_chunks, is_encrypted
from rankscribe.collector.errors import (
    CheckpointEncryptionError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointTypeError,
    CheckpointValueError,
    CheckpointWriteError,
)
from rankscribe.ranks.files import UnsafeFileError, atomic_write, file_mode, read_regular
from rankscribe.ranks.jsondata import JSONDataError, parse_json

__all__ = [
    "APPEND_TENSOR_PREFIX",
    "CHECKPOINT_SUFFIX",
    "LoadedCheckpoint",
    "checkpoint_parameters",
    "decode_checkpoint",
    "encode_checkpoint",
    "load_checkpoint",
    "prepare_append_info",
    "prepare_tensors",
    "save_checkpoint",
    "write_checkpoint_file",
]

logger = logging.getLogger(__name__)

CHECKPOINT_SUFFIX = ".ckpt"
APPEND_TENSOR_PREFIX = "__append_info__/"
_VERSION = "2"
# Never released: its digest covered the tensors but not the metadata.
_UNSUPPORTED_VERSIONS = {"1": "its digest does not cover the append info"}
_RANKSCRIBE_KEY_PREFIX = "rankscribe."
_KEY_VERSION = "rankscribe.checkpoint"
_KEY_APPEND = "rankscribe.append_info"
_KEY_APPEND_TENSORS = "rankscribe.append_tensors"
_KEY_DIGEST = "rankscribe.sha256"
# Data-parallel wrappers whose state_dict() prefixes every name with "module.".
_TORCH_WRAPPERS = frozenset({"DistributedDataParallel", "DataParallel"})
# What safetensors' NumPy binding can store (its F64 ... C64 table).
_STORABLE_DTYPES = frozenset(
    np.dtype(name)
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
    )
)

Array = npt.NDArray[Any]
AppendValue = bool | int | float | str | Array


class LoadedCheckpoint(NamedTuple):
    """What :func:`load_checkpoint` returns; unpacks as ``parameters, append_info``."""

    parameters: dict[str, npt.NDArray[Any]]
    append_info: dict[str, Any]


def prepare_tensors(
    parameters: Iterable[tuple[str, Any]], *, copy: bool = False
) -> dict[str, Array]:
    """Check ``(name, value)`` pairs and return them as storable arrays by name.

    Values become native-byte-order, C-contiguous arrays; ``copy=True`` makes
    sure none shares memory with the network (for saving in the background).
    Raises :class:`CheckpointValueError` for an empty, reserved or repeated
    name and :class:`CheckpointTypeError` for a dtype safetensors cannot store.
    """
    tensors: dict[str, Array] = {}
    for name, value in parameters:
        if not isinstance(name, str) or not name:
            raise CheckpointValueError(f"parameter names must be non-empty str, got {name!r}")
        if name.startswith(APPEND_TENSOR_PREFIX):
            raise CheckpointValueError(
                f"parameter {name!r} uses the prefix {APPEND_TENSOR_PREFIX!r}, reserved for "
                f"append_info arrays; rename the parameter"
            )
        if name in tensors:
            raise CheckpointValueError(f"parameter {name!r} appears twice")
        tensors[name] = _storable(to_numpy(value, name), f"parameter {name!r}", copy)
    return tensors


def checkpoint_parameters(network: Any) -> list[tuple[str, Array]]:
    """The ``(name, array)`` pairs a checkpoint of ``network`` stores.

    A PyTorch module gives its ``state_dict()``: the parameters and the
    persistent buffers (BatchNorm running statistics ...), everything
    ``load_state_dict`` needs to restore it, as MindSpore's checkpoints hold
    every parameter of a cell, moving statistics included. A
    ``DistributedDataParallel`` / ``DataParallel`` wrapper is unwrapped, so the
    names carry no ``module.`` prefix and load into the bare model. Anything
    else is read by :func:`network_parameters`.
    """
    module = _unwrapped(network)
    if _is_torch_module(module):
        return [
            (str(name), to_numpy(value, str(name))) for name, value in module.state_dict().items()
        ]
    return network_parameters(network)


def _is_torch_module(network: object) -> bool:
    # Checked by class name so that torch is never imported for other frameworks.
    return any(
        cls.__name__ == "Module" and cls.__module__.startswith("torch.")
        for cls in type(network).__mro__
    )


def _unwrapped(network: Any) -> Any:
    if type(network).__name__ in _TORCH_WRAPPERS and _is_torch_module(network):
        inner = getattr(network, "module", None)
        if _is_torch_module(inner):
            return inner
    return network


def prepare_append_info(
    append_info: Mapping[str, Any] | None, *, copy: bool = False
) -> dict[str, AppendValue]:
    """Check append values and turn tensors into arrays (``copy`` as in :func:`prepare_tensors`)."""
    prepared: dict[str, AppendValue] = {}
    for key, value in (append_info or {}).items():
        check_append_value(key, value, "append_dict")
        if isinstance(value, (bool, int, float, str)):
            prepared[key] = value
        else:
            prepared[key] = _storable(to_numpy(value, key), f"append_info[{key!r}]", copy)
    return prepared


def encode_checkpoint(
    tensors: Mapping[str, Array], append_info: Mapping[str, AppendValue] | None = None
) -> bytes:
    """The plain safetensors bytes of a checkpoint (inputs from the ``prepare_*`` functions)."""
    scalars: dict[str, bool | int | float | str] = {}
    stored = dict(tensors)
    array_keys: list[str] = []
    for key, value in (append_info or {}).items():
        if isinstance(value, np.ndarray):
            stored[APPEND_TENSOR_PREFIX + key] = value
            array_keys.append(key)
        else:
            scalars[key] = value
    metadata = {
        "format": "np",
        _KEY_VERSION: _VERSION,
        _KEY_APPEND: json.dumps(scalars),
        _KEY_APPEND_TENSORS: json.dumps(array_keys),
    }
    metadata[_KEY_DIGEST] = _digest(metadata, stored)
    return safetensors.numpy.save(stored, metadata=metadata)


def decode_checkpoint(data: bytes, source: str = "checkpoint") -> LoadedCheckpoint:
    """Parse plain checkpoint bytes; ``source`` names the file in errors."""
    metadata = _read_metadata(data, source)
    try:
        stored = safetensors.numpy.load(data)
    except (SafetensorError, ValueError, KeyError) as error:
        raise CheckpointFormatError(
            f"{source} is not a readable safetensors file: {error}"
        ) from None
    if not _is_rankscribe_checkpoint(metadata, stored):
        # Another program's safetensors file: plain tensors, nothing appended.
        return LoadedCheckpoint({name: np.array(value) for name, value in stored.items()}, {})
    _check_integrity(metadata, stored, source)
    append_info = _decode_append_info(metadata, stored, source)
    # np.array copies: arrays decoded from bytes are read-only views otherwise.
    parameters = {
        name: np.array(value)
        for name, value in stored.items()
        if not name.startswith(APPEND_TENSOR_PREFIX)
    }
    return LoadedCheckpoint(parameters, append_info)


def write_checkpoint_file(
    path: Path,
    tensors: Mapping[str, Array],
    append_info: Mapping[str, AppendValue] | None,
    enc_key: bytes | None,
    enc_mode: str,
) -> None:
    """Encode, optionally encrypt, and atomically write one checkpoint to ``path``."""
    data = encode_checkpoint(tensors, append_info)
    chunks: Iterable[bytes] = [data] if enc_key is None else encrypt_chunks(data, enc_key, enc_mode)
    atomic_write(path, chunks, mode=file_mode(final=True))


def save_checkpoint(
    save_obj: Any,
    ckpt_file_name: str | os.PathLike[str],
    *,
    append_dict: Mapping[str, Any] | None = None,
    enc_key: bytes | None = None,
    enc_mode: str = "AES-GCM",
) -> str:
    """Save a network's parameters (or ``(name, array)`` pairs) as a checkpoint file.

    ``save_obj`` is anything :func:`network_parameters` reads, or a list of
    ``(name, array)`` pairs. ``.ckpt`` is appended to a name without it, as the
    original does. Returns the absolute path written. Raises
    :class:`CheckpointWriteError` (an ``OSError``) when the file cannot be written.

    The options are keyword-only: the original's third and fourth positional
    arguments (``integrated_save``, ``async_save``) have no counterpart here, and
    a call written for it fails loudly instead of shifting ``append_dict``.
    """
    _check_file_name(ckpt_file_name)
    path = Path(ckpt_file_name).absolute()
    if path.suffix != CHECKPOINT_SUFFIX:
        path = path.with_name(path.name + CHECKPOINT_SUFFIX)
    key = check_enc_key(enc_key)
    mode = check_enc_mode(enc_mode)
    if append_dict is not None and not isinstance(append_dict, Mapping):
        raise CheckpointTypeError(
            f"For 'save_checkpoint', the argument 'append_dict' must be a dict or None, but "
            f"got {type(append_dict).__name__}."
        )
    pairs = save_obj if _is_pair_list(save_obj) else checkpoint_parameters(save_obj)
    tensors = prepare_tensors(pairs)
    append_info = prepare_append_info(append_dict)
    try:
        write_checkpoint_file(path, tensors, append_info, key, mode)
    except OSError as error:
        raise CheckpointWriteError(f"cannot write checkpoint {str(path)!r}: {error}") from error
    return str(path)


def load_checkpoint(
    ckpt_file_name: str | os.PathLike[str],
    enc_key: bytes | None = None,
    enc_mode: str | None = None,
) -> LoadedCheckpoint:
    """Read a checkpoint: its parameters by name and its append info.

    ``enc_key`` must be given exactly when the file is encrypted; ``enc_mode``
    None follows the mode recorded in the file, a str must match it. Raises
    :class:`CheckpointNotFoundError`, :class:`CheckpointEncryptionError` (key
    missing, unexpected, or wrong mode), :class:`CheckpointAuthenticationError`
    (wrong key, truncated or modified encrypted file) or
    :class:`CheckpointFormatError` (not a checkpoint, truncated or corrupted);
    it never returns partially decoded data.
    """
    _check_file_name(ckpt_file_name)
    key = check_enc_key(enc_key)
    mode = None if enc_mode is None else check_enc_mode(enc_mode)
    source = repr(os.fspath(ckpt_file_name))
    try:
        # The name is the user's (a link they made is followed); a FIFO never blocks.
        data = read_regular(ckpt_file_name, follow_link=True)
    except FileNotFoundError:
        raise CheckpointNotFoundError(f"checkpoint file {source} does not exist") from None
    except UnsafeFileError as error:
        found = error.reason.removeprefix("it ").removesuffix(", not a regular file")
        raise CheckpointValueError(
            f"ckpt_file_name must name a checkpoint file, but {source} {found}"
        ) from None
    if is_encrypted(data):
        if key is None:
            raise CheckpointEncryptionError(f"{source} is encrypted: pass its enc_key to load it")
        data = decrypt(data, key, mode, source)
    elif key is not None:
        raise CheckpointEncryptionError(
            f"{source} is not encrypted, but an enc_key was given; load it with enc_key=None"
        )
    return decode_checkpoint(data, source)


def _check_file_name(ckpt_file_name: object) -> None:
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise CheckpointTypeError(
            f"ckpt_file_name must be a str or os.PathLike, got {type(ckpt_file_name).__name__}"
        )
    if "\0" in os.fsdecode(ckpt_file_name):
        raise CheckpointValueError(
            f"ckpt_file_name must be a path without NUL characters ('\\0'), got {ckpt_file_name!r}"
        )


def _storable(array: Array, what: str, copy: bool) -> Array:
    if not array.dtype.isnative:
        # astype makes a fresh array: the copy the caller may have asked for.
        array = array.astype(array.dtype.newbyteorder("="))
    elif copy:
        array = np.array(array, order="C", copy=True)
    if array.dtype not in _STORABLE_DTYPES:
        raise CheckpointTypeError(
            f"{what} has dtype {array.dtype}, which a checkpoint cannot store; expected bool, "
            f"int8-64, uint8-64, float16/32/64 or complex64"
        )
    return _c_contiguous(array)


def _c_contiguous(array: Array) -> Array:
    # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
    return array if array.flags.c_contiguous else np.array(array, order="C")


def _is_rankscribe_checkpoint(metadata: Mapping[str, str], stored: Mapping[str, Array]) -> bool:
    return any(key.startswith(_RANKSCRIBE_KEY_PREFIX) for key in metadata) or any(
        name.startswith(APPEND_TENSOR_PREFIX) for name in stored
    )


def _check_integrity(metadata: Mapping[str, str], stored: Mapping[str, Array], source: str) -> None:
    version = metadata.get(_KEY_VERSION)
    if version in _UNSUPPORTED_VERSIONS:
        raise CheckpointFormatError(
            f"{source} is in checkpoint layout {version}, which this version no longer loads: "
            f"{_UNSUPPORTED_VERSIONS[version]}; save the network again to write layout {_VERSION}"
        )
    if version != _VERSION:
        raise CheckpointFormatError(
            f"{source} has checkpoint layout {version!r} under {_KEY_VERSION!r}; expected "
            f"{_VERSION!r} (a missing or damaged entry means the file was modified)"
        )
    expected = metadata.get(_KEY_DIGEST)
    if expected is None:
        raise CheckpointFormatError(
            f"{source} has no {_KEY_DIGEST!r} digest entry, which every checkpoint is written "
            f"with: the file was modified, so it is not loaded"
        )
    if _digest(metadata, stored) != expected:
        raise CheckpointFormatError(
            f"{source} is corrupted: its tensors or metadata do not match the SHA-256 digest "
            f"recorded when it was written"
        )


def _digest(metadata: Mapping[str, str], tensors: Mapping[str, Array]) -> str:
    digest = hashlib.sha256()
    covered = {key: value for key, value in metadata.items() if key != _KEY_DIGEST}
    digest.update(json.dumps(covered, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(tensors):
        array = _c_contiguous(tensors[name])
        digest.update(json.dumps([name, array.dtype.name, list(array.shape)]).encode())
        digest.update(array.reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def _read_metadata(data: bytes, source: str) -> dict[str, str]:
    if len(data) < 8:
        raise CheckpointFormatError(
            f"{source} is truncated: {len(data)} bytes, too short for a safetensors header"
        )
    header_size = int.from_bytes(data[:8], "little")
    if header_size > len(data) - 8:
        raise CheckpointFormatError(
            f"{source} is truncated or not a checkpoint: its header claims {header_size} bytes, "
            f"the file has {len(data) - 8} after the length"
        )
    try:
        header = parse_json(
            memoryview(data)[8 : 8 + header_size],
            what=f"{source}'s safetensors header",
            max_bytes=header_size,
        )
    except JSONDataError:
        raise CheckpointFormatError(f"{source} has an unreadable safetensors header") from None
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _decode_append_info(
    metadata: Mapping[str, str], stored: Mapping[str, Array], source: str
) -> dict[str, Any]:
    try:
        scalars = _metadata_json(metadata, _KEY_APPEND, "{}", source)
        array_keys = _metadata_json(metadata, _KEY_APPEND_TENSORS, "[]", source)
    except (JSONDataError, TypeError):
        raise CheckpointFormatError(f"{source} has unreadable append info metadata") from None
    if not isinstance(scalars, dict) or not isinstance(array_keys, list):
        raise CheckpointFormatError(f"{source} has malformed append info metadata")
    append_info: dict[str, Any] = dict(scalars)
    for key in array_keys:
        name = APPEND_TENSOR_PREFIX + str(key)
        if name not in stored:
            raise CheckpointFormatError(f"{source} lists append array {key!r} but lacks {name!r}")
        append_info[str(key)] = np.array(stored[name])
    return append_info


def _metadata_json(metadata: Mapping[str, str], key: str, default: str, source: str) -> Any:
    text = metadata.get(key, default)
    if not isinstance(text, str):
        raise TypeError(f"{key} is not a str")
    return parse_json(text, what=f"{source}'s {key}", max_bytes=len(text))


def _is_pair_list(save_obj: Any) -> bool:
    return (
        isinstance(save_obj, Sequence)
        and not isinstance(save_obj, (str, bytes))
        and all(isinstance(item, tuple) and len(item) == 2 for item in save_obj)
    )
