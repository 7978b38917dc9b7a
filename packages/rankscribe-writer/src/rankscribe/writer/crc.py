"""CRC-32C (Castagnoli) and the TFRecord/LevelDB mask applied to it."""

from __future__ import annotations

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF

if google_crc32c.implementation != "c":  # pragma: no cover - depends on the wheel
    import logging

    logging.getLogger(__name__).warning(
        "google-crc32c has no native extension on this platform; checksums will be slow"
    )


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """Return the CRC-32C of ``data`` (check value of b"123456789" is 0xE3069283)."""
    return int(google_crc32c.value(bytes(data) if isinstance(data, memoryview) else data))


def mask(crc: int) -> int:
    """Mask a CRC the way TFRecord does: rotate right by 15 bits, add 0xA282EAD8."""
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """Return the masked CRC-32C stored next to every length and payload."""
    return mask(crc32c(data))
