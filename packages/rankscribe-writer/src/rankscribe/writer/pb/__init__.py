"""Protobuf messages of the summary wire format.

The ``*_pb2`` modules are generated from ``proto/rankscribe/writer/pb`` by
``python tools/gen_proto.py``; do not edit them by hand.

- ``summary_pb2``: ``Event`` / ``Summary`` (the ``_MS`` files)
- ``anf_ir_pb2``: ``TensorProto``, ``GraphProto``, ``ModelProto``
- ``lineage_pb2``: ``LineageEvent`` and its payloads (the ``_lineage`` files)
- ``tensorboard_pb2`` / ``tensorboard_hparams_pb2``: the TensorBoard target
"""
