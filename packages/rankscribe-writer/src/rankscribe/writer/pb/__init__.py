"""Protobuf messages of the summary wire format (a public module).

The ``*_pb2`` modules are generated from ``proto/rankscribe/writer/pb`` by
``python tools/gen_proto.py``; do not edit them by hand. The field numbers are
the original system's (``docs/file-format.md``).

- ``summary_pb2``: ``Event`` / ``Summary`` (the ``_MS`` files)
- ``anf_ir_pb2``: ``TensorProto``, ``GraphProto``, ``ModelProto``
- ``lineage_pb2``: ``LineageEvent`` and its payloads (the ``_lineage`` files)
- ``tensorboard_pb2`` / ``tensorboard_hparams_pb2``: the TensorBoard target
- ``tensorboard_custom_scalars_pb2``: the Custom Scalars dashboard's ``Layout``
"""

from rankscribe.writer.pb import (
    anf_ir_pb2,
    lineage_pb2,
    summary_pb2,
    tensorboard_custom_scalars_pb2,
    tensorboard_hparams_pb2,
    tensorboard_pb2,
)

__all__ = [
    "anf_ir_pb2",
    "lineage_pb2",
    "summary_pb2",
    "tensorboard_custom_scalars_pb2",
    "tensorboard_hparams_pb2",
    "tensorboard_pb2",
]
