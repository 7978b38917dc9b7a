from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LineageEvent(_message.Message):
    __slots__ = ("wall_time", "step", "version", "train_lineage", "evaluation_lineage", "dataset_graph", "user_defined_info")
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TRAIN_LINEAGE_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_LINEAGE_FIELD_NUMBER: _ClassVar[int]
    DATASET_GRAPH_FIELD_NUMBER: _ClassVar[int]
    USER_DEFINED_INFO_FIELD_NUMBER: _ClassVar[int]
    wall_time: float
    step: int
    version: str
    train_lineage: TrainLineage
    evaluation_lineage: EvaluationLineage
    dataset_graph: DatasetGraph
    user_defined_info: UserDefinedInfo
    def __init__(self, wall_time: _Optional[float] = ..., step: _Optional[int] = ..., version: _Optional[str] = ..., train_lineage: _Optional[_Union[TrainLineage, _Mapping]] = ..., evaluation_lineage: _Optional[_Union[EvaluationLineage, _Mapping]] = ..., dataset_graph: _Optional[_Union[DatasetGraph, _Mapping]] = ..., user_defined_info: _Optional[_Union[UserDefinedInfo, _Mapping]] = ...) -> None: ...

class TrainLineage(_message.Message):
    __slots__ = ("hyper_parameters", "train_dataset", "algorithm", "model")
    class HyperParameters(_message.Message):
        __slots__ = ("optimizer", "learning_rate", "loss_function", "epoch", "parallel_mode", "device_num", "batch_size")
        OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
        LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
        LOSS_FUNCTION_FIELD_NUMBER: _ClassVar[int]
        EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARALLEL_MODE_FIELD_NUMBER: _ClassVar[int]
        DEVICE_NUM_FIELD_NUMBER: _ClassVar[int]
        BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
        optimizer: str
        learning_rate: float
        loss_function: str
        epoch: int
        parallel_mode: str
        device_num: int
        batch_size: int
        def __init__(self, optimizer: _Optional[str] = ..., learning_rate: _Optional[float] = ..., loss_function: _Optional[str] = ..., epoch: _Optional[int] = ..., parallel_mode: _Optional[str] = ..., device_num: _Optional[int] = ..., batch_size: _Optional[int] = ...) -> None: ...
    class TrainDataset(_message.Message):
        __slots__ = ("train_dataset_path", "train_dataset_size")
        TRAIN_DATASET_PATH_FIELD_NUMBER: _ClassVar[int]
        TRAIN_DATASET_SIZE_FIELD_NUMBER: _ClassVar[int]
        train_dataset_path: str
        train_dataset_size: int
        def __init__(self, train_dataset_path: _Optional[str] = ..., train_dataset_size: _Optional[int] = ...) -> None: ...
    class Algorithm(_message.Message):
        __slots__ = ("network", "loss")
        NETWORK_FIELD_NUMBER: _ClassVar[int]
        LOSS_FIELD_NUMBER: _ClassVar[int]
        network: str
        loss: float
        def __init__(self, network: _Optional[str] = ..., loss: _Optional[float] = ...) -> None: ...
    class Model(_message.Message):
        __slots__ = ("path", "size")
        PATH_FIELD_NUMBER: _ClassVar[int]
        SIZE_FIELD_NUMBER: _ClassVar[int]
        path: str
        size: int
        def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...
    HYPER_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TRAIN_DATASET_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    hyper_parameters: TrainLineage.HyperParameters
    train_dataset: TrainLineage.TrainDataset
    algorithm: TrainLineage.Algorithm
    model: TrainLineage.Model
    def __init__(self, hyper_parameters: _Optional[_Union[TrainLineage.HyperParameters, _Mapping]] = ..., train_dataset: _Optional[_Union[TrainLineage.TrainDataset, _Mapping]] = ..., algorithm: _Optional[_Union[TrainLineage.Algorithm, _Mapping]] = ..., model: _Optional[_Union[TrainLineage.Model, _Mapping]] = ...) -> None: ...

class EvaluationLineage(_message.Message):
    __slots__ = ("metric", "valid_dataset")
    class ValidDataset(_message.Message):
        __slots__ = ("valid_dataset_path", "valid_dataset_size")
        VALID_DATASET_PATH_FIELD_NUMBER: _ClassVar[int]
        VALID_DATASET_SIZE_FIELD_NUMBER: _ClassVar[int]
        valid_dataset_path: str
        valid_dataset_size: int
        def __init__(self, valid_dataset_path: _Optional[str] = ..., valid_dataset_size: _Optional[int] = ...) -> None: ...
    METRIC_FIELD_NUMBER: _ClassVar[int]
    VALID_DATASET_FIELD_NUMBER: _ClassVar[int]
    metric: str
    valid_dataset: EvaluationLineage.ValidDataset
    def __init__(self, metric: _Optional[str] = ..., valid_dataset: _Optional[_Union[EvaluationLineage.ValidDataset, _Mapping]] = ...) -> None: ...

