"""The files on disk: names, record framing, checksums, event envelopes, output streams.

Owns what a summary, lineage or TensorBoard file looks like byte for byte and by
name (``docs/file-format.md``): the TFRecord framing and its CRC-32C, the wire
bytes of an ``Event``/``LineageEvent`` envelope, the file names, and the
rotating stream that puts framed records into files. The public face of these
rules is :mod:`rankscribe.writer.files`.
May import: ``rankscribe.writer.errors`` and the argument checks ``_arguments``.
Nothing else of this package.
"""

__all__: list[str] = []  # the modules inside are private; rankscribe.writer.files is public
