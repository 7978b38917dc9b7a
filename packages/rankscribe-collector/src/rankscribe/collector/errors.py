"""Errors raised by the collector, its checkpoints and its loop.

Every error derives from :class:`CollectorError` and from the built-in it
refines, so code written for MindSpore's ``SummaryCollector``,
``CheckpointConfig``, ``ModelCheckpoint`` and ``load_checkpoint`` (which raised
plain ``TypeError``, ``ValueError`` and ``OSError``) still catches what it
expects. The checkpoint errors share the base :class:`CheckpointError`.
"""

from __future__ import annotations

__all__ = [
    "CheckpointAuthenticationError",
    "CheckpointEncryptionError",
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "CheckpointTimeoutError",
    "CheckpointTypeError",
    "CheckpointValueError",
    "CheckpointWriteError",
    "CollectorError",
    "CollectorStateError",
    "CollectorTypeError",
    "CollectorValueError",
]


class CollectorError(Exception):
    """Base class of every collector error."""


class CollectorStateError(CollectorError, RuntimeError):
    """A call made at the wrong time (a TrainSession step outside its epochs, say)."""


class CollectorTypeError(CollectorError, TypeError):
    """An argument has the wrong type."""


class CollectorValueError(CollectorError, ValueError):
    """An argument has the right type but an unusable value."""


class CheckpointError(CollectorError):
    """Base class of every checkpoint error."""


class CheckpointTypeError(CheckpointError, TypeError):
    """An argument has the wrong type."""


class CheckpointValueError(CheckpointError, ValueError):
    """An argument has the right type but an unusable value."""


class CheckpointFormatError(CheckpointError, ValueError):
    """A file is not a readable checkpoint: truncated, corrupted, or not a checkpoint at all."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError, ValueError):
    """The checkpoint file does not exist.

    A ``FileNotFoundError`` as Python code expects, and a ``ValueError`` as the
    original ``load_checkpoint`` raised.
    """


class CheckpointEncryptionError(CheckpointError, ValueError):
    """The file's encryption does not match the call.

    Raised for an encrypted file loaded without ``enc_key``, a plain file loaded
    with one, or an ``enc_mode`` other than the one the file was written with.
    """


class CheckpointAuthenticationError(CheckpointEncryptionError):
    """An encrypted file failed authentication: wrong ``enc_key``, or the file was
    truncated or modified. Nothing of its content is returned."""


class CheckpointWriteError(CheckpointError, OSError):
    """Writing a checkpoint failed (in the background, for ``async_save``).

    The original error is the ``__cause__``; no file was left under the
    checkpoint's name.
    """


class CheckpointTimeoutError(CheckpointError, TimeoutError):
    """A background save did not finish within the time allowed to wait for it.

    The save keeps running; waiting again (``end``, leaving the ``with`` block)
    may still see it complete.
    """
