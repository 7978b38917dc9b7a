"""The TensorBoard target, read back by tensorboard's own EventAccumulator."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rankscribe.writer import SummaryRecord

LOSSES = [2.5, 1.25, 0.75, 0.5, 0.1]


@pytest.fixture(scope="module")
def accumulator(tmp_path_factory):
    directory = tmp_path_factory.mktemp("board")
    rng = np.random.default_rng(7)
    weights = rng.standard_normal(1000).astype(np.float32)
    weights[:3] = [np.nan, np.inf, -np.inf]
    with SummaryRecord(directory, formats=("mindinsight", "tensorboard")) as record:
        for step, loss in enumerate(LOSSES, start=1):
            record.add_value("scalar", "loss", loss)
            record.add_value("histogram", "weights", weights)
            record.add_value("image", "input", rng.random((2, 3, 4, 5), dtype=np.float32))
            record.add_value("text", "note", f"step {step}")
            record.record(step)
    loaded = EventAccumulator(
        str(directory), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0}
    )
    loaded.Reload()
    return loaded


def test_scalars_read_back_with_their_steps(accumulator):
    events = accumulator.Scalars("loss")
    assert [event.step for event in events] == [1, 2, 3, 4, 5]
    assert [event.value for event in events] == [float(np.float32(v)) for v in LOSSES]


def test_histogram_counts_cover_the_finite_values(accumulator):
    events = accumulator.Histograms("weights")
    assert len(events) == 5
    histogram = events[0].histogram_value
    assert histogram.num == 997  # 1000 values, three of them NaN/+inf/-inf
    assert sum(histogram.bucket) == 997
    assert len(histogram.bucket) == 90
    assert histogram.min < histogram.max


def test_images_have_the_tiled_canvas_size(accumulator):
    events = accumulator.Images("input")
    assert len(events) == 5
    # two 4x5 images side by side
    assert (events[0].height, events[0].width) == (4, 10)
    assert events[0].encoded_image_string.startswith(b"\x89PNG")


def test_text_reaches_the_text_plugin(accumulator):
    assert "note" in accumulator.Tags()["tensors"]
    tensors = accumulator.Tensors("note")
    assert [event.tensor_proto.string_val[0] for event in tensors][:2] == [b"step 1", b"step 2"]