class UserDefinedInfo(_message.Message):
    __slots__ = ("user_info", "map_dict", "map_int32", "map_str", "map_double")
    class MapDictEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: UserDefinedInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[UserDefinedInfo, _Mapping]] = ...) -> None: ...
    class MapInt32Entry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class MapStrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MapDoubleEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    USER_INFO_FIELD_NUMBER: _ClassVar[int]
    MAP_DICT_FIELD_NUMBER: _ClassVar[int]
    MAP_INT32_FIELD_NUMBER: _ClassVar[int]
    MAP_STR_FIELD_NUMBER: _ClassVar[int]
    MAP_DOUBLE_FIELD_NUMBER: _ClassVar[int]
    user_info: _containers.RepeatedCompositeFieldContainer[UserDefinedInfo]
    map_dict: _containers.MessageMap[str, UserDefinedInfo]
    map_int32: _containers.ScalarMap[str, int]
    map_str: _containers.ScalarMap[str, str]
    map_double: _containers.ScalarMap[str, float]
    def __init__(self, user_info: _Optional[_Iterable[_Union[UserDefinedInfo, _Mapping]]] = ..., map_dict: _Optional[_Mapping[str, UserDefinedInfo]] = ..., map_int32: _Optional[_Mapping[str, int]] = ..., map_str: _Optional[_Mapping[str, str]] = ..., map_double: _Optional[_Mapping[str, float]] = ...) -> None: ...

class DatasetGraph(_message.Message):
    __slots__ = ("children", "parameter", "operations", "sampler")
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    SAMPLER_FIELD_NUMBER: _ClassVar[int]
    children: _containers.RepeatedCompositeFieldContainer[DatasetGraph]
    parameter: OperationParameter
    operations: _containers.RepeatedCompositeFieldContainer[Operation]
    sampler: Operation
    def __init__(self, children: _Optional[_Iterable[_Union[DatasetGraph, _Mapping]]] = ..., parameter: _Optional[_Union[OperationParameter, _Mapping]] = ..., operations: _Optional[_Iterable[_Union[Operation, _Mapping]]] = ..., sampler: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class Operation(_message.Message):
    __slots__ = ("operationParam", "size", "weights")
    OPERATIONPARAM_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    operationParam: OperationParameter
    size: _containers.RepeatedScalarFieldContainer[int]
    weights: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, operationParam: _Optional[_Union[OperationParameter, _Mapping]] = ..., size: _Optional[_Iterable[int]] = ..., weights: _Optional[_Iterable[float]] = ...) -> None: ...

class OperationParameter(_message.Message):
    __slots__ = ("mapStr", "mapStrList", "mapBool", "mapInt", "mapDouble")
    class MapStrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MapStrListEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StrList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StrList, _Mapping]] = ...) -> None: ...
    class MapBoolEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bool
        def __init__(self, key: _Optional[str] = ..., value: bool = ...) -> None: ...
    class MapIntEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class MapDoubleEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MAPSTR_FIELD_NUMBER: _ClassVar[int]
    MAPSTRLIST_FIELD_NUMBER: _ClassVar[int]
    MAPBOOL_FIELD_NUMBER: _ClassVar[int]
    MAPINT_FIELD_NUMBER: _ClassVar[int]
    MAPDOUBLE_FIELD_NUMBER: _ClassVar[int]
    mapStr: _containers.ScalarMap[str, str]
    mapStrList: _containers.MessageMap[str, StrList]
    mapBool: _containers.ScalarMap[str, bool]
    mapInt: _containers.ScalarMap[str, int]
    mapDouble: _containers.ScalarMap[str, float]
    def __init__(self, mapStr: _Optional[_Mapping[str, str]] = ..., mapStrList: _Optional[_Mapping[str, StrList]] = ..., mapBool: _Optional[_Mapping[str, bool]] = ..., mapInt: _Optional[_Mapping[str, int]] = ..., mapDouble: _Optional[_Mapping[str, float]] = ...) -> None: ...

class StrList(_message.Message):
    __slots__ = ("strValue",)
    STRVALUE_FIELD_NUMBER: _ClassVar[int]
    strValue: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, strValue: _Optional[_Iterable[str]] = ...) -> None: ...
