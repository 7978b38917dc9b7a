"""Errors raised by the collector, its checkpoints and its loop.

Every error derives from :class:`CollectorError` and from the built-in it
refines, so code written for MindSpore's ``SummaryCollector``,
``CheckpointConfig``, ``ModelCheckpoint`` and ``load_checkpoint`` (which raised
plain ``TypeError``, ``ValueError`` and ``OSError``) still catches what it
expects. The checkpoint errors share the base :class:`CheckpointError`.

The classes below the public ones refine them for one case each (a checkpoint's
bad argument, a missing file, a key that does not fit, a call at the wrong time);
they are raised with their own names, and a caller catches them by their public
bases (``CollectorTypeError``, ``CheckpointError``, ``FileNotFoundError``,
``RuntimeError``, ...), which is why they are not in ``__all__``.
"""

from __future__ import annotations

# The user's API: the bases a caller catches and the checkpoint errors the README names
# (CollectorError is also listed at the package top, as docs/contributing.md says).
__all__ = [
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointTimeoutError",
    "CheckpointWriteError",
    "CollectorError",
    "CollectorTypeError",
    "CollectorValueError",
]


class CollectorError(Exception):
    """Base class of every collector error."""


class CollectorTypeError(CollectorError, TypeError):
    """An argument has the wrong type."""


class CollectorValueError(CollectorError, ValueError):
    """An argument has the right type but an unusable value."""


class CheckpointError(CollectorError):
    """Base class of every checkpoint error."""


class CheckpointFormatError(CheckpointError, ValueError):
    """A file is not a readable checkpoint: truncated, corrupted, or not a checkpoint at all."""


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


# Refinements raised for one case each, caught by their public bases (not in __all__).
class CollectorStateError(CollectorError, RuntimeError):
    """A call made at the wrong time (a TrainSession step outside its epochs, say)."""


class CheckpointTypeError(CheckpointError, CollectorTypeError):
    """An argument has the wrong type."""


class CheckpointValueError(CheckpointError, CollectorValueError):
    """An argument has the right type but an unusable value."""


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
