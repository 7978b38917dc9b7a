"""Floats as MindInsight shows them: protobuf's ``MessageToDict`` rules.

float32 fields come out as the shortest decimal that widens back to the same
float32 (0.01, not 0.009999999776482582); non-finite floats, float32 or
double, as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
"""

from __future__ import annotations

import math
import struct

__all__ = ["NON_FINITE_STRINGS", "float32_repr", "json_float"]

_F32 = struct.Struct("<f")
NON_FINITE_STRINGS = ("NaN", "Infinity", "-Infinity")
_FLOAT32_MAX = 3.4028234663852886e38


def _widen_float32(value: float) -> float:
    return float(_F32.unpack(_F32.pack(value))[0])


def float32_repr(value: float) -> float | str:
    """Return a float32 value as protobuf's ``MessageToDict`` shows it.

    The result is the decimal with the fewest significant digits (at least 6)
    that still widens to the same float32, so 0.01f reads as 0.01 and the
    float32 nearest 2.3027029 as 2.302703. Non-finite values become the JSON
    strings protobuf uses.
    """
    if not math.isfinite(value):
        return json_float(value)
    if abs(value) > _FLOAT32_MAX:
        return value
    # Widen first: a double that is not a float32 would never match below.
    value = _widen_float32(value)
    precision = 6
    rounded = float(f"{value:.{precision}g}")
    while _widen_float32(rounded) != value:
        precision += 1
        rounded = float(f"{value:.{precision}g}")
    return rounded


def json_float(value: float) -> float | str:
    """Return a double as ``MessageToDict`` shows it (non-finite as strings)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
