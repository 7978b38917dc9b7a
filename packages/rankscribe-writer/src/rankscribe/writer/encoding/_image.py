"""PNG images for the ``image`` plugin.

The layout rule is MindSpore 2.10's (docs/file-format.md, "What goes in each file"): the value is a
batch in NCHW layout with 1 or 3 channels; a 1-channel image is repeated into R, G and B;
the N images are tiled 8 per row on one RGB canvas, which is PNG-encoded. ``height`` and
``width`` are the canvas size and ``colorspace`` is 3, as MindSpore always writes.

Pixel values:

* uint8 images are written as they are. (MindSpore meant to do this, but its check ran
  after the copy to a float64 canvas, so it contrast-stretched uint8 images and turned a
  constant one black.)
* Other images with every value in [0, 1] are multiplied by 255; otherwise they are
  mapped by MindSpore's ``(x - min) * 255 / (max - min + 1)``. Both are computed in
  float64 and truncated to uint8 as MindSpore does, so float images decode to exactly
  MindSpore's pixels. bool counts as 0 and 1.
* NaN and infinite values are not used for min and max; NaN and -inf pixels become 0 and
  +inf pixels 255. (MindSpore took min and max over them, so one NaN spoilt the image.)
* The empty tiles after the last image of a batch of, say, 9 are black and take no part
  in min and max. MindSpore scaled its zero padding with the images, which made the
  padding grey and, for images above 0, changed their contrast with the batch size.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2

__all__ = [
    "COLORSPACE_RGB",
    "IMAGES_PER_ROW",
    "PNG_COMPRESS_LEVEL",
    "decode_png",
    "encode_png",
    "image_canvas",
    "image_proto",
    "image_to_tensorboard",
    "validate_image",
    "validate_image_shape",
]

#: MindSpore tiles a batch on a canvas with this many images per row.
IMAGES_PER_ROW = 8

#: The colorspace MindSpore writes for every image: its RGB channel count. In the
#: summary.proto comment and in TensorBoard, 3 also means RGB.
COLORSPACE_RGB = 3

#: zlib level for the PNG. Measured with Pillow 13 on 224x224 RGB canvases, level 1 vs the
#: default 6: photo-like content (gradient + noise) 5.0 ms / 102 KB vs 7.5 ms / 92 KB;
#: uniform noise 4.8 ms vs 5.1 ms (incompressible either way); smooth gradients 0.8 ms /
#: 1.9 KB vs 1.1 ms / 0.9 KB. Level 1 is a third faster on typical images for ~10 % more
#: bytes. (Strategy Z_RLE was faster still, 3.5 ms, but 13x bigger on smooth images.)
PNG_COMPRESS_LEVEL = 1

_EXPECTED_FORM = "a 4-D array in NCHW layout (images, channels, height, width) with 1 or 3 channels"


def validate_image_shape(shape: Sequence[int]) -> None:
    """Raise :class:`WriterValueError` unless *shape* is a non-empty NCHW batch, C in {1, 3}.

    SummaryRecord calls this when the value is added, on the caller's thread, so that a
    bad image fails there (MindSpore only noticed a bad channel count when it packed the
    step, and dropped the image with a log line).
    """
    shape = tuple(int(size) for size in shape)
    if len(shape) != 4:
        raise WriterValueError(
            f"image value must be {_EXPECTED_FORM}; got a {len(shape)}-D array of shape {shape}"
        )
    count, channels, height, width = shape
    if channels not in (1, 3):
        raise WriterValueError(
            f"image value must be {_EXPECTED_FORM}; got {channels} channels in shape {shape}"
        )
    if min(count, height, width) < 1:
        raise WriterValueError(
            f"image value must hold at least one image of at least 1x1 pixels; got shape {shape}"
        )


def validate_image(array: npt.NDArray[Any]) -> None:
    """Check the shape (:func:`validate_image_shape`) and the dtype of an image batch.

    Raises :class:`WriterTypeError` unless the dtype is bool, an integer or a float of up
    to 64 bits.
    """
    validate_image_shape(array.shape)
    dtype = array.dtype
    if dtype.kind not in "biuf" or (dtype.kind == "f" and dtype.itemsize > 8):
        raise WriterTypeError(
            f"image value must hold bool, integer or float16/32/64 values, got dtype {dtype}"
        )


def image_canvas(array: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Return the RGB canvas (height, width, 3) of uint8 that :func:`image_proto` encodes."""
    images = np.asarray(array)
    validate_image(images)
    return _tile(_to_uint8(images))


