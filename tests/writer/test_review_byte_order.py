"""Arrays in big-endian byte order (np.load of files written on such machines, FITS,
``np.frombuffer(..., '>f4')``) hold ordinary int32/float64/... values and are
recorded as such."""

from __future__ import annotations

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, reader

BIG_ENDIAN = [">i2", ">i4", ">i8", ">u4", ">u8", ">f2", ">f4", ">f8"]


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_a_big_endian_tensor_reads_back_with_its_values(tmp_path, dtype):
    values = np.array([[1, 2, 3], [4, 5, 126]], dtype=dtype)
    with SummaryRecord(tmp_path, export_options={"tensor_format": "npy"}) as record:
        record.add_value("tensor", "weights", values)
        record.record(3)

    [event] = [event for event in reader.load_dir(tmp_path, strict=True) if event.what == "summary"]
    [value] = event.values
    assert value.value.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(value.value, values)
    [exported] = (tmp_path).glob("export_*/tensor/weights_3.npy")
    np.testing.assert_array_equal(np.load(exported), values)

