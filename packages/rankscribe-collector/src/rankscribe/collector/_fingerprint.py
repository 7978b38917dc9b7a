"""The parameter fingerprint each rank records at its collected steps.

In data-parallel training every rank holds the same parameters after each step,
so their fingerprints agree; a rank whose fingerprint leaves the majority has
diverged (the job view names it, see :mod:`rankscribe.lineage.jobview`).

The fingerprint is CRC-32C of the parameters' raw bytes, in the network's
parameter order, cut to its low 24 bits: the summary scalar type is a float32,
which holds every integer below 2**24 exactly. CRC-32C runs on the CPU's CRC
instruction (the ``crc32c`` package the writer also uses): a fraction of a
millisecond per 10 MB, and it reads the arrays in place (no copy for a
contiguous array).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import crc32c
import numpy as np
import numpy.typing as npt

__all__ = ["FINGERPRINT_BITS", "parameter_fingerprint"]

#: Bits kept: exact in a float32 scalar.
FINGERPRINT_BITS = 24
_MASK = (1 << FINGERPRINT_BITS) - 1


def parameter_fingerprint(
    parameters: Iterable[tuple[str, Any]],
    to_numpy: Callable[[Any], npt.NDArray[Any]] = np.asarray,
) -> int:
    """``crc32c`` of the values' raw bytes chained in order, ``& 0xFFFFFF``.

    ``to_numpy`` reads each value as an array (the collector passes its
    adapters', which move framework tensors to the host). The names do not
    count: only the bytes, so ranks agree whatever their parameters are called.
    """
    crc = 0
    for _, value in parameters:
        array = np.ascontiguousarray(to_numpy(value))
        if array.dtype.hasobject:
            raise TypeError(f"a parameter of dtype {array.dtype} has no raw bytes")
        # As bytes through a uint8 view: any dtype (even one the buffer protocol has no
        # format for) and a 0-d array give their raw bytes, still without a copy.
        crc = crc32c.crc32c(array.reshape(-1).view(np.uint8).data, value=crc)
    return crc & _MASK
