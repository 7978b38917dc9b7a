"""The encrypted envelope around a checkpoint (``CheckpointConfig(enc_key=...)``).

An encrypted checkpoint is the plain safetensors bytes sealed in one of two
envelopes, told apart by a small header::

    offset  size  field
    0       8     magic b"RSCKENC1" (a plain safetensors file starts with its
                  little-endian header length, which can never spell this)
    8       1     mode: 1 = AES-GCM, 2 = AES-CBC
    AES-GCM:
    9       12    nonce (random per file)
    21      n     ciphertext
    21+n    16    GCM tag; the 21 header bytes are authenticated as associated data
    AES-CBC (encrypt-then-MAC):
    9       16    HKDF salt (random per file)
    25      16    IV (random per file)
    41      16k   ciphertext, PKCS#7 padded
    41+16k  32    HMAC-SHA256 of every byte before it

AES-GCM uses ``enc_key`` as the AES key (its length picks AES-128/192/256).
AES-CBC alone is malleable, so it derives two keys from ``enc_key`` with
HKDF-SHA256 (the per-file salt, and an ``info`` naming this envelope): an AES key
of ``enc_key``'s length and a 32-byte HMAC key. The MAC is checked, in constant
time, before anything is decrypted.

Either way a wrong key, a flipped byte or a truncated file fails authentication
and raises :class:`CheckpointAuthenticationError`; no plaintext is returned.
The primitives are the ``cryptography`` package's; nothing here is home-made
except the framing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from rankscribe.collector.errors import (
    CheckpointAuthenticationError,
    CheckpointEncryptionError,
    CheckpointFormatError,
)

__all__ = [
    "ENC_MODES",
    "KEY_LENGTHS",
    "MAGIC",
    "decrypt",
    "encrypt_chunks",
    "encrypted_mode",
    "is_encrypted",
]

#: The ``enc_mode`` values accepted, as the original spells them.
ENC_MODES = ("AES-GCM", "AES-CBC")
#: AES-128, AES-192 and AES-256.
KEY_LENGTHS = (16, 24, 32)
MAGIC = b"RSCKENC1"

_MODE_IDS = {"AES-GCM": 1, "AES-CBC": 2}
_MODE_NAMES = {number: name for name, number in _MODE_IDS.items()}
_PREFIX_SIZE = len(MAGIC) + 1
_GCM_NONCE_SIZE = 12
_GCM_TAG_SIZE = 16
_CBC_SALT_SIZE = 16
_CBC_IV_SIZE = 16
_CBC_BLOCK = 16
_MAC_SIZE = 32
_HKDF_INFO = b"rankscribe checkpoint AES-CBC + HMAC-SHA256, v1"
# Large checkpoints are encrypted in slices so that no second full-size copy is
# built in memory before writing; 16 MiB keeps the per-call overhead negligible.
_SLICE = 16 * 1024 * 1024


def is_encrypted(data: bytes | memoryview) -> bool:
    """True when ``data`` starts with the encrypted envelope's magic."""
    return bytes(data[: len(MAGIC)]) == MAGIC


def encrypted_mode(data: bytes | memoryview, source: str) -> str:
    """The ``enc_mode`` an encrypted file was written with; ``source`` names it in errors."""
    if len(data) < _PREFIX_SIZE or not is_encrypted(data):
        raise CheckpointFormatError(f"{source} is not an encrypted checkpoint (no RSCKENC1 header)")
    mode = _MODE_NAMES.get(data[len(MAGIC)])
    if mode is None:
        raise CheckpointFormatError(
            f"{source} has an unknown encryption mode byte {data[len(MAGIC)]}; "
            f"expected 1 (AES-GCM) or 2 (AES-CBC)"
        )
    return mode


def encrypt_chunks(plaintext: bytes, key: bytes, mode: str) -> Iterator[bytes]:
    """Yield the encrypted envelope of ``plaintext``, in pieces, in file order.

    ``key`` and ``mode`` are assumed valid (``CheckpointConfig`` checked them).
    """
    prefix = MAGIC + bytes([_MODE_IDS[mode]])
    if mode == "AES-GCM":
        yield from _gcm_encrypt(prefix, plaintext, key)
    else:
        yield from _cbc_encrypt(prefix, plaintext, key)


def decrypt(data: bytes, key: bytes, enc_mode: str | None, source: str) -> bytes:
    """Return the plaintext sealed in ``data``, or raise if it does not authenticate.

    ``enc_mode`` None accepts whichever mode the header names; otherwise it must
    match it. ``source`` names the file in error messages.
    """
    mode = encrypted_mode(data, source)
    if enc_mode is not None and enc_mode != mode:
        raise CheckpointEncryptionError(
            f"{source} was encrypted with {mode}, but enc_mode={enc_mode!r} was given; "
            f"pass enc_mode={mode!r} (or None to follow the file)"
        )
    view = memoryview(data)
    if mode == "AES-GCM":
        return _gcm_decrypt(view, key, source)
    return _cbc_decrypt(view, key, source)


