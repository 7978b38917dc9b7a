"""CRC-32C and the TFRecord mask, written out bit by bit: an oracle independent of the writer.

Tests forge records (a length whose CRC holds, a payload whose CRC does not) and check
the writer's framing against this slow, plain definition (docs/file-format.md): the
Castagnoli polynomial, reflected, and the mask TFRecord applies to it. Standard library
only.
"""

from __future__ import annotations

_POLYNOMIAL = 0x82F63B78  # Castagnoli's 0x1EDC6F41, bit-reflected
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


def crc32c(data: bytes) -> int:
    crc = _U32
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLYNOMIAL if crc & 1 else 0)
    return crc ^ _U32


def masked_crc32c(data: bytes) -> int:
    """Rotate the CRC right by 15 bits and add the delta, as TFRecord stores it."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32
