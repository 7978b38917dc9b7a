"""The checkpoint file: standard safetensors, exact round trips, corruption, atomic writes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
import safetensors
import safetensors.numpy

from rankscribe.collector import LoadedCheckpoint, load_checkpoint, save_checkpoint

# private: the checkpoint container's byte layout, which has no public door
from rankscribe.collector.checkpoint import _format as checkpoint_format
from rankscribe.collector.errors import (
    CheckpointError,
    CheckpointFormatError,
    CheckpointWriteError,
    CollectorTypeError,
    CollectorValueError,
)
from rankscribe.ranks.files import atomic_write
from tests._support.growth import MEGABYTE, SLOW_PARSE_BASE, assert_linear

DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
]


def sample(dtype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    return (
        np.arange(int(np.prod(shape))).reshape(shape) % 2 == 0
        if dtype == "bool"
        else np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_exactly(tmp_path: Path, dtype: str) -> None:
    array = sample(dtype)
    path = save_checkpoint({"p": array}, tmp_path / "x.ckpt")
    parameters, _ = load_checkpoint(path)
    assert parameters["p"].dtype == array.dtype
    np.testing.assert_array_equal(parameters["p"], array)


def test_shapes_layouts_and_byte_orders(tmp_path: Path) -> None:
    scalar = np.array(3.25, np.float32)
    empty = np.zeros((0, 4), np.int32)
    transposed = np.arange(12.0).reshape(3, 4).T  # not C-contiguous
    big_endian = np.arange(5, dtype=">i4")
    path = save_checkpoint(
        [
            ("scalar", scalar),
            ("empty", empty),
            ("transposed", transposed),
            ("big_endian", big_endian),
        ],
        tmp_path / "x.ckpt",
    )
    parameters, _ = load_checkpoint(path)
    assert parameters["scalar"].shape == ()
    assert parameters["scalar"] == np.float32(3.25)
    assert parameters["empty"].shape == (0, 4)
    np.testing.assert_array_equal(parameters["transposed"], transposed)
    np.testing.assert_array_equal(parameters["big_endian"], [0, 1, 2, 3, 4])
    assert parameters["big_endian"].dtype == np.dtype("int32")


def test_loaded_arrays_are_writable(tmp_path: Path) -> None:
    path = save_checkpoint({"w": np.zeros(3)}, tmp_path / "x.ckpt")
    parameters, _ = load_checkpoint(path)
    parameters["w"] += 1
    np.testing.assert_array_equal(parameters["w"], [1, 1, 1])


def test_result_unpacks_and_has_names(tmp_path: Path) -> None:
    path = save_checkpoint({"w": np.zeros(1)}, tmp_path / "x.ckpt", append_dict={"lr": 0.5})
    loaded = load_checkpoint(path)
    assert isinstance(loaded, LoadedCheckpoint)
    assert loaded.append_info == {"lr": 0.5}
    parameters, append_info = loaded
    assert list(parameters) == ["w"]
    assert append_info == {"lr": 0.5}


def test_suffix_is_added_as_the_original_does(tmp_path: Path) -> None:
    path = save_checkpoint({"w": np.zeros(1)}, tmp_path / "model")
    assert path == str(tmp_path / "model.ckpt")
    assert os.path.isfile(path)


def test_any_safetensors_reader_opens_it(tmp_path: Path) -> None:
    mask = np.array([True, False])
    path = save_checkpoint(
        {"w": np.ones((2, 2), np.float32)},
        tmp_path / "x.ckpt",
        append_dict={"epoch_num": 3, "name": "net", "mask": mask},
    )
    tensors = safetensors.numpy.load_file(path)
    assert set(tensors) == {"w", "__append_info__/mask"}
    np.testing.assert_array_equal(tensors["__append_info__/mask"], mask)
    with safetensors.safe_open(path, framework="np") as handle:
        metadata = handle.metadata()
    assert metadata["format"] == "np"
    assert metadata["rankscribe.checkpoint"] == "2"
    assert json.loads(metadata["rankscribe.append_info"]) == {"epoch_num": 3, "name": "net"}
    assert json.loads(metadata["rankscribe.append_tensors"]) == ["mask"]
    assert len(metadata["rankscribe.sha256"]) == 64


def test_a_foreign_safetensors_file_loads_without_append_info(tmp_path: Path) -> None:
    path = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"a": np.arange(3)}, path)
    parameters, append_info = load_checkpoint(path)
    np.testing.assert_array_equal(parameters["a"], [0, 1, 2])
    assert append_info == {}


def test_append_values_keep_their_types(tmp_path: Path) -> None:
    values = {
        "i": 3,
        "f": 0.1,
        "t": True,
        "s": "text",
        "nan": float("nan"),
        "a": np.arange(4, dtype=np.uint16).reshape(2, 2),
        "g": np.float32(2.5),
    }
    path = save_checkpoint({"w": np.zeros(1)}, tmp_path / "x.ckpt", append_dict=values)
    _, info = load_checkpoint(path)
    assert type(info["i"]) is int
    assert info["f"] == 0.1
    assert info["t"] is True
    assert info["s"] == "text"
    assert np.isnan(info["nan"])
    assert info["a"].dtype == np.uint16
    np.testing.assert_array_equal(info["a"], values["a"])
    assert info["g"].dtype == np.float32  # a NumPy scalar is a 0-d array
    assert info["g"].shape == ()
    assert info["g"] == np.float32(2.5)


# --- refusals -----------------------------------------------------------------------


def test_reserved_parameter_prefix(tmp_path: Path) -> None:
    with pytest.raises(
        CollectorValueError,
        match="parameter '__append_info__/x' uses the prefix '__append_info__/'",
    ):
        save_checkpoint({"__append_info__/x": np.zeros(1)}, tmp_path / "x.ckpt")


def test_duplicate_parameter_names(tmp_path: Path) -> None:
    with pytest.raises(CollectorValueError, match=r"^parameter 'w' appears twice$"):
        save_checkpoint([("w", np.zeros(1)), ("w", np.ones(1))], tmp_path / "x.ckpt")


def test_empty_parameter_name(tmp_path: Path) -> None:
    with pytest.raises(
        CollectorValueError, match=r"^parameter names must be non-empty str, got ''$"
    ):
        save_checkpoint([("", np.zeros(1))], tmp_path / "x.ckpt")


@pytest.mark.parametrize(
    "array", [np.array(["a", "b"]), np.zeros(2, np.complex128), np.array([1], "datetime64[s]")]
)
def test_unstorable_dtypes(tmp_path: Path, array: np.ndarray) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        save_checkpoint({"w": array}, tmp_path / "x.ckpt")
    assert str(caught.value).startswith(
        f"parameter 'w' has dtype {array.dtype}, which a checkpoint cannot store"
    )
    assert not os.listdir(tmp_path)


def test_bad_file_name_type() -> None:
    with pytest.raises(
        CollectorTypeError, match=r"^ckpt_file_name must be a str or os.PathLike, got int$"
    ):
        save_checkpoint({"w": np.zeros(1)}, 3)  # type: ignore[arg-type]
    with pytest.raises(
        CollectorTypeError, match=r"^ckpt_file_name must be a str or os.PathLike, got NoneType$"
    ):
        load_checkpoint(None)  # type: ignore[arg-type]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        load_checkpoint(tmp_path / "absent.ckpt")
    # Both what Python code and what code written for the original expect.
    assert isinstance(caught.value, CheckpointError)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == f"checkpoint file {str(tmp_path / 'absent.ckpt')!r} does not exist"


def test_a_directory_is_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CollectorValueError) as caught:
        load_checkpoint(tmp_path)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        f"ckpt_file_name must name a checkpoint file, but {str(tmp_path)!r} is a directory"
    )


def test_a_fifo_is_not_a_checkpoint_and_is_never_waited_on(tmp_path: Path) -> None:
    # A FIFO at the name would make a plain open wait for a writer forever.
    os.mkfifo(tmp_path / "planted.ckpt")
    with pytest.raises(CollectorValueError) as caught:
        load_checkpoint(tmp_path / "planted.ckpt")
    assert str(caught.value) == (
        "ckpt_file_name must name a checkpoint file, but "
        f"{str(tmp_path / 'planted.ckpt')!r} is a FIFO"
    )


def test_a_link_the_user_made_to_a_checkpoint_is_followed(tmp_path: Path) -> None:
    save_checkpoint({"w": np.arange(3.0)}, tmp_path / "real.ckpt")
    (tmp_path / "latest.ckpt").symlink_to(tmp_path / "real.ckpt")
    parameters, _ = load_checkpoint(tmp_path / "latest.ckpt")
    np.testing.assert_array_equal(parameters["w"], np.arange(3.0))


@pytest.mark.parametrize("call", [load_checkpoint, partial(save_checkpoint, {"w": np.zeros(1)})])
def test_a_file_name_with_a_nul_character(tmp_path: Path, call: Callable[[str], Any]) -> None:
    name = f"{tmp_path}/x\0.ckpt"
    with pytest.raises(CollectorValueError) as caught:
        call(name)
    assert str(caught.value) == (
        f"ckpt_file_name must be a path without NUL characters ('\\0'), got {name!r}"
    )


# --- corruption of plain files ---------------------------------------------------------


@pytest.fixture
def plain_file(tmp_path: Path) -> Path:
    network = {"w": np.linspace(0, 1, 64, dtype=np.float32), "b": np.arange(8)}
    path = Path(save_checkpoint(network, tmp_path / "x.ckpt", append_dict={"lr": 0.1}))
    path.chmod(0o600)
    return path


def test_flipped_byte_in_tensor_data_is_detected(plain_file: Path) -> None:
    data = bytearray(plain_file.read_bytes())
    data[-5] ^= 0x01  # inside the last tensor's bytes
    plain_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointFormatError) as caught:
        load_checkpoint(plain_file)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        f"{str(plain_file)!r} is corrupted: its tensors or metadata do not match the SHA-256 "
        f"digest recorded when it was written"
    )


def rewrite_metadata(path: Path, change: Callable[[dict[str, str]], None]) -> None:
    """Write ``path`` again with the same tensors and ``change``d metadata, as a tool would."""
    with safetensors.safe_open(str(path), framework="np") as handle:
        metadata = dict(handle.metadata())
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    change(metadata)
    path.write_bytes(safetensors.numpy.save(tensors, metadata=metadata))


@pytest.fixture
def epoch_file(tmp_path: Path) -> Path:
    path = Path(
        save_checkpoint(
            {"w": np.arange(4, dtype=np.float32)},
            tmp_path / "e.ckpt",
            append_dict={"epoch_num": 5, "mask": np.array([True, False])},
        )
    )
    path.chmod(0o600)
    return path


def test_a_changed_append_value_is_detected(epoch_file: Path) -> None:
    data = epoch_file.read_bytes()
    assert data.count(b'\\"epoch_num\\": 5') == 1
    epoch_file.write_bytes(data.replace(b'\\"epoch_num\\": 5', b'\\"epoch_num\\": 4'))
    with pytest.raises(CheckpointFormatError) as caught:
        load_checkpoint(epoch_file)
    assert str(caught.value) == (
        f"{str(epoch_file)!r} is corrupted: its tensors or metadata do not match the SHA-256 "
        f"digest recorded when it was written"
    )


def test_every_single_bit_flip_of_the_header_is_refused_or_harmless(epoch_file: Path) -> None:
    data = epoch_file.read_bytes()
    expected = load_checkpoint(epoch_file)
    header_end = 8 + int.from_bytes(data[:8], "little")
    loaded = 0
    for offset in range(header_end):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[offset] ^= 1 << bit
            epoch_file.write_bytes(bytes(flipped))
            try:
                parameters, append_info = load_checkpoint(epoch_file)
            except CheckpointFormatError:
                continue
            loaded += 1
            np.testing.assert_array_equal(parameters["w"], expected.parameters["w"])
            assert append_info["epoch_num"] == 5
            np.testing.assert_array_equal(append_info["mask"], [True, False])
    assert loaded == 0, f"{loaded} flipped headers still loaded"


def test_a_checkpoint_without_its_digest_does_not_load(epoch_file: Path) -> None:
    rewrite_metadata(epoch_file, lambda metadata: metadata.pop("rankscribe.sha256"))
    with pytest.raises(CheckpointFormatError) as caught:
        load_checkpoint(epoch_file)
    assert str(caught.value) == (
        f"{str(epoch_file)!r} has no 'rankscribe.sha256' digest entry, which every checkpoint "
        f"is written with: the file was modified, so it is not loaded"
    )


def test_a_checkpoint_without_its_layout_version_does_not_load(epoch_file: Path) -> None:
    rewrite_metadata(epoch_file, lambda metadata: metadata.pop("rankscribe.checkpoint"))
    with pytest.raises(CheckpointFormatError, match="has checkpoint layout None"):
        load_checkpoint(epoch_file)


def test_layout_1_files_are_refused_naming_the_file(epoch_file: Path) -> None:
    def as_layout_1(metadata: dict[str, str]) -> None:
        metadata["rankscribe.checkpoint"] = "1"

    rewrite_metadata(epoch_file, as_layout_1)
    with pytest.raises(CheckpointFormatError) as caught:
        load_checkpoint(epoch_file)
    assert str(caught.value) == (
        f"{str(epoch_file)!r} is in checkpoint layout 1, which this version no longer loads: "
        f"its digest does not cover the append info; save the network again to write layout 2"
    )


def test_truncated_plain_file(plain_file: Path) -> None:
    data = plain_file.read_bytes()
    plain_file.write_bytes(data[:-10])
    with pytest.raises(CheckpointFormatError, match="is not a readable safetensors file"):
        load_checkpoint(plain_file)
    plain_file.write_bytes(data[:100])
    with pytest.raises(CheckpointFormatError, match="is truncated or not a checkpoint"):
        load_checkpoint(plain_file)
    plain_file.write_bytes(data[:5])
    with pytest.raises(CheckpointFormatError, match="is truncated: 5 bytes"):
        load_checkpoint(plain_file)


def test_not_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "notes.ckpt"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{{{{not json}}}}")
    with pytest.raises(CheckpointFormatError, match="has an unreadable safetensors header"):
        load_checkpoint(path)


# --- atomic writes -----------------------------------------------------------------------


def fail_halfway(handle: IO[bytes], chunk: bytes) -> None:
    handle.write(chunk[: len(chunk) // 2])
    handle.flush()
    raise OSError(28, "No space left on device")


def stop_writes_with(
    monkeypatch: pytest.MonkeyPatch, write: Callable[[IO[bytes], bytes], None]
) -> None:
    """Checkpoint files are written chunk by chunk through ``write`` (which may stop part-way)."""
    monkeypatch.setattr(checkpoint_format, "atomic_write", partial(atomic_write, write=write))


def test_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stop_writes_with(monkeypatch, fail_halfway)
    with pytest.raises(CheckpointWriteError) as caught:
        save_checkpoint({"w": np.zeros(1000)}, tmp_path / "x.ckpt")
    assert isinstance(caught.value, OSError)
    assert "No space left on device" in str(caught.value)
    assert os.listdir(tmp_path) == []  # neither the final name nor the temporary file


def test_failed_overwrite_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save_checkpoint({"w": np.full(10, 7.0)}, tmp_path / "x.ckpt")
    stop_writes_with(monkeypatch, fail_halfway)
    with pytest.raises(CheckpointWriteError):
        save_checkpoint({"w": np.full(10, 8.0)}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(load_checkpoint(path).parameters["w"], np.full(10, 7.0))
    assert os.listdir(tmp_path) == ["x.ckpt"]


def test_overwrite_replaces_a_read_only_file(tmp_path: Path) -> None:
    path = save_checkpoint({"w": np.zeros(2)}, tmp_path / "x.ckpt")
    save_checkpoint({"w": np.ones(2)}, path)
    np.testing.assert_array_equal(load_checkpoint(path).parameters["w"], [1, 1])


def test_errors_share_one_base(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "absent.ckpt")
    with pytest.raises(CheckpointError):
        save_checkpoint({"w": np.array(["s"])}, tmp_path / "x.ckpt")


def test_encode_and_decode_without_files() -> None:
    tensors = checkpoint_format.prepare_tensors([("w", np.arange(3.0))])
    data = checkpoint_format.encode_checkpoint(tensors, {"step_num": 4})
    parameters, info = checkpoint_format.decode_checkpoint(data)
    np.testing.assert_array_equal(parameters["w"], [0.0, 1.0, 2.0])
    assert info == {"step_num": 4}


def test_prepare_tensors_copy_detaches_from_the_network() -> None:
    weights = np.zeros(3)
    shared = checkpoint_format.prepare_tensors([("w", weights)])
    copied = checkpoint_format.prepare_tensors([("w", weights)], copy=True)
    weights[:] = 5
    assert shared["w"][0] == 5
    assert copied["w"][0] == 0


def test_options_are_keyword_only(tmp_path: Path) -> None:
    # The original's third positional argument is integrated_save, not append_dict.
    with pytest.raises(TypeError):
        save_checkpoint({"w": np.zeros(1)}, tmp_path / "x.ckpt", True)  # type: ignore[call-arg, arg-type]
    assert os.listdir(tmp_path) == []


def test_errors_belong_to_the_collectors_hierarchy() -> None:
    from rankscribe.collector import CollectorError

    assert issubclass(CheckpointError, CollectorError)
    assert issubclass(CheckpointWriteError, CollectorError)


# ------------------------------------------------------------------ linear reading
# A checkpoint may come from anyone (a shared folder, a download): ``load_checkpoint`` takes
# time linear in the file whatever its header holds (tests/_support/growth.py: 1, 4 and 16
# MB of each shape). safetensors itself parses the header again after our check; both count.


def _many_tensors(folder: Path) -> Callable[[int], Path]:
    """A checkpoint of one-float tensors: a header of many entries (about 100 bytes each)."""

    def build(size: int) -> Path:
        pairs = [(f"layer{index:08d}.w", np.zeros(1, np.float32)) for index in range(size // 100)]
        return Path(save_checkpoint(pairs, folder / f"tensors{size}"))

    return build


def _much_append_info(folder: Path) -> Callable[[int], Path]:
    """A checkpoint whose append info holds many keys: a long JSON text inside the header.

    Each value is a text of 64 characters: with bare numbers, ``json.loads`` alone (its
    key memo outgrowing the caches) grows 5-6x from 4 to 16 MB, at the limit's edge.
    """

    def build(size: int) -> Path:
        append = {f"key{index:08d}": f"{index:064d}" for index in range(size // 96)}
        pairs = [("w", np.zeros(1, np.float32))]
        return Path(save_checkpoint(pairs, folder / f"append{size}", append_dict=append))

    return build


def _forged_append_info(folder: Path) -> Callable[[int], Path]:
    """A checkpoint whose append info is 200 brackets then an unterminated string of escaped
    quotes, its digest made again (the digest finds corruption, not tampering): refused."""

    def build(size: int) -> Path:
        tensors = {"w": np.zeros(1, np.float32)}
        metadata = {
            "format": "np",
            "rankscribe.checkpoint": "2",
            "rankscribe.append_info": "[" * 200 + '"' + '\\"' * (size // 4),
            "rankscribe.append_tensors": "[]",
        }
        metadata["rankscribe.sha256"] = checkpoint_format._digest(metadata, tensors)
        path = folder / f"forged{size}.ckpt"
        safetensors.numpy.save_file(tensors, str(path), metadata=metadata)
        return path

    return build


def _loaded(path: Path) -> object:
    try:
        return load_checkpoint(path)
    except CheckpointError:
        return None


@pytest.mark.growth
@pytest.mark.parametrize(
    ("shape", "base"),
    [
        # A tensor at a time in Python (3 CPU s at 16 MB, 6 more to write it): from 256 KB.
        pytest.param(_many_tensors, SLOW_PARSE_BASE, id="_many_tensors"),
        pytest.param(_much_append_info, MEGABYTE, id="_much_append_info"),
        pytest.param(_forged_append_info, MEGABYTE, id="_forged_append_info"),
    ],
)
def test_a_checkpoint_is_read_in_linear_time(
    tmp_path: Path, shape: Callable[[Path], Callable[[int], Path]], base: int
) -> None:
    build = shape(tmp_path)

    def sized(size: int) -> Path:
        path = build(size)
        assert size // 2 <= path.stat().st_size <= 2 * size, (size, path.stat().st_size)
        return path

    assert_linear(_loaded, sized, base=base)


def test_the_hostile_checkpoints_read_back_or_are_refused(tmp_path: Path) -> None:
    loaded = load_checkpoint(_many_tensors(tmp_path)(1000))
    assert sorted(loaded.parameters) == [f"layer{index:08d}.w" for index in range(10)]
    assert load_checkpoint(_much_append_info(tmp_path)(960)).append_info == {
        f"key{index:08d}": f"{index:064d}" for index in range(10)
    }
    with pytest.raises(CheckpointFormatError, match="has unreadable append info metadata"):
        load_checkpoint(_forged_append_info(tmp_path)(1000))
