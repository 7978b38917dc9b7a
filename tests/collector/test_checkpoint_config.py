"""CheckpointConfig: every validation rule (error type and message) and the precedence rules."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import CheckpointConfig
from rankscribe.collector.errors import CheckpointError, CollectorTypeError, CollectorValueError

COUNTS = (
    "save_checkpoint_steps",
    "save_checkpoint_seconds",
    "keep_checkpoint_max",
    "keep_checkpoint_per_n_minutes",
)


def test_defaults_are_the_originals() -> None:
    config = CheckpointConfig()
    assert config.get_checkpoint_policy() == {
        "save_checkpoint_steps": 1,
        "save_checkpoint_seconds": None,  # disabled by the step trigger
        "keep_checkpoint_max": 5,
        "keep_checkpoint_per_n_minutes": None,  # disabled by keep_checkpoint_max
        "saved_network": None,
    }
    assert config.integrated_save is True
    assert config.async_save is False
    assert config.saved_network is None
    assert config.append_dict is None
    assert config.enc_key is None
    assert config.enc_mode == "AES-GCM"


@pytest.mark.parametrize("name", COUNTS)
@pytest.mark.parametrize("value", [1.5, "3", True, [1]])
def test_counts_must_be_ints(name: str, value: Any) -> None:
    arguments = {"save_checkpoint_steps": 1, name: value}
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(**arguments)
    assert isinstance(caught.value, TypeError)
    assert str(caught.value) == (
        f"{name} must be an int >= 0 or None, got {value!r} ({type(value).__name__})"
    )


@pytest.mark.parametrize("name", COUNTS)
def test_counts_must_not_be_negative(name: str) -> None:
    arguments: dict[str, Any] = {"save_checkpoint_steps": 1, name: -2}
    with pytest.raises(CollectorValueError, match=f"^{name} must be an int >= 0 or None, got -2$"):
        CheckpointConfig(**arguments)


def test_numpy_integers_are_accepted_as_ints() -> None:
    steps: Any = np.int64(3)
    keep: Any = np.int32(2)
    config = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=keep)
    assert config.save_checkpoint_steps == 3
    assert type(config.save_checkpoint_steps) is int
    assert config.keep_checkpoint_max == 2


@pytest.mark.parametrize("steps, seconds", [(0, 0), (None, None), (0, None)])
def test_steps_and_seconds_off_are_accepted_with_a_keep_rule(
    steps: int | None, seconds: int | None
) -> None:
    # As the original: only all four off is refused.
    config = CheckpointConfig(
        save_checkpoint_steps=steps,
        save_checkpoint_seconds=seconds,
        keep_checkpoint_max=5,
        keep_checkpoint_per_n_minutes=3,
    )
    assert config.save_checkpoint_steps == steps
    assert config.save_checkpoint_seconds == seconds
    assert config.keep_checkpoint_max == 5


@pytest.mark.parametrize("counts", [(0, 0, 0, 0), (None, None, None, None), (0, None, 0, None)])
def test_all_four_zero_is_refused_as_in_the_original(counts: tuple[Any, ...]) -> None:
    with pytest.raises(CollectorValueError) as caught:
        CheckpointConfig(*counts)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        "For 'CheckpointConfig', the input arguments 'save_checkpoint_steps', "
        "'save_checkpoint_seconds', 'keep_checkpoint_max' and 'keep_checkpoint_per_n_minutes' "
        f"can't be all None or 0: got {', '.join(map(repr, counts))}"
    )


def test_the_policy_names_the_saved_network() -> None:
    network = {"w": np.zeros(2)}
    policy = CheckpointConfig(saved_network=network).get_checkpoint_policy()
    assert policy["saved_network"] is network
    assert "saved_network=<dict>" in repr(CheckpointConfig(saved_network=network))


def test_steps_take_precedence_over_seconds() -> None:
    config = CheckpointConfig(save_checkpoint_steps=10, save_checkpoint_seconds=30)
    assert config.save_checkpoint_steps == 10
    assert config.save_checkpoint_seconds is None


def test_seconds_apply_when_steps_are_off() -> None:
    config = CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=30)
    assert config.save_checkpoint_steps == 0
    assert config.save_checkpoint_seconds == 30


def test_keep_max_takes_precedence_over_per_n_minutes() -> None:
    config = CheckpointConfig(keep_checkpoint_max=3, keep_checkpoint_per_n_minutes=2)
    assert config.keep_checkpoint_max == 3
    assert config.keep_checkpoint_per_n_minutes is None


def test_per_n_minutes_applies_when_keep_max_is_off() -> None:
    config = CheckpointConfig(keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=2)
    assert config.keep_checkpoint_max == 0
    assert config.keep_checkpoint_per_n_minutes == 2


@pytest.mark.parametrize("keep_max, per_minutes", [(0, 0), (None, None), (0, None)])
def test_no_keep_rule_keeps_one_file(keep_max: int | None, per_minutes: int | None) -> None:
    config = CheckpointConfig(
        keep_checkpoint_max=keep_max, keep_checkpoint_per_n_minutes=per_minutes
    )
    assert config.keep_checkpoint_max == 1


@pytest.mark.parametrize("name", ["integrated_save", "async_save"])
@pytest.mark.parametrize("value", [1, "yes", None])
def test_flags_must_be_bools(name: str, value: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(**{name: value})
    assert str(caught.value) == f"{name} must be a bool, got {value!r} ({type(value).__name__})"


def test_saved_network_must_offer_parameters() -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(saved_network="net")
    assert isinstance(caught.value, TypeError)
    message = str(caught.value)
    assert message.startswith("saved_network must be None or a network with named_parameters()")
    assert message.endswith("got str")


def test_saved_network_may_be_a_mapping_or_a_duck_typed_network() -> None:
    weights = {"w": np.zeros(2)}
    assert CheckpointConfig(saved_network=weights).saved_network is weights

    class Net:
        def state_dict(self) -> dict[str, Any]:
            return weights

    network = Net()
    assert CheckpointConfig(saved_network=network).saved_network is network


# --- append_info -----------------------------------------------------------------


def test_append_info_keywords_and_dict() -> None:
    mask = np.arange(3)
    config = CheckpointConfig(
        append_info=[
            "epoch_num",
            {"lr": 0.1, "seed": 7, "flag": False, "mask": mask},
            "step_num",
        ]
    )
    appended = config.append_dict
    assert appended is not None
    assert list(appended) == ["epoch_num", "step_num", "lr", "seed", "flag", "mask"]
    assert appended["epoch_num"] == 0
    assert appended["step_num"] == 0
    assert appended["mask"] is mask


def test_empty_append_info_is_none() -> None:
    assert CheckpointConfig(append_info=[]).append_dict is None
    assert CheckpointConfig(append_info=None).append_dict is None


def test_a_tuple_append_info_is_read_as_the_list() -> None:
    # MindSpore refuses a tuple ("the type of 'append_info' must be list"); read here as
    # the list of the same items (docs/mindinsight-differences.md, "tuple-append_info").
    items = ("epoch_num", {"seed": 7}, "step_num")
    assert CheckpointConfig(append_info=items).append_dict == {
        "epoch_num": 0,
        "step_num": 0,
        "seed": 7,
    }
    assert CheckpointConfig(append_info=()).append_dict is None


def test_append_dict_is_a_copy() -> None:
    config = CheckpointConfig(append_info=["epoch_num"])
    appended = config.append_dict
    assert appended is not None
    appended["epoch_num"] = 99
    assert config.append_dict == {"epoch_num": 0}


def test_append_info_dict_offsets_for_epoch_and_step() -> None:
    config = CheckpointConfig(append_info=["epoch_num", {"epoch_num": 10}])
    assert config.append_dict == {"epoch_num": 10}


@pytest.mark.parametrize("append_info", ["epoch_num", {"lr": 1}, 3])
def test_append_info_must_be_a_list(append_info: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(append_info=append_info)
    assert str(caught.value) == (
        "append_info must be a list of 'epoch_num', 'step_num' and at most one dict, "
        f"got {type(append_info).__name__}"
    )


def test_the_originals_append_info_example() -> None:
    # MindSpore's documented use, as written there.
    append_info: list[str | dict[str, Any]] = [
        "epoch_num",
        "step_num",
        {"lr": 0.01, "momentum": 0.9},
    ]
    config_ck = CheckpointConfig(append_info=append_info)
    assert config_ck.append_dict == {"epoch_num": 0, "step_num": 0, "lr": 0.01, "momentum": 0.9}


def test_append_info_unknown_string_is_a_type_error_as_in_the_original() -> None:
    # The original's _handle_append_info raises TypeError for a string that is
    # neither "epoch_num" nor "step_num".
    with pytest.raises(TypeError) as caught:
        CheckpointConfig(append_info=["epoch_num", "loss"])
    assert isinstance(caught.value, CheckpointError) and isinstance(
        caught.value, CollectorTypeError
    )
    assert not isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        "append_info[1] must be 'epoch_num', 'step_num' or a dict, got 'loss'"
    )


def test_append_info_refuses_a_str_value_as_the_original() -> None:
    # The original's dict values are int, float or bool (its TypeError otherwise).
    with pytest.raises(TypeError) as caught:
        CheckpointConfig(append_info=["epoch_num", {"name": "resnet"}])
    assert isinstance(caught.value, CheckpointError) and isinstance(
        caught.value, CollectorTypeError
    )
    assert str(caught.value) == (
        "append_info['name'] must be an int, float, bool, NumPy array or framework tensor, "
        "got 'resnet' (str)"
    )


def test_append_info_element_of_wrong_type() -> None:
    with pytest.raises(
        CollectorTypeError,
        match=r"^append_info\[0\] must be 'epoch_num', 'step_num' or a dict, "
        r"got int$",
    ):
        CheckpointConfig(append_info=[5])  # type: ignore[list-item]


def test_append_info_holds_one_dict_only() -> None:
    with pytest.raises(
        CollectorTypeError,
        match=r"^append_info may hold only one dict, but append_info\[2\] is a "
        r"second one$",
    ):
        CheckpointConfig(append_info=[{"a": 1}, "epoch_num", {"b": 2}])


@pytest.mark.parametrize("key", [1, b"lr", ""])
def test_append_info_keys_must_be_strings(key: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(append_info=[{key: 1}])
    assert str(caught.value) == (
        f"the keys of the append_info dict must be non-empty str, got {key!r} "
        f"({type(key).__name__})"
    )


@pytest.mark.parametrize("value", [None, [1, 2], {"a": 1}, object(), np.array([object()])])
def test_append_info_values_must_be_storable(value: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(append_info=[{"extra": value}])
    assert str(caught.value) == (
        "append_info['extra'] must be an int, float, bool, NumPy array or framework "
        f"tensor, got {type(value).__name__}"
    )


@pytest.mark.parametrize("value", [1.5, "10", True])
def test_append_info_offsets_must_be_ints(value: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(append_info=[{"step_num": value}])
    assert str(caught.value) == (
        "append_info['step_num'] is an offset added to the current step and must be an int, "
        f"got {value!r} ({type(value).__name__})"
    )


# --- encryption -------------------------------------------------------------------


@pytest.mark.parametrize("length", [16, 24, 32])
@pytest.mark.parametrize("mode", ["AES-GCM", "AES-CBC"])
def test_valid_keys_and_modes(length: int, mode: str) -> None:
    config = CheckpointConfig(enc_key=b"k" * length, enc_mode=mode)
    assert config.enc_key == b"k" * length
    assert config.enc_mode == mode


@pytest.mark.parametrize("key", ["0123456789abcdef", bytearray(16), 16])
def test_enc_key_must_be_bytes(key: Any) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        CheckpointConfig(enc_key=key)
    assert str(caught.value) == (
        f"enc_key must be None or bytes of length 16, 24 or 32, got {type(key).__name__}"
    )


@pytest.mark.parametrize("length", [0, 8, 15, 17, 31, 33, 64])
def test_enc_key_length(length: int) -> None:
    with pytest.raises(CollectorValueError) as caught:
        CheckpointConfig(enc_key=b"k" * length)
    assert str(caught.value) == (
        f"enc_key must be 16, 24 or 32 bytes long (AES-128/192/256), got {length} bytes"
    )


@pytest.mark.parametrize("mode", ["aes-gcm", "AES-ECB", "SM4-CBC", ""])
def test_enc_mode_value(mode: str) -> None:
    with pytest.raises(CollectorValueError) as caught:
        CheckpointConfig(enc_key=b"k" * 16, enc_mode=mode)
    assert str(caught.value) == f"enc_mode must be one of 'AES-GCM', 'AES-CBC', got {mode!r}"


def test_enc_mode_type() -> None:
    with pytest.raises(
        CollectorTypeError,
        match=re.escape("enc_mode must be a str, one of 'AES-GCM', 'AES-CBC', got None (NoneType)"),
    ):
        CheckpointConfig(enc_mode=None)  # type: ignore[arg-type]


def test_repr_never_shows_the_key() -> None:
    text = repr(CheckpointConfig(enc_key=b"secret-key-16-by"))
    assert "secret" not in text
    assert "<16-byte key>" in text


def test_every_error_is_a_checkpoint_error() -> None:
    for arguments in ({"save_checkpoint_steps": -1}, {"async_save": 1}, {"enc_key": b"x"}):
        with pytest.raises(CheckpointError):
            CheckpointConfig(**arguments)
