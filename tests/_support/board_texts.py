"""The text pieces of a TensorBoard event file, read as TensorBoard's text tab shows them.

Needs the writer package alone (the jobview env's tests use it, without the lineage).
"""

from __future__ import annotations

from pathlib import Path

from rankscribe.writer.events import read_tensorboard_events


def board_texts(board: str | Path) -> list[tuple[int, str, str]]:
    """(step, tag, text) of every text piece of a TensorBoard event file, in the order
    written (the job view's verdicts: tag ``verdicts``)."""
    return [
        (event.step, value.tag, piece.decode("utf-8"))
        for event in read_tensorboard_events(board)
        if event.WhichOneof("what") == "summary"
        for value in event.summary.value
        if value.metadata.plugin_data.plugin_name == "text"
        for piece in value.tensor.string_val
    ]
