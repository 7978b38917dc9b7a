"""Image encoding: NCHW batches tiled 8 per row into one RGB PNG."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

# private: the PNG/image codec
from rankscribe.writer.encoding._image import (
    COLORSPACE_RGB,
    decode_png,
    encode_png,
    image_canvas,
    image_proto,
    image_to_tensorboard,
    validate_image,
    validate_image_shape,
)
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import summary_pb2


def pixels_of(array: np.ndarray) -> np.ndarray:
    """What a reader sees: the decoded PNG of image_proto."""
    return decode_png(image_proto(array).encoded_image)


def mindspore_canvas(images: np.ndarray) -> np.ndarray:
    """MindSpore 2.10's image path, step by step: float64 canvas with zero padding, HWC,
    then x255 for [0, 1] values or (x - min) * 255 / (max - min + 1), truncated."""
    if images.shape[1] == 1:
        images = np.concatenate([images, images, images], 1)
    n, _, h, w = images.shape
    cols = min(n, 8)
    rows = int(np.ceil(n / cols))
    canvas = np.zeros((3, h * rows, w * cols))
    for i in range(n):
        y, x = divmod(i, cols)
        canvas[:, y * h : (y + 1) * h, x * w : (x + 1) * w] = images[i]
    canvas = canvas.transpose(1, 2, 0)
    low, high = canvas.min(), canvas.max()
    if low >= 0 and high <= 1:
        return (canvas * 255).astype(np.uint8)
    if low == high:
        return np.zeros(canvas.shape, np.uint8)
    return ((canvas - low) * 255 / (high - low + 1)).astype(np.uint8)


def tiled(images: np.ndarray) -> np.ndarray:
    """Our expected canvas for uint8 pixels: tiles 8 per row, black padding."""
    n, _, h, w = images.shape
    cols = min(n, 8)
    rows = -(-n // cols)
    canvas = np.zeros((rows * h, cols * w, 3), np.uint8)
    for i in range(n):
        y, x = divmod(i, cols)
        canvas[y * h : (y + 1) * h, x * w : (x + 1) * w] = images[i].transpose(1, 2, 0)
    return canvas


# --- shape and dtype checks -------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((224, 224, 3), r"4-D array in NCHW layout .*; got a 3-D array of shape \(224, 224, 3\)"),
        ((1, 1, 3, 4, 4), r"got a 5-D array of shape \(1, 1, 3, 4, 4\)"),
        ((2, 4, 8, 8), r"with 1 or 3 channels; got 4 channels in shape \(2, 4, 8, 8\)"),
        ((1, 224, 224, 3), r"got 224 channels in shape \(1, 224, 224, 3\)"),
        ((0, 3, 8, 8), r"at least one image of at least 1x1 pixels; got shape \(0, 3, 8, 8\)"),
        ((1, 3, 0, 8), r"got shape \(1, 3, 0, 8\)"),
    ],
)
def test_bad_shapes_are_value_errors_naming_the_shape_and_the_expected_form(shape, message):
    with pytest.raises(WriterValueError, match=r"^image value must .*" + message):
        validate_image_shape(shape)
    with pytest.raises(ValueError, match=message):
        image_proto(np.zeros(shape, np.float32))


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (9, 3, 2, 5), (1, 3, 224, 224)])
def test_good_shapes_pass(shape):
    validate_image_shape(shape)
    validate_image(np.zeros(shape, np.float16))


@pytest.mark.parametrize("dtype", [np.complex64, object, np.str_])
def test_non_numeric_dtype_is_a_type_error(dtype):
    values = np.zeros((1, 1, 2, 2), dtype)
    expected = rf"bool, integer or float16/32/64 values, got dtype {values.dtype}$"
    with pytest.raises(WriterTypeError, match=expected):
        image_proto(values)
    with pytest.raises(TypeError):
        validate_image(values)


# --- the message ------------------------------------------------------------------------


def test_proto_has_canvas_size_colorspace_3_and_png_bytes():
    proto = image_proto(np.zeros((2, 3, 4, 5), np.float32))
    assert isinstance(proto, summary_pb2.Summary.Image)
    assert (proto.height, proto.width, proto.colorspace) == (4, 10, 3)
    assert proto.encoded_image.startswith(b"\x89PNG\r\n\x1a\n")


def test_batch_of_nine_is_two_rows_of_eight():
    proto = image_proto(np.zeros((9, 1, 2, 3), np.float32))
    assert (proto.height, proto.width) == (4, 24)


def test_tensorboard_image_carries_the_same_png():
    proto = image_proto(np.random.default_rng(0).random((3, 3, 4, 4)))
    board = image_to_tensorboard(proto)
    assert (board.height, board.width, board.colorspace) == (4, 12, COLORSPACE_RGB)
    assert board.encoded_image_string == proto.encoded_image


# --- pixel values -----------------------------------------------------------------------


def test_uint8_is_kept_as_is():
    images = np.random.default_rng(1).integers(0, 256, (2, 3, 3, 3), dtype=np.uint8)
    assert np.array_equal(pixels_of(images), tiled(images))
    # MindSpore contrast-stretched it instead.
    assert not np.array_equal(pixels_of(images), mindspore_canvas(images))


def test_constant_uint8_image_keeps_its_value():
    assert np.all(pixels_of(np.full((1, 3, 2, 2), 200, np.uint8)) == 200)


def test_float_in_unit_range_is_multiplied_by_255_and_truncated():
    values = np.array([0.0, 0.125, 0.5, 1 / 3, 0.999, 1.0], np.float32).reshape(1, 1, 2, 3)
    expected = [0, 31, 127, 85, 254, 255]  # trunc(x * 255) in float64
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == expected


def test_float_outside_unit_range_uses_mindsporess_formula():
    values = np.array([-2.0, 0.0, 1.5, 3.0], np.float64).reshape(1, 1, 2, 2)
    # (x - min) * 255 / (max - min + 1) = (x + 2) * 255 / 6
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [0, 85, 148, 212]


def test_constant_float_outside_unit_range_is_black():
    assert np.all(pixels_of(np.full((1, 3, 2, 2), 7.0)) == 0)


def test_one_channel_is_repeated_into_rgb():
    values = np.random.default_rng(2).random((3, 1, 4, 5))
    pixels = pixels_of(values)
    assert np.array_equal(pixels[..., 0], pixels[..., 1])
    assert np.array_equal(pixels[..., 0], pixels[..., 2])


def test_channels_stay_in_rgb_order():
    values = np.zeros((1, 3, 1, 1), np.uint8)
    values[0, :, 0, 0] = [10, 20, 30]
    assert pixels_of(values).tolist() == [[[10, 20, 30]]]


def test_tiles_go_left_to_right_then_down():
    images = np.arange(10, dtype=np.uint8).reshape(10, 1, 1, 1) * 20
    pixels = pixels_of(images)[..., 0]
    assert pixels.tolist() == [[0, 20, 40, 60, 80, 100, 120, 140], [160, 180, 0, 0, 0, 0, 0, 0]]


def test_padding_is_black_and_does_not_change_the_scaling():
    images = np.linspace(-1.0, 1.0, 9 * 4).reshape(9, 1, 2, 2)
    images[8] = images[0]  # the first 8 images alone have the same min and max
    pixels = pixels_of(images)
    assert np.all(pixels[2:, 4:] == 0)  # the 7 empty tiles of the second row
    assert np.array_equal(pixels[:2, :16], pixels_of(images[:8]))
    # MindSpore scaled its zero padding with the images, making it grey.
    grey = int((0 - images.min()) * 255 / (images.max() - images.min() + 1))
    assert grey == 92
    assert np.all(mindspore_canvas(images)[2:, 4:] == grey)


def test_nan_and_infinities_do_not_spoil_the_scaling():
    values = np.array([np.nan, np.inf, -np.inf, 0.0, 2.0, 4.0], np.float32).reshape(1, 1, 2, 3)
    # min and max come from the finite values 0..4: (x - 0) * 255 / 5.
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [0, 255, 0, 0, 102, 204]


def test_unit_range_with_nan_still_scales_by_255():
    values = np.array([np.nan, 0.5, 1.0, np.inf], np.float32).reshape(1, 1, 2, 2)
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [0, 127, 255, 255]


def test_only_non_finite_values():
    values = np.array([np.nan, np.inf, -np.inf, np.nan]).reshape(1, 1, 2, 2)
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [0, 255, 0, 0]


def test_range_beyond_float64_max_stays_in_0_255():
    values = np.array([-1.7e308, 0.0, 1.7e308, 1.0]).reshape(1, 1, 2, 2)
    with np.errstate(all="raise"):
        pixels = pixels_of(values)
    assert pixels.dtype == np.uint8 and pixels.shape == (2, 2, 3)


def test_bool_is_black_and_white():
    values = np.array([True, False, False, True]).reshape(1, 1, 2, 2)
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [255, 0, 0, 255]


def test_integer_images_other_than_uint8_use_the_formula():
    values = np.array([0, 100, 200, 300], np.int16).reshape(1, 1, 2, 2)
    assert pixels_of(values)[..., 0].reshape(-1).tolist() == [0, 84, 169, 254]


def test_canvas_is_what_the_png_holds():
    values = np.random.default_rng(3).random((5, 3, 3, 4)).astype(np.float32)
    assert np.array_equal(image_canvas(values), pixels_of(values))


# --- PNG --------------------------------------------------------------------------------


def test_decode_png_rejects_other_bytes():
    with pytest.raises(WriterValueError, match="not a readable PNG"):
        decode_png(b"not an image")
    buffer = io.BytesIO()
    Image.new("RGB", (2, 2)).save(buffer, format="BMP")
    with pytest.raises(WriterValueError, match="encoded image is BMP, not PNG"):
        decode_png(buffer.getvalue())


# Damaged PNGs on which Pillow raises something other than OSError.
_TRUNCATED_IHDR = bytes.fromhex(
    "89504e470d0a1a0a00000009494844520000000400000004080200000026930929000000cd49444154789c63"
    "60201d000000340001765eaec30000000049454e44ae426082"
)
_BROKEN_CHUNK = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000004000000040802000000269309290000000649444154789c63"
    "60201d000000340001765eaec30000000049454e44ae426082"
)


@pytest.mark.parametrize(
    "data", [_TRUNCATED_IHDR, _BROKEN_CHUNK], ids=["truncated-IHDR", "broken-chunk"]
)
def test_a_damaged_png_raises_the_writers_error(data):
    from rankscribe.writer.events import Image as DecodedImage

    with pytest.raises(WriterValueError, match="not a readable PNG"):
        decode_png(data)
    with pytest.raises(WriterValueError, match="not a readable PNG"):
        DecodedImage(4, 4, 3, data).pixels()


def test_decode_png_turns_grey_into_rgb_and_keeps_rgba():
    buffer = io.BytesIO()
    Image.fromarray(np.array([[7, 9]], np.uint8)).save(buffer, format="PNG")
    assert decode_png(buffer.getvalue()).tolist() == [[[7, 7, 7], [9, 9, 9]]]
    buffer = io.BytesIO()
    Image.fromarray(np.array([[[1, 2, 3, 4]]], np.uint8)).save(buffer, format="PNG")
    assert decode_png(buffer.getvalue()).tolist() == [[[1, 2, 3, 4]]]


def test_encode_png_accepts_a_non_contiguous_canvas():
    canvas = np.random.default_rng(4).integers(0, 256, (3, 4, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(encode_png(canvas[:, ::-1])), canvas[:, ::-1])


# --- properties -------------------------------------------------------------------------

batch_shapes = st.tuples(
    st.integers(1, 18), st.sampled_from([1, 3]), st.integers(1, 5), st.integers(1, 5)
)


@given(hnp.arrays(np.uint8, batch_shapes))
def test_property_uint8_round_trips_through_the_png(images):
    assert np.array_equal(pixels_of(images), tiled(images))


@given(
    hnp.arrays(np.float32, batch_shapes, elements=st.floats(0, 1, width=32, allow_subnormal=False))
)
def test_property_unit_range_floats_decode_to_mindspores_pixels(images):
    assert np.array_equal(pixels_of(images), mindspore_canvas(images))


@given(
    st.sampled_from([np.float16, np.float32, np.float64, np.int32]),
    st.tuples(
        st.sampled_from([1, 2, 8, 16]),
        st.sampled_from([1, 3]),
        st.integers(1, 4),
        st.integers(1, 4),
    ),
    st.data(),
)
def test_property_full_batches_decode_to_mindspores_pixels(dtype, shape, data):
    # Without padding tiles, every finite image decodes to exactly MindSpore's pixels.
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    bound = float(np.asarray(min(float(info.max), 1e30), dtype))
    elements = (
        st.floats(-bound, bound, width=np.dtype(dtype).itemsize * 8)
        if np.dtype(dtype).kind == "f"
        else st.integers(int(info.min), int(info.max))
    )
    images = data.draw(hnp.arrays(dtype, shape, elements=elements))
    assert np.array_equal(pixels_of(images), mindspore_canvas(images))