def encode_png(pixels: npt.NDArray[np.uint8]) -> bytes:
    """PNG-encode an (height, width, 3) uint8 array."""
    output = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(
        output, format="PNG", compress_level=PNG_COMPRESS_LEVEL
    )
    return output.getvalue()


def image_proto(array: npt.ArrayLike) -> summary_pb2.Summary.Image:
    """Return the ``Summary.Image`` message of an NCHW batch (what SummaryRecord writes)."""
    canvas = image_canvas(array)
    height, width, _ = canvas.shape
    return summary_pb2.Summary.Image(
        height=height,
        width=width,
        colorspace=COLORSPACE_RGB,
        encoded_image=encode_png(canvas),
    )


def image_to_tensorboard(image: summary_pb2.Summary.Image) -> tensorboard_pb2.Summary.Image:
    """Return TensorBoard's ``Summary.Image`` holding the same PNG (colorspace 3 = RGB)."""
    return tensorboard_pb2.Summary.Image(
        height=image.height,
        width=image.width,
        colorspace=COLORSPACE_RGB,
        encoded_image_string=image.encoded_image,
    )


def decode_png(data: bytes) -> npt.NDArray[np.uint8]:
    """Decode PNG bytes to a (height, width, channels) uint8 array: RGB, or RGBA if stored so.

    Grey or palette PNGs (not written by MindSpore or RankScribe) are converted to RGB.
    Raises :class:`WriterValueError` when *data* is not a PNG image.
    """
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise WriterValueError(f"encoded image is {image.format}, not PNG")
            if image.mode in ("RGB", "RGBA"):
                return np.array(image, dtype=np.uint8)
            return np.array(image.convert("RGB"), dtype=np.uint8)
    except WriterValueError:
        raise
    except (UnidentifiedImageError, OSError) as error:
        raise WriterValueError(f"encoded image is not a readable PNG: {error}") from error
    except Exception as error:
        # Pillow reports a damaged PNG with whatever its parser tripped on (ValueError,
        # SyntaxError, struct.error, DecompressionBombError, ...): the bytes are bad either way.
        raise WriterValueError(
            f"encoded image is not a readable PNG: {type(error).__name__}: {error}"
        ) from error


def _to_uint8(images: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Scale an NCHW batch to uint8 pixels by the rules in the module docstring."""
    if images.dtype == np.uint8:
        return images
    if images.dtype.kind == "b":
        return images.view(np.uint8) * np.uint8(255)
    low, high = images.min(), images.max()
    clean_up = False
    if images.dtype.kind == "f" and not (math.isfinite(low) and math.isfinite(high)):
        finite = images[np.isfinite(images)]
        low, high = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
        clean_up = True
    low, high = float(low), float(high)
    # MindSpore scales a float64 canvas; the same float64 arithmetic truncates to the same
    # pixels (float32 arithmetic can round x * 255 up across an integer).
    scaled = images.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if low >= 0 and high <= 1:
            scaled *= 255
        else:
            scaled -= low
            scaled *= 255
            scaled /= high - low + 1
            clean_up = clean_up or not math.isfinite(high - low + 1)
    if clean_up:
        # NaN -> 0, +inf -> 255, -inf -> 0; a range beyond float64 saturates likewise.
        np.nan_to_num(scaled, copy=False, nan=0.0, posinf=255.0, neginf=0.0)
        np.clip(scaled, 0, 255, out=scaled)
    return scaled.astype(np.uint8)


def _tile(pixels: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Tile an NCHW uint8 batch, 8 per row, into one (rows*H, cols*W, 3) canvas."""
    count, _, height, width = pixels.shape
    if count == 1:
        # Broadcasting a 1-channel image to 3 channels repeats it into R, G and B.
        canvas = np.empty((height, width, 3), np.uint8)
        canvas[...] = pixels[0].transpose(1, 2, 0)
        return canvas
    cols = min(count, IMAGES_PER_ROW)
    rows = -(-count // cols)
    tiles = np.zeros((rows * cols, height, width, 3), np.uint8)
    tiles[:count] = pixels.transpose(0, 2, 3, 1)
    grid = tiles.reshape(rows, cols, height, width, 3).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(grid).reshape(rows * height, cols * width, 3)
