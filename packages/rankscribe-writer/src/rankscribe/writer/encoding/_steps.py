"""Turning one recorded step into the bytes of every output file.

``encode_step`` is pure and runs off the training thread (an encoder thread
or the writer thread): it computes histograms, encodes PNGs and tensors, and
assembles the records for the summary file, the lineage file and the
TensorBoard file. A value that fails to encode is logged and left out; the
rest of the step is still written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankscribe.writer.encoding import _histogram as histogram
from rankscribe.writer.encoding import _image as image
from rankscribe.writer.encoding import _tensor as tensor
from rankscribe.writer.encoding import _tensorboard as tensorboard
from rankscribe.writer.encoding._values import MAX_STEP_BYTES, Snapshot, resolved
from rankscribe.writer.format import _events as events
from rankscribe.writer.format._framing import chunk_size

logger = logging.getLogger(__name__)


@dataclass
class StepJob:
    """What ``record(step)`` hands to the background: snapshots in event order."""

    step: int
    wall_time: float
    values: list[Snapshot]
    lineage: list[Snapshot]
    graph: bytes | None = None
    tensorboard: bool = False
    export_tensors: bool = False


@dataclass
class EncodedStep:
    """The finished records of one step, per output file."""

    step: int
    summary: list[bytes | list[events.Chunk]] = field(default_factory=list)
    lineage: list[bytes] = field(default_factory=list)
    tensorboard: list[bytes] = field(default_factory=list)
    exports: list[tuple[str, np.ndarray]] = field(default_factory=list)


def encode_step(job: StepJob) -> EncodedStep:
    out = EncodedStep(job.step)
    if job.graph is not None:
        out.summary.append(events.graph_event(job.wall_time, job.step, job.graph))
    summary_values: list[list[events.Chunk]] = []
    board_values: list[Any] = []
    for snap in job.values:
        try:
            _encode_value(snap, job, summary_values, board_values, out)
        except Exception as error:  # one bad value must not cost the step
            logger.error(
                "could not encode %s '%s' at step %d: %s", snap.plugin, snap.tag, job.step, error
            )
    if summary_values:
        payload = events.summary_event_chunks(job.wall_time, job.step, summary_values)
        size = sum(chunk_size(chunk) for chunk in payload)
        if size <= MAX_STEP_BYTES:
            out.summary.append(payload)
        else:  # record() refuses such steps from its estimate; this is the last guard
            logger.error(
                "step %d encodes to %s bytes, over the %s-byte limit of one event; "
                "its summary values were not written",
                job.step,
                f"{size:,}",
                f"{MAX_STEP_BYTES:,}",
            )
    if board_values:
        out.tensorboard.append(tensorboard.summary_event(job.wall_time, job.step, board_values))
    for snap in job.lineage:
        out.lineage.append(events.lineage_event(job.wall_time, snap.plugin, snap.data))
    return out


def _encode_value(
    snap: Snapshot,
    job: StepJob,
    summary_values: list[list[events.Chunk]],
    board_values: list[Any],
    out: EncodedStep,
) -> None:
    snap = resolved(snap)  # a value read from a device arrives here (it may wait for it)
    tag = snap.tag.encode()
    plugin = snap.plugin
    if plugin == "scalar":
        summary_values.append([events.scalar_value(tag, snap.data)])
        if job.tensorboard:
            board_values.append(tensorboard.scalar_value(snap.tag, snap.data))
    elif plugin == "histogram":
        proto = histogram.histogram_proto(snap.data)
        summary_values.append([events.message_value(tag, plugin, proto.SerializeToString())])
        if job.tensorboard:
            board_values.append(tensorboard.histogram_value(snap.tag, proto))
    elif plugin == "image":
        picture = image.image_proto(snap.data)
        summary_values.append([events.message_value(tag, plugin, picture.SerializeToString())])
        if job.tensorboard:
            board_values.append(tensorboard.image_value(snap.tag, picture))
    elif plugin == "tensor":
        summary_values.append(events.message_value_chunks(tag, plugin, tensor_chunks(snap.data)))
        if job.export_tensors:
            out.exports.append((snap.tag, snap.data))
    elif plugin == "landscape":
        summary_values.append([events.message_value(tag, plugin, snap.data)])
    elif plugin == "text" and job.tensorboard:
        board_values.append(tensorboard.text_value(snap.tag, snap.data))


def tensor_chunks(array: np.ndarray) -> list[events.Chunk]:
    """The TensorProto of ``array`` as pieces pointing into its memory (no copy)."""
    return list(tensor.tensor_proto_parts(array))


def is_heavy(snap: Snapshot) -> bool:
    """Worth a trip to the encoder pool (small arrays encode faster than the hand-off)."""
    return snap.plugin in ("histogram", "image", "tensor") and snap.memory > 16_384
