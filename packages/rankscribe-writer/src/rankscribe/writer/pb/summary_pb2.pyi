from rankscribe.writer.pb import anf_ir_pb2 as _anf_ir_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Event(_message.Message):
    __slots__ = ("wall_time", "step", "version", "graph_def", "summary", "explain")
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    wall_time: float
    step: int
    version: str
    graph_def: _anf_ir_pb2.GraphProto
    summary: Summary
    explain: Explain
    def __init__(self, wall_time: _Optional[float] = ..., step: _Optional[int] = ..., version: _Optional[str] = ..., graph_def: _Optional[_Union[_anf_ir_pb2.GraphProto, _Mapping]] = ..., summary: _Optional[_Union[Summary, _Mapping]] = ..., explain: _Optional[_Union[Explain, _Mapping]] = ...) -> None: ...

class Explain(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LossLandscape(_message.Message):
    __slots__ = ("landscape", "loss_path", "metadata", "convergence_point")
    class Point(_message.Message):
        __slots__ = ("x", "y", "z")
        X_FIELD_NUMBER: _ClassVar[int]
        Y_FIELD_NUMBER: _ClassVar[int]
        Z_FIELD_NUMBER: _ClassVar[int]
        x: _anf_ir_pb2.TensorProto
        y: _anf_ir_pb2.TensorProto
        z: _anf_ir_pb2.TensorProto
        def __init__(self, x: _Optional[_Union[_anf_ir_pb2.TensorProto, _Mapping]] = ..., y: _Optional[_Union[_anf_ir_pb2.TensorProto, _Mapping]] = ..., z: _Optional[_Union[_anf_ir_pb2.TensorProto, _Mapping]] = ...) -> None: ...
    class LossPath(_message.Message):
        __slots__ = ("intervals", "points")
        INTERVALS_FIELD_NUMBER: _ClassVar[int]
        POINTS_FIELD_NUMBER: _ClassVar[int]
        intervals: _containers.RepeatedScalarFieldContainer[int]
        points: LossLandscape.Point
        def __init__(self, intervals: _Optional[_Iterable[int]] = ..., points: _Optional[_Union[LossLandscape.Point, _Mapping]] = ...) -> None: ...
    class Metadata(_message.Message):
        __slots__ = ("decomposition", "unit", "step_per_epoch")
        DECOMPOSITION_FIELD_NUMBER: _ClassVar[int]
        UNIT_FIELD_NUMBER: _ClassVar[int]
        STEP_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        decomposition: str
        unit: str
        step_per_epoch: int
        def __init__(self, decomposition: _Optional[str] = ..., unit: _Optional[str] = ..., step_per_epoch: _Optional[int] = ...) -> None: ...
    LANDSCAPE_FIELD_NUMBER: _ClassVar[int]
    LOSS_PATH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONVERGENCE_POINT_FIELD_NUMBER: _ClassVar[int]
    landscape: LossLandscape.Point
    loss_path: LossLandscape.LossPath
    metadata: LossLandscape.Metadata
    convergence_point: LossLandscape.Point
    def __init__(self, landscape: _Optional[_Union[LossLandscape.Point, _Mapping]] = ..., loss_path: _Optional[_Union[LossLandscape.LossPath, _Mapping]] = ..., metadata: _Optional[_Union[LossLandscape.Metadata, _Mapping]] = ..., convergence_point: _Optional[_Union[LossLandscape.Point, _Mapping]] = ...) -> None: ...

class Summary(_message.Message):
    __slots__ = ("value",)
    class Image(_message.Message):
        __slots__ = ("height", "width", "colorspace", "encoded_image")
        HEIGHT_FIELD_NUMBER: _ClassVar[int]
        WIDTH_FIELD_NUMBER: _ClassVar[int]
        COLORSPACE_FIELD_NUMBER: _ClassVar[int]
        ENCODED_IMAGE_FIELD_NUMBER: _ClassVar[int]
        height: int
        width: int
        colorspace: int
        encoded_image: bytes
        def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ..., colorspace: _Optional[int] = ..., encoded_image: _Optional[bytes] = ...) -> None: ...
    class Histogram(_message.Message):
        __slots__ = ("buckets", "nan_count", "pos_inf_count", "neg_inf_count", "max", "min", "sum", "count")
        class bucket(_message.Message):
            __slots__ = ("left", "width", "count")
            LEFT_FIELD_NUMBER: _ClassVar[int]
            WIDTH_FIELD_NUMBER: _ClassVar[int]
            COUNT_FIELD_NUMBER: _ClassVar[int]
            left: float
            width: float
            count: int
            def __init__(self, left: _Optional[float] = ..., width: _Optional[float] = ..., count: _Optional[int] = ...) -> None: ...
        BUCKETS_FIELD_NUMBER: _ClassVar[int]
        NAN_COUNT_FIELD_NUMBER: _ClassVar[int]
        POS_INF_COUNT_FIELD_NUMBER: _ClassVar[int]
        NEG_INF_COUNT_FIELD_NUMBER: _ClassVar[int]
        MAX_FIELD_NUMBER: _ClassVar[int]
        MIN_FIELD_NUMBER: _ClassVar[int]
        SUM_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        buckets: _containers.RepeatedCompositeFieldContainer[Summary.Histogram.bucket]
        nan_count: int
        pos_inf_count: int
        neg_inf_count: int
        max: float
        min: float
        sum: float
        count: int
        def __init__(self, buckets: _Optional[_Iterable[_Union[Summary.Histogram.bucket, _Mapping]]] = ..., nan_count: _Optional[int] = ..., pos_inf_count: _Optional[int] = ..., neg_inf_count: _Optional[int] = ..., max: _Optional[float] = ..., min: _Optional[float] = ..., sum: _Optional[float] = ..., count: _Optional[int] = ...) -> None: ...
    class Value(_message.Message):
        __slots__ = ("tag", "scalar_value", "image", "tensor", "histogram", "loss_landscape")
        TAG_FIELD_NUMBER: _ClassVar[int]
        SCALAR_VALUE_FIELD_NUMBER: _ClassVar[int]
        IMAGE_FIELD_NUMBER: _ClassVar[int]
        TENSOR_FIELD_NUMBER: _ClassVar[int]
        HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
        LOSS_LANDSCAPE_FIELD_NUMBER: _ClassVar[int]
        tag: str
        scalar_value: float
        image: Summary.Image
        tensor: _anf_ir_pb2.TensorProto
        histogram: Summary.Histogram
        loss_landscape: LossLandscape
        def __init__(self, tag: _Optional[str] = ..., scalar_value: _Optional[float] = ..., image: _Optional[_Union[Summary.Image, _Mapping]] = ..., tensor: _Optional[_Union[_anf_ir_pb2.TensorProto, _Mapping]] = ..., histogram: _Optional[_Union[Summary.Histogram, _Mapping]] = ..., loss_landscape: _Optional[_Union[LossLandscape, _Mapping]] = ...) -> None: ...
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedCompositeFieldContainer[Summary.Value]
    def __init__(self, value: _Optional[_Iterable[_Union[Summary.Value, _Mapping]]] = ...) -> None: ...
