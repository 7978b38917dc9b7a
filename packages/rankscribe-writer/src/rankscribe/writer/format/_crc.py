"""CRC-32C (Castagnoli) and the TFRecord/LevelDB mask applied to it.

The checksum comes from the ``crc32c`` package: hardware-accelerated (about
25 GB/s here, pure Python manages 8 MB/s), it reads any buffer (NumPy memory
included, so big payloads are checksummed without a copy), continues a running
checksum over several pieces, and releases the GIL on large inputs.
"""

from __future__ import annotations

import crc32c as _crc32c

# What the checksum functions read: NumPy memory arrives as a memoryview.
BytesLike = bytes | bytearray | memoryview

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF

if not _crc32c.hardware_based:  # pragma: no cover - depends on the CPU
    import logging

    logging.getLogger(__name__).warning(
        "crc32c runs without CPU support on this machine; checksums will be slower"
    )


def crc32c(data: BytesLike, value: int = 0) -> int:
    """Return the CRC-32C of ``data`` (check value of b"123456789" is 0xE3069283).

    ``value`` continues a checksum computed over the bytes before ``data``.
    """
    return int(_crc32c.crc32c(data, value=value))


def mask(crc: int) -> int:
    """Mask a CRC the way TFRecord does: rotate right by 15 bits, add 0xA282EAD8."""
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32


def masked_crc32c(data: BytesLike) -> int:
    """Return the masked CRC-32C stored next to every length and payload."""
    return mask(crc32c(data))
