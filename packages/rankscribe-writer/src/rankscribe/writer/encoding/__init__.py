"""Recorded values and their encoding: from an ``add_value`` argument to record payloads.

Owns the checks and copies made on the training thread (``_values``), the encoders
of each plugin (histogram buckets, PNG images, tensors, graphs) with MindSpore's
rules (``docs/file-format.md``, "What goes in each file"), the TensorBoard
target's encoding, and the encoding of one whole step.
May import: ``format``, ``_arguments``, ``rankscribe.writer.errors``,
``rankscribe.writer.pb``.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
