"""Encrypted checkpoints: round trips in both modes, wrong keys, tampering, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.collector import (
    CallbackParams,
    CheckpointConfig,
    ModelCheckpoint,
    RunContext,
    load_checkpoint,
    save_checkpoint,
)

# private: the checkpoint cipher's framing and MAGIC, no public door
from rankscribe.collector.checkpoint._crypto import MAGIC, decrypt, encrypt_chunks
from rankscribe.collector.errors import (
    CheckpointError,
    CheckpointFormatError,
)

MODES = ["AES-GCM", "AES-CBC"]
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
# A wrong key, or a file changed after it was written: its message, whatever the mode.
AUTHENTICATION_FAILED = r"failed AES-(GCM|CBC) authentication: the enc_key is wrong"
NETWORK: dict[str, np.ndarray] = {
    "encoder.weight": np.linspace(-1, 1, 50, dtype=np.float32).reshape(5, 10),
    "encoder.bias": np.arange(5, dtype=np.int64),
}


def save(path: Path, mode: str, key: bytes = KEY) -> Path:
    written = Path(
        save_checkpoint(
            NETWORK, path, append_dict={"epoch_num": 2, "note": "x"}, enc_key=key, enc_mode=mode
        )
    )
    written.chmod(0o600)  # checkpoints are 0400; the tests rewrite them
    return written


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("length", [16, 24, 32])
def test_round_trip(tmp_path: Path, mode: str, length: int) -> None:
    path = save(tmp_path / "x.ckpt", mode, KEY[:length])
    parameters, info = load_checkpoint(path, enc_key=KEY[:length])
    assert set(parameters) == set(NETWORK)
    for name, array in NETWORK.items():
        np.testing.assert_array_equal(parameters[name], array)
        assert parameters[name].dtype == array.dtype
    assert info == {"epoch_num": 2, "note": "x"}
    assert load_checkpoint(path, enc_key=KEY[:length], enc_mode=mode).append_info == info


@pytest.mark.parametrize("mode", MODES)
def test_file_is_encrypted(tmp_path: Path, mode: str) -> None:
    data = save(tmp_path / "x.ckpt", mode).read_bytes()
    assert data.startswith(MAGIC)
    assert b"encoder.weight" not in data
    assert b"__metadata__" not in data
    assert NETWORK["encoder.weight"].tobytes()[:16] not in data


@pytest.mark.parametrize("mode", MODES)
def test_same_content_encrypts_differently_each_time(tmp_path: Path, mode: str) -> None:
    first = save(tmp_path / "a.ckpt", mode).read_bytes()
    second = save(tmp_path / "b.ckpt", mode).read_bytes()
    assert first != second  # fresh nonce / salt and IV per file


@pytest.mark.parametrize("mode", MODES)
def test_wrong_key(tmp_path: Path, mode: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED) as caught:
        load_checkpoint(path, enc_key=OTHER_KEY)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        f"{str(path)!r} failed {mode} authentication: the enc_key is wrong, or the file was "
        f"truncated or modified; nothing was loaded"
    )


@pytest.mark.parametrize("mode", MODES)
def test_key_of_another_length(tmp_path: Path, mode: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED):
        load_checkpoint(path, enc_key=KEY[:16])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["nonce or salt", "middle", "last byte"])
def test_tampered_byte(tmp_path: Path, mode: str, where: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    data = bytearray(path.read_bytes())
    position = {"nonce or salt": 12, "middle": len(data) // 2, "last byte": len(data) - 1}[where]
    data[position] ^= 0x80
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED):
        load_checkpoint(path, enc_key=KEY)


@pytest.mark.parametrize("mode", MODES)
def test_truncated(tmp_path: Path, mode: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    data = path.read_bytes()
    for kept in (len(data) - 1, len(data) - 16, len(data) // 2):
        path.write_bytes(data[:kept])
        with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED):
            load_checkpoint(path, enc_key=KEY)
    path.write_bytes(data[:20])
    with pytest.raises(CheckpointFormatError) as caught:
        load_checkpoint(path, enc_key=KEY)
    assert "is truncated: 20 bytes" in str(caught.value)


@pytest.mark.parametrize("mode", MODES)
def test_appended_bytes(tmp_path: Path, mode: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED):
        load_checkpoint(path, enc_key=KEY)


@pytest.mark.parametrize("mode", MODES)
def test_encrypted_file_without_key(tmp_path: Path, mode: str) -> None:
    path = save(tmp_path / "x.ckpt", mode)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == f"{str(path)!r} is encrypted: pass its enc_key to load it"


def test_plain_file_with_key(tmp_path: Path) -> None:
    path = save_checkpoint(NETWORK, tmp_path / "x.ckpt")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path, enc_key=KEY)
    assert str(caught.value) == (
        f"{path!r} is not encrypted, but an enc_key was given; load it with enc_key=None"
    )


def test_mode_other_than_the_files(tmp_path: Path) -> None:
    path = save(tmp_path / "x.ckpt", "AES-CBC")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path, enc_key=KEY, enc_mode="AES-GCM")
    assert str(caught.value) == (
        f"{str(path)!r} was encrypted with AES-CBC, but enc_mode='AES-GCM' was given; pass "
        f"enc_mode='AES-CBC' (or None to follow the file)"
    )


def test_unknown_mode_byte(tmp_path: Path) -> None:
    path = save(tmp_path / "x.ckpt", "AES-GCM")
    data = bytearray(path.read_bytes())
    data[len(MAGIC)] = 9
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointFormatError, match="unknown encryption mode byte 9"):
        load_checkpoint(path, enc_key=KEY)


def test_invalid_key_arguments_on_load(tmp_path: Path) -> None:
    path = save(tmp_path / "x.ckpt", "AES-GCM")
    with pytest.raises(TypeError, match="enc_key must be None or bytes"):
        load_checkpoint(path, enc_key="0123456789abcdef")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="enc_key must be 16, 24 or 32 bytes long"):
        load_checkpoint(path, enc_key=b"short")
    with pytest.raises(ValueError, match="enc_mode must be one of"):
        load_checkpoint(path, enc_key=KEY, enc_mode="AES-XTS")


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_any_single_byte_change_is_refused(mode: str, data: st.DataObject) -> None:
    plaintext = b"safetensors bytes " * 20
    sealed = bytearray(b"".join(encrypt_chunks(plaintext, KEY, mode)))
    position = data.draw(st.integers(0, len(sealed) - 1), label="position")
    flip = data.draw(st.integers(1, 255), label="xor")
    sealed[position] ^= flip
    # Never plaintext: either not recognised as ours, or refused.
    with pytest.raises(CheckpointError):
        decrypt(bytes(sealed), KEY, None, "blob")


@pytest.mark.parametrize("mode", MODES)
@given(plaintext=st.binary(max_size=200))
def test_envelope_round_trips_any_plaintext(mode: str, plaintext: bytes) -> None:
    sealed = b"".join(encrypt_chunks(plaintext, KEY[:16], mode))
    assert decrypt(sealed, KEY[:16], mode, "blob") == plaintext


@pytest.mark.parametrize("mode", MODES)
def test_model_checkpoint_writes_encrypted_files(tmp_path: Path, mode: str) -> None:
    config = CheckpointConfig(enc_key=KEY[:24], enc_mode=mode)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    params = CallbackParams(train_network=NETWORK, cur_epoch_num=1, cur_step_num=1, batch_num=1)
    callback.step_end(RunContext(params))
    callback.end(RunContext(params))
    latest = callback.latest_ckpt_file_name
    assert latest is not None
    assert Path(latest).read_bytes().startswith(MAGIC)
    parameters, _ = load_checkpoint(latest, enc_key=KEY[:24])
    np.testing.assert_array_equal(parameters["encoder.bias"], NETWORK["encoder.bias"])
    with pytest.raises(CheckpointError, match=AUTHENTICATION_FAILED):
        load_checkpoint(latest, enc_key=KEY[:16] + KEY[24:32])
    assert os.listdir(tmp_path) == ["CKP-1_1.ckpt"]