def _slices(data: bytes | memoryview) -> Iterator[memoryview]:
    view = memoryview(data)
    for start in range(0, len(view), _SLICE):
        yield view[start : start + _SLICE]


def _gcm_encrypt(prefix: bytes, plaintext: bytes, key: bytes) -> Iterator[bytes]:
    nonce = os.urandom(_GCM_NONCE_SIZE)
    header = prefix + nonce
    encryptor = Cipher(algorithms.AES(key), modes.GCM(nonce)).encryptor()
    encryptor.authenticate_additional_data(header)
    yield header
    for piece in _slices(plaintext):
        yield encryptor.update(piece)
    yield encryptor.finalize()
    yield encryptor.tag


def _gcm_decrypt(view: memoryview, key: bytes, source: str) -> bytes:
    header_size = _PREFIX_SIZE + _GCM_NONCE_SIZE
    _require_length(view, header_size + _GCM_TAG_SIZE, source)
    header = view[:header_size]
    nonce = bytes(view[_PREFIX_SIZE:header_size])
    tag = bytes(view[-_GCM_TAG_SIZE:])
    decryptor = Cipher(algorithms.AES(key), modes.GCM(nonce, tag)).decryptor()
    decryptor.authenticate_additional_data(bytes(header))
    # The pieces are unauthenticated until finalize() succeeds; they are only
    # joined and returned after it has.
    pieces = [decryptor.update(piece) for piece in _slices(view[header_size:-_GCM_TAG_SIZE])]
    try:
        pieces.append(decryptor.finalize())
    except InvalidTag:
        raise _authentication_failed(source, "AES-GCM") from None
    return b"".join(pieces)


def _cbc_keys(key: bytes, salt: bytes) -> tuple[bytes, bytes]:
    material = HKDF(
        algorithm=hashes.SHA256(), length=len(key) + _MAC_SIZE, salt=salt, info=_HKDF_INFO
    ).derive(key)
    return material[: len(key)], material[len(key) :]


def _cbc_encrypt(prefix: bytes, plaintext: bytes, key: bytes) -> Iterator[bytes]:
    salt = os.urandom(_CBC_SALT_SIZE)
    iv = os.urandom(_CBC_IV_SIZE)
    aes_key, mac_key = _cbc_keys(key, salt)
    encryptor = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).encryptor()
    padder = padding.PKCS7(_CBC_BLOCK * 8).padder()
    mac = hmac.HMAC(mac_key, hashes.SHA256())
    header = prefix + salt + iv
    mac.update(header)
    yield header
    for piece in _slices(plaintext):
        sealed = encryptor.update(padder.update(piece))
        mac.update(sealed)
        yield sealed
    sealed = encryptor.update(padder.finalize()) + encryptor.finalize()
    mac.update(sealed)
    yield sealed
    yield mac.finalize()


def _cbc_decrypt(view: memoryview, key: bytes, source: str) -> bytes:
    header_size = _PREFIX_SIZE + _CBC_SALT_SIZE + _CBC_IV_SIZE
    _require_length(view, header_size + _CBC_BLOCK + _MAC_SIZE, source)
    salt = bytes(view[_PREFIX_SIZE : _PREFIX_SIZE + _CBC_SALT_SIZE])
    iv = bytes(view[_PREFIX_SIZE + _CBC_SALT_SIZE : header_size])
    aes_key, mac_key = _cbc_keys(key, salt)
    mac = hmac.HMAC(mac_key, hashes.SHA256())
    for piece in _slices(view[:-_MAC_SIZE]):
        mac.update(piece)
    try:
        mac.verify(bytes(view[-_MAC_SIZE:]))
    except InvalidSignature:
        raise _authentication_failed(source, "AES-CBC") from None
    ciphertext = view[header_size:-_MAC_SIZE]
    if len(ciphertext) % _CBC_BLOCK:
        # Authenticated yet misaligned: only a writer bug could produce this.
        raise CheckpointFormatError(f"{source}: AES-CBC ciphertext is not a whole number of blocks")
    decryptor = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).decryptor()
    unpadder = padding.PKCS7(_CBC_BLOCK * 8).unpadder()
    pieces = [unpadder.update(decryptor.update(piece)) for piece in _slices(ciphertext)]
    try:
        pieces.append(unpadder.update(decryptor.finalize()) + unpadder.finalize())
    except ValueError:
        raise CheckpointFormatError(f"{source}: AES-CBC padding is invalid") from None
    return b"".join(pieces)


def _require_length(view: memoryview, minimum: int, source: str) -> None:
    if len(view) < minimum:
        raise CheckpointFormatError(
            f"{source} is truncated: {len(view)} bytes, shorter than the {minimum}-byte "
            f"smallest encrypted checkpoint"
        )


def _authentication_failed(source: str, mode: str) -> CheckpointAuthenticationError:
    return CheckpointAuthenticationError(
        f"{source} failed {mode} authentication: the enc_key is wrong, or the file "
        f"was truncated or modified; nothing was loaded"
    )
