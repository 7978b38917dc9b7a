"""``CheckpointConfig``: when to save checkpoints, how many to keep, and what goes in them.

Validation and precedence follow MindSpore's ``CheckpointConfig``:

- the four counts are ``None`` or non-negative ints (``TypeError`` for another
  type, ``bool`` included; ``ValueError`` for a negative one);
- the four counts cannot all be ``None``/0 (``ValueError``), as in the
  original. With only ``save_checkpoint_steps`` and ``save_checkpoint_seconds``
  at 0 the original's callback never saved a file; :class:`ModelCheckpoint`
  saves the final step at the end of training instead (and says so);
- ``save_checkpoint_steps > 0`` wins over ``save_checkpoint_seconds``, which then
  reads ``None``;
- ``keep_checkpoint_max > 0`` wins over ``keep_checkpoint_per_n_minutes``, which
  then reads ``None``; with both 0, ``keep_checkpoint_max`` becomes 1;
- ``append_info`` is a list of the strings ``"epoch_num"`` / ``"step_num"`` and
  at most one dict of str keys to int, float, bool or array values; every other
  element, an unknown string included, and a str value in the dict are a
  ``TypeError``, as the original's (MindSpore 1.x) ``_handle_append_info``
  raises. ``save_checkpoint``'s ``append_dict`` also takes str values.

The validators for ``enc_key``, ``enc_mode`` and append values are shared with
``save_checkpoint`` (:mod:`rankscribe.collector.checkpoint._format`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rankscribe.collector._checks import CHECKPOINT_CHECKS, is_int
from rankscribe.collector.adapters._parameters import PARAMETER_SOURCES, offers_parameters
from rankscribe.collector.checkpoint._crypto import ENC_MODES, KEY_LENGTHS
from rankscribe.collector.errors import CheckpointTypeError, CheckpointValueError

__all__ = [
    "APPEND_INFO_KEYWORDS",
    "CheckpointConfig",
    "check_append_value",
    "check_enc_key",
    "check_enc_mode",
]

#: Strings ``append_info`` may hold: "append the current epoch / step number".
APPEND_INFO_KEYWORDS = ("epoch_num", "step_num")

_APPEND_VALUE_FORM = "an int, float, bool, str, NumPy array or framework tensor"
# CheckpointConfig's append_info refuses a str value, as the original's did.
_APPEND_INFO_VALUE_FORM = "an int, float, bool, NumPy array or framework tensor"


class CheckpointConfig:
    """The configuration of :class:`ModelCheckpoint` (MindSpore's ``CheckpointConfig``).

    Args:
        save_checkpoint_steps: save every this many steps (0 or None: off).
        save_checkpoint_seconds: save when this many seconds have passed since the
            last save; ignored when ``save_checkpoint_steps`` is set.
        keep_checkpoint_max: keep at most this many checkpoint files.
        keep_checkpoint_per_n_minutes: keep about one file per this many minutes;
            ignored when ``keep_checkpoint_max`` is set.
        integrated_save: accepted and checked for compatibility; there are no
            sliced parameters to merge here, so it changes nothing.
        async_save: write files in a background thread; the step only copies the
            parameters.
        saved_network: a network to save instead of the one being trained.
        append_info: ``"epoch_num"``, ``"step_num"`` and/or one dict of extra values
            (int, float, bool, arrays; not str, as in the original) stored with
            the tensors. In the dict, ``epoch_num`` / ``step_num`` ints
            are offsets added to the current epoch / step (for resumed runs).
        enc_key: encrypt the files with this 16-, 24- or 32-byte AES key.
        enc_mode: ``"AES-GCM"`` or ``"AES-CBC"`` (the latter with HMAC-SHA256).
    """

    def __init__(
        self,
        save_checkpoint_steps: int | None = 1,
        save_checkpoint_seconds: int | None = 0,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_per_n_minutes: int | None = 0,
        integrated_save: bool = True,
        async_save: bool = False,
        saved_network: Any = None,
        append_info: list[str | dict[str, Any]] | tuple[str | dict[str, Any], ...] | None = None,
        enc_key: bytes | None = None,
        enc_mode: str = "AES-GCM",
    ) -> None:
        steps = _check_count("save_checkpoint_steps", save_checkpoint_steps)
        seconds = _check_count("save_checkpoint_seconds", save_checkpoint_seconds)
        keep_max = _check_count("keep_checkpoint_max", keep_checkpoint_max)
        per_minutes = _check_count("keep_checkpoint_per_n_minutes", keep_checkpoint_per_n_minutes)
        if not (steps or seconds or keep_max or per_minutes):
            raise CheckpointValueError(
                "For 'CheckpointConfig', the input arguments 'save_checkpoint_steps', "
                "'save_checkpoint_seconds', 'keep_checkpoint_max' and "
                "'keep_checkpoint_per_n_minutes' can't be all None or 0: got "
                f"{save_checkpoint_steps!r}, {save_checkpoint_seconds!r}, "
                f"{keep_checkpoint_max!r}, {keep_checkpoint_per_n_minutes!r}"
            )
        # The original's precedence: a step trigger disables the time trigger, a
        # file count disables the per-minutes rule, and with neither retention
        # rule only the newest file is kept.
        self._save_checkpoint_steps = steps
        self._save_checkpoint_seconds = None if steps else seconds
        self._keep_checkpoint_max = keep_max if keep_max or per_minutes else 1
        self._keep_checkpoint_per_n_minutes = None if keep_max else per_minutes
        self._integrated_save = _check_bool("integrated_save", integrated_save)
        self._async_save = _check_bool("async_save", async_save)
        self._saved_network = _check_saved_network(saved_network)
        self._append_dict = _check_append_info(append_info)
        self._enc_key = check_enc_key(enc_key)
        self._enc_mode = check_enc_mode(enc_mode)

    @property
    def save_checkpoint_steps(self) -> int | None:
        return self._save_checkpoint_steps

    @property
    def save_checkpoint_seconds(self) -> int | None:
        return self._save_checkpoint_seconds

    @property
    def keep_checkpoint_max(self) -> int | None:
        return self._keep_checkpoint_max

    @property
    def keep_checkpoint_per_n_minutes(self) -> int | None:
        return self._keep_checkpoint_per_n_minutes

    @property
    def integrated_save(self) -> bool:
        return self._integrated_save

    @property
    def async_save(self) -> bool:
        return self._async_save

    @property
    def saved_network(self) -> Any:
        return self._saved_network

    @property
    def append_dict(self) -> dict[str, Any] | None:
        """The validated ``append_info`` as one dict (``None`` when empty), as the original."""
        return None if self._append_dict is None else dict(self._append_dict)

    @property
    def enc_key(self) -> bytes | None:
        return self._enc_key

    @property
    def enc_mode(self) -> str:
        return self._enc_mode

    def get_checkpoint_policy(self) -> dict[str, Any]:
        """The save and keep policy and ``saved_network``, as the original's method."""
        return {
            "save_checkpoint_steps": self._save_checkpoint_steps,
            "save_checkpoint_seconds": self._save_checkpoint_seconds,
            "keep_checkpoint_max": self._keep_checkpoint_max,
            "keep_checkpoint_per_n_minutes": self._keep_checkpoint_per_n_minutes,
            "saved_network": self._saved_network,
        }

    def __repr__(self) -> str:
        # The key itself is a secret: show only that there is one.
        key = "None" if self._enc_key is None else f"<{len(self._enc_key)}-byte key>"
        # A network's repr can run to pages: its type says which one it is.
        policy = ", ".join(
            f"{name}={value!r}"
            if name != "saved_network" or value is None
            else f"{name}=<{type(value).__name__}>"
            for name, value in self.get_checkpoint_policy().items()
        )
        return (
            f"CheckpointConfig({policy}, async_save={self._async_save!r}, "
            f"append_info={sorted(self._append_dict or {})!r}, enc_key={key}, "
            f"enc_mode={self._enc_mode!r})"
        )


def check_enc_key(enc_key: object) -> bytes | None:
    """``enc_key`` if it is ``None`` or bytes of an AES key length, else raise."""
    if enc_key is None:
        return None
    if not isinstance(enc_key, bytes):
        raise CheckpointTypeError(
            f"enc_key must be None or bytes of length 16, 24 or 32, got {type(enc_key).__name__}"
        )
    if len(enc_key) not in KEY_LENGTHS:
        raise CheckpointValueError(
            f"enc_key must be 16, 24 or 32 bytes long (AES-128/192/256), got {len(enc_key)} bytes"
        )
    return enc_key


def check_enc_mode(enc_mode: object) -> str:
    """``enc_mode`` if it names a supported mode, else raise."""
    if not isinstance(enc_mode, str):
        raise CheckpointTypeError(
            f"enc_mode must be a str, one of {', '.join(map(repr, ENC_MODES))}, "
            f"got {enc_mode!r} ({type(enc_mode).__name__})"
        )
    if enc_mode not in ENC_MODES:
        raise CheckpointValueError(
            f"enc_mode must be one of {', '.join(map(repr, ENC_MODES))}, got {enc_mode!r}"
        )
    return enc_mode


def check_append_value(
    key: object, value: object, argument: str = "append_info", *, strings: bool = True
) -> None:
    """Raise unless ``key`` is a str and ``value`` a storable append value (a str one only
    with ``strings``)."""
    if not isinstance(key, str) or not key:
        raise CheckpointTypeError(
            f"the keys of the {argument} dict must be non-empty str, got {key!r} "
            f"({type(key).__name__})"
        )
    if key in APPEND_INFO_KEYWORDS and not is_int(value):
        raise CheckpointTypeError(
            f"{argument}[{key!r}] is an offset added to the current {key.split('_')[0]} and "
            f"must be an int, got {value!r} ({type(value).__name__})"
        )
    if not _is_append_value(value) or (isinstance(value, str) and not strings):
        form = _APPEND_VALUE_FORM if strings else _APPEND_INFO_VALUE_FORM
        raise CheckpointTypeError(
            f"{argument}[{key!r}] must be {form}, got {value!r} ({type(value).__name__})"
            if isinstance(value, str)
            else f"{argument}[{key!r}] must be {form}, got {type(value).__name__}"
        )


def _is_append_value(value: object) -> bool:
    if isinstance(value, (bool, int, float, str, np.ndarray, np.generic)):
        return not (isinstance(value, np.ndarray) and value.dtype == object)
    return any(callable(getattr(value, method, None)) for method in ("detach", "asnumpy", "numpy"))


def _check_count(name: str, value: object) -> int | None:
    return CHECKPOINT_CHECKS.check_optional_int(name, value, minimum=0, integral=True)


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise CheckpointTypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def _check_saved_network(network: object) -> Any:
    if network is not None and not offers_parameters(network):
        raise CheckpointTypeError(
            f"saved_network must be None or a network with {', '.join(PARAMETER_SOURCES[:-1])}, "
            f"or {PARAMETER_SOURCES[-1]}; got {type(network).__name__}"
        )
    return network


def _check_append_info(append_info: object) -> dict[str, Any] | None:
    if append_info is None:
        return None
    if not isinstance(append_info, (list, tuple)):
        raise CheckpointTypeError(
            f"append_info must be a list of 'epoch_num', 'step_num' and at most one dict, "
            f"got {type(append_info).__name__}"
        )
    if not append_info:
        return None
    # The keywords come first and a dict may override them: an int given for
    # "epoch_num"/"step_num" in the dict is the original's resume offset.
    appended: dict[str, Any] = {key: 0 for key in APPEND_INFO_KEYWORDS if key in append_info}
    dicts = 0
    for index, element in enumerate(append_info):
        if isinstance(element, str):
            if element not in APPEND_INFO_KEYWORDS:
                # A TypeError, as the original's (the value names no type, but
                # code written for it catches TypeError).
                raise CheckpointTypeError(
                    f"append_info[{index}] must be 'epoch_num', 'step_num' or a dict, "
                    f"got {element!r}"
                )
        elif isinstance(element, Mapping):
            dicts += 1
            if dicts > 1:
                raise CheckpointTypeError(
                    f"append_info may hold only one dict, but append_info[{index}] is a second one"
                )
            for key, value in element.items():
                check_append_value(key, value, strings=False)
                appended[key] = value
        else:
            raise CheckpointTypeError(
                f"append_info[{index}] must be 'epoch_num', 'step_num' or a dict, "
                f"got {type(element).__name__}"
            )
    return appended
