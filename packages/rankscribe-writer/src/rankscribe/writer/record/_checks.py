"""Argument checks of SummaryRecord, done once at the public boundary.

Messages keep the original's shape ("For 'SummaryRecord', the argument ...")
and name the argument, the value received and the form expected. What an int or a
bool is comes from the package's one argument-checking module, ``_arguments``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable

from rankscribe.writer._arguments import is_int, is_integral, is_real
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.files import is_valid_affix
from rankscribe.writer.record._export import FORMATS as EXPORT_FORMATS

logger = logging.getLogger(__name__)

FORMATS = ("mindinsight", "tensorboard")
MODES = ("train", "eval")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def integer_step(step: object) -> int:
    """An int step from any integer type (NumPy's included), never from bool or float."""
    if not is_integral(step):
        raise WriterTypeError(
            f"For 'SummaryRecord.record', the argument 'step' must be an int, but got "
            f"{type(step).__name__}."
        )
    return int(step)


def check_log_dir(log_dir: object) -> str:
    if not isinstance(log_dir, (str, os.PathLike)) or not os.fspath(log_dir):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a non-empty path, but got "
            f"{log_dir!r}."
        )
    if not isinstance(os.fspath(log_dir), str):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a str or os.PathLike "
            f"path, but got {type(os.fspath(log_dir)).__name__}."
        )
    if "\0" in os.fspath(log_dir):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a path without NUL "
            f"characters, but got {os.fspath(log_dir)!r}."
        )
    path = os.path.abspath(os.fspath(log_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a directory, but {path!r} "
            f"is a file."
        )
    return path


def check_affix(argument: str, value: object) -> None:
    if not is_valid_affix(value):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument '{argument}' must match "
            f"'^\\w+[0-9a-zA-Z_.]*$' (ASCII letters, digits, '_' and '.'), but got {value!r}."
        )


def check_max_file_size(value: object) -> int | None:
    if value is None:
        return None
    if not is_int(value):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'max_file_size' must be an int or None, but "
            f"got {type(value).__name__}."
        )
    if value < 0:
        # The original accepts a negative size as "no limit", with a warning.
        logger.warning(
            "For 'SummaryRecord', 'max_file_size' %d is negative: no limit is set.", value
        )
        return None
    if value == 0:
        raise WriterValueError(
            "For 'SummaryRecord', the argument 'max_file_size' must be greater than 0 (bytes) "
            "or None for no limit, but got 0."
        )
    return value


def check_export_options(options: object) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'export_options' must be a dict or None, but "
            f"got {type(options).__name__}."
        )
    unknown = set(options) - {"tensor_format"}
    if unknown:
        raise WriterValueError(
            f"For 'SummaryRecord', the keys of 'export_options' must be in ['tensor_format'], "
            f"but got {sorted(map(str, unknown))}."
        )
    tensor_format = options.get("tensor_format")
    if tensor_format is not None and tensor_format not in EXPORT_FORMATS:
        raise WriterValueError(
            f"For 'SummaryRecord', export_options['tensor_format'] must be one of "
            f"{[*EXPORT_FORMATS, None]}, but got {tensor_format!r}."
        )
    return tensor_format is not None


def check_formats(formats: object) -> tuple[str, ...]:
    if isinstance(formats, str):
        formats = (formats,)
    chosen: tuple[object, ...] = ()
    if isinstance(formats, Iterable):
        chosen = tuple(formats)
    if not chosen or any(item not in FORMATS for item in chosen):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'formats' must be a non-empty collection of "
            f"{list(FORMATS)}, but got {formats!r}."
        )
    return tuple(str(item) for item in chosen)


def check_rank(rank: object) -> None:
    valid_int = is_int(rank) and rank >= 0
    valid_str = isinstance(rank, str) and is_valid_affix(rank)
    if not (valid_int or valid_str):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'rank' must be an int >= 0 or a word such as "
            f"'merged', but got {rank!r}."
        )


def check_timeout(timeout: object) -> float | None:
    """``flush``'s timeout: None (wait as long as it takes) or seconds >= 0."""
    if timeout is None:
        return None
    if not is_real(timeout):
        raise WriterTypeError(
            f"For 'SummaryRecord.flush', the argument 'timeout' must be None or a number of "
            f"seconds, but got {type(timeout).__name__}."
        )
    seconds = float(timeout)
    if not seconds >= 0:  # NaN too
        raise WriterValueError(
            f"For 'SummaryRecord.flush', the argument 'timeout' must be >= 0 seconds, but got "
            f"{timeout!r}."
        )
    return seconds


def check_plugin_filter(plugin_filter: object) -> None:
    if plugin_filter is not None and not callable(plugin_filter):
        raise WriterTypeError(
            f"For 'SummaryRecord.record', the argument 'plugin_filter' must be None or a "
            f"callable taking a plugin name and returning a bool, but got "
            f"{type(plugin_filter).__name__}."
        )


def check_name_length(directory: str, longest_name: str) -> None:
    """Refuse a prefix or suffix that makes a file name longer than the directory can hold."""
    limit = 255
    probe = directory
    while probe and not os.path.isdir(probe):  # the directory may not exist yet
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    with contextlib.suppress(OSError, ValueError):  # no such limit here: keep 255
        limit = os.pathconf(probe, "PC_NAME_MAX")
    size = len(longest_name.encode())
    if size > limit:
        raise WriterValueError(
            f"For 'SummaryRecord', the arguments 'file_prefix' and 'file_suffix' make file "
            f"names of {size} bytes (e.g. {longest_name!r}), longer than the {limit} bytes a "
            f"file name can have in {directory!r}."
        )
