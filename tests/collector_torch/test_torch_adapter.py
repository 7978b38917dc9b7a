"""The PyTorch adapter with real torch objects: modules, fx graphs, optimizers, loaders, tensors."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    SequentialSampler,
    Subset,
    TensorDataset,
)

from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.lineage.recording import DatasetGraphInfo
from rankscribe.writer.pb import anf_ir_pb2

ADAPTER_LOGGER = "rankscribe.collector.adapters.torch"


def adapter_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == ADAPTER_LOGGER and record.levelno == logging.WARNING
    ]


def graph_of(views: AdapterRegistry, module: nn.Module) -> anf_ir_pb2.GraphProto:
    view = views.network_view(module)
    assert view is not None
    graph = view.graph()
    assert graph is not None
    return graph


def nodes_of(graph: anf_ir_pb2.GraphProto) -> dict[str, tuple[str, str, list[str]]]:
    """``{name: (op_type, scope, [input, ...])}``."""
    return {
        node.name: (node.op_type, node.scope, [edge.name for edge in node.input])
        for node in graph.node
    }


# -------------------------------------------------------------------- dispatch


def test_torch_objects_go_to_the_torch_adapter(net: nn.Module) -> None:
    views = AdapterRegistry()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.zeros(4, 4)), batch_size=2)
    adapter = views.adapter_for(torch.zeros(2))
    assert adapter is not None  # not left to the built-in reader (None)
    assert views.adapter_for(np.zeros(2)) is None
    for obj in (net, optimizer, loader, nn.Parameter(torch.zeros(2))):
        assert views.adapter_for(obj) is adapter  # one torch adapter for every torch object
    # The torch adapter's own views: the module traced into a graph, torch's param_groups.
    assert graph_of(views, net).node
    optimizer_view = views.optimizer_view(optimizer)
    assert optimizer_view is not None and optimizer_view.learning_rate() == pytest.approx(0.1)


# ---------------------------------------------------------------------- network


def test_network_view_names_and_host_arrays(net: nn.Module) -> None:
    views = AdapterRegistry()
    view = views.network_view(net)
    assert view is not None
    assert view.name == "Net"
    pairs = view.parameters()
    assert [name for name, _ in pairs] == [name for name, _ in net.named_parameters()]
    assert [name for name, _ in pairs] == [
        "block.scale",
        "block.fc.weight",
        "block.fc.bias",
        "bn.weight",
        "bn.bias",
        "head.weight",
        "head.bias",
    ]
    for (_, array), parameter in zip(pairs, net.parameters(), strict=True):
        assert isinstance(array, np.ndarray)
        assert array.dtype == np.float32
        np.testing.assert_array_equal(array, parameter.detach().numpy())


def test_fx_graph_nodes_op_types_scopes_and_inputs(net: nn.Module) -> None:
    views = AdapterRegistry()
    graph = graph_of(views, net)
    assert graph.name == "Net"
    assert nodes_of(graph) == {
        "x": ("Input", "Default", []),
        "block_fc": ("Linear", "Default/block/fc", ["x", "block.fc.weight", "block.fc.bias"]),
        "relu": ("relu", "Default/block", ["block_fc"]),
        "block_scale": ("Load", "Default/block", ["block.scale"]),
        "mul": ("mul", "Default/block", ["relu", "block_scale"]),
        "add": ("add", "Default/block", ["mul", "x"]),
        "bn": (
            "BatchNorm1d",
            "Default/bn",
            [
                "add",
                "bn.weight",
                "bn.bias",
                "bn.running_mean",
                "bn.running_var",
                "bn.num_batches_tracked",
            ],
        ),
        "flatten": ("flatten", "Default", ["bn"]),
        "head": ("Linear", "Default/head", ["flatten", "head.weight", "head.bias"]),
        "softmax": ("softmax", "Default", ["head"]),
    }
    assert [node.full_name for node in graph.node][:3] == [
        "Default/Input-op1",
        "Default/block/fc/Linear-op2",
        "Default/block/relu-op3",
    ]
    assert [output.name for output in graph.outputs] == ["softmax"]
    parameters = {p.name: p.type.tensor_type for p in graph.parameters}
    assert list(parameters) == [
        "block.scale",
        "block.fc.weight",
        "block.fc.bias",
        "bn.weight",
        "bn.bias",
        "head.weight",
        "head.bias",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ]
    assert [dim.size for dim in parameters["head.weight"].shape.dim] == [2, 4]
    assert parameters["head.weight"].elem_type == anf_ir_pb2.DT_FLOAT32
    assert parameters["bn.num_batches_tracked"].elem_type == anf_ir_pb2.DT_INT64


def test_graph_is_traced_once_per_module_instance(
    net: nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = AdapterRegistry()
    traced: list[type] = []
    real_trace = torch.fx.Tracer.trace

    def counting_trace(tracer: Any, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        traced.append(type(module))
        return real_trace(tracer, module, *args, **kwargs)

    monkeypatch.setattr(torch.fx.Tracer, "trace", counting_trace)
    first = graph_of(views, net)
    first.node[0].name = "edited by a caller"
    again = [graph_of(views, net) for _ in range(3)]  # new views of the same module: no new trace
    assert len(traced) == 1
    assert all(graph.node[0].name == "x" for graph in again)  # the kept graph is not shared
    graph_of(views, type(net)())  # another instance is traced for itself
    assert len(traced) == 2


def test_untraceable_network_warns_once_per_class_and_has_no_graph(
    caplog: pytest.LogCaptureFixture,
) -> None:
    views = AdapterRegistry()

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:  # data-dependent: fx cannot follow both branches
                return self.fc(x)
            return self.fc(-x)

    class AlsoBranchy(Branchy):
        pass

    caplog.set_level(logging.WARNING, logger=ADAPTER_LOGGER)
    for module in (Branchy(), Branchy(), Branchy()):
        view = views.network_view(module)
        assert view is not None
        assert view.graph() is None
        assert view.graph() is None
        assert [name for name, _ in view.parameters()] == ["fc.weight", "fc.bias"]
    messages = adapter_warnings(caplog)
    assert len(messages) == 1
    assert "The graph of Branchy cannot be recorded" in messages[0]
    assert "TraceError" in messages[0]
    assert "control flow" in messages[0]
    view = views.network_view(AlsoBranchy())
    assert view is not None and view.graph() is None
    assert len(adapter_warnings(caplog)) == 2  # one per class


def test_an_untraceable_network_is_reported_by_rank_0_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Rank 1 of a torchrun job: the same script runs on rank 0, which says it.
    for name, value in {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }.items():
        monkeypatch.setenv(name, value)

    class Counting(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * len(x)

    caplog.set_level(logging.DEBUG, logger=ADAPTER_LOGGER)
    view = AdapterRegistry().network_view(Counting())
    assert view is not None and view.graph() is None
    said = [record for record in caplog.records if "cannot be recorded" in record.getMessage()]
    assert [record.levelno for record in said] == [logging.DEBUG]


def test_a_top_level_parameter_named_like_its_node() -> None:
    views = AdapterRegistry()

    class Projection(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(4, 2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.weight

    nodes = nodes_of(graph_of(views, Projection()))
    # fx names the read of `self.weight` "weight", the parameter's own name
    assert nodes["weight_node"] == ("Load", "Default", ["weight"])
    assert nodes["matmul"] == ("matmul", "Default", ["x", "weight_node"])


def test_tied_weights_are_one_parameter() -> None:
    views = AdapterRegistry()

    class AutoEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encode = nn.Linear(4, 4, bias=False)
            self.decode = nn.Linear(4, 4, bias=False)
            self.decode.weight = self.encode.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decode(self.encode(x))

    graph = graph_of(views, AutoEncoder())
    assert [p.name for p in graph.parameters] == ["encode.weight"]
    assert nodes_of(graph)["decode"] == ("Linear", "Default/decode", ["encode", "encode.weight"])


# Importing torch.compile's machinery trips torch's own deprecation warnings.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_parallel_and_compiled_wrappers_are_read_through(net: nn.Module) -> None:
    views = AdapterRegistry()
    names = [name for name, _ in net.named_parameters()]
    for wrapper in (nn.DataParallel(net), torch.compile(net)):
        view = views.network_view(wrapper)
        assert view is not None
        assert view.name == "Net"
        assert [name for name, _ in view.parameters()] == names  # no "module." prefix
        graph = view.graph()
        assert graph is not None and graph.name == "Net"


def test_bfloat16_parameters_are_read_as_float32() -> None:
    views = AdapterRegistry()
    module = nn.Linear(2, 2).to(torch.bfloat16)
    view = views.network_view(module)
    assert view is not None
    weight = dict(view.parameters())["weight"]
    assert weight.dtype == np.float32
    np.testing.assert_array_equal(weight, module.weight.detach().float().numpy())
    graph = view.graph()
    assert graph is not None
    assert graph.parameters[0].type.tensor_type.elem_type == anf_ir_pb2.DT_BFLOAT16


# -------------------------------------------------------------------- optimizer


def test_optimizer_built_from_named_parameters_keeps_those_names(
    net: nn.Module, caplog: pytest.LogCaptureFixture
) -> None:
    views = AdapterRegistry()
    optimizer = torch.optim.SGD(net.named_parameters(), lr=0.125)
    view = views.optimizer_view(optimizer)
    assert view is not None
    assert view.name == "SGD"
    assert view.learning_rate() == 0.125
    pairs = view.parameters()
    assert [name for name, _ in pairs] == [name for name, _ in net.named_parameters()]
    for (_, array), parameter in zip(pairs, net.parameters(), strict=True):
        np.testing.assert_array_equal(array, parameter.detach().numpy())
    assert adapter_warnings(caplog) == []


def test_optimizer_names_come_from_the_network_read(net: nn.Module) -> None:
    views = AdapterRegistry()
    views.network_view(net)  # as the collector does for the graph before the histograms
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    view = views.optimizer_view(optimizer)
    assert view is not None
    assert view.name == "Adam"
    assert [name for name, _ in view.parameters()] == [name for name, _ in net.named_parameters()]


def test_optimizer_without_names_uses_positions_once_and_keeps_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    views = AdapterRegistry()
    module = nn.Linear(3, 2)  # never read as a network
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    view = views.optimizer_view(optimizer)
    assert view is not None
    expected = ["param_groups.0.params.0", "param_groups.0.params.1"]
    assert [name for name, _ in view.parameters()] == expected
    views.network_view(module)  # names learnt later do not rename the run's tags
    assert [name for name, _ in view.parameters()] == expected
    messages = adapter_warnings(caplog)
    assert len(messages) == 1
    assert "SGD does not know the names of its parameters" in messages[0]
    assert "named_parameters()" in messages[0]


def test_optimizer_with_several_groups(net: nn.Module) -> None:
    views = AdapterRegistry()
    views.network_view(net)
    optimizer = torch.optim.SGD(
        [{"params": net.head.parameters(), "lr": 0.25}, {"params": net.block.parameters()}],
        lr=0.5,
    )
    view = views.optimizer_view(optimizer)
    assert view is not None
    assert view.learning_rate() == 0.25  # the first group's, as the original's lineage
    assert [name for name, _ in view.parameters()] == [
        "head.weight",
        "head.bias",
        "block.scale",
        "block.fc.weight",
        "block.fc.bias",
    ]


def test_learning_rate_as_a_tensor(net: nn.Module) -> None:
    views = AdapterRegistry()
    optimizer = torch.optim.Adam(net.parameters(), lr=torch.tensor(0.25))
    view = views.optimizer_view(optimizer)
    assert view is not None and view.learning_rate() == 0.25
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    optimizer.step()
    scheduler.step()
    assert view.learning_rate() == 0.125  # the current rate, as a scheduler left it


# ------------------------------------------------------------------------ data


class Images(TensorDataset):
    """A dataset that says where it was read from, as torchvision's do."""

    def __init__(self, root: str, rows: int = 10) -> None:
        super().__init__(torch.zeros(rows, 1, 4, 4), torch.zeros(rows, dtype=torch.long))
        self.root = root


def test_data_loader_sizes_path_and_graph(tmp_path: Path) -> None:
    views = AdapterRegistry()
    loader = DataLoader(Images(str(tmp_path)), batch_size=4, shuffle=True)
    view = views.dataset_view(loader)
    assert view is not None
    assert (view.batches, view.batch_size, view.path) == (3, 4, str(tmp_path))
    assert view.samples == 10  # 3 batches, but the last one holds 2 rows
    assert view.graph == {
        "op_type": "DataLoader",
        "op_module": "torch.utils.data.dataloader",
        "batch_size": 4,
        "shuffle": True,
        "drop_last": False,
        "num_workers": 0,
        "sampler": {"sampler_name": "RandomSampler", "sampler_module": "torch.utils.data.sampler"},
        "children": [
            {
                "op_type": "Images",
                "op_module": Images.__module__,
                "num_samples": 10,
                "dataset_dir": str(tmp_path),
                "children": [],
            }
        ],
    }
    # the lineage can pack it
    assert DatasetGraphInfo.from_graph_dict(view.graph).to_graph_dict()["batch_size"] == 4
    dropping = views.dataset_view(DataLoader(Images(str(tmp_path)), batch_size=4, drop_last=True))
    assert dropping is not None and dropping.batches == 2
    assert dropping.samples == 8  # drop_last leaves the last 2 rows out
    assert dropping.graph is not None
    assert (dropping.graph["shuffle"], dropping.graph["drop_last"]) == (False, True)


def test_data_loader_over_a_subset_of_a_file_dataset(tmp_path: Path) -> None:
    views = AdapterRegistry()
    source = tmp_path / "digits.npz"
    source.write_bytes(b"")
    subset = Subset(Images(str(source)), range(6))
    view = views.dataset_view(DataLoader(subset, batch_size=2))
    assert view is not None
    assert (view.batches, view.batch_size) == (3, 2)
    assert view.path == str(tmp_path)  # the directory of a dataset file, as the original
    assert view.graph is not None
    child = view.graph["children"][0]
    assert (child["op_type"], child["num_samples"]) == ("Subset", 6)
    assert child["children"][0]["dataset_dir"] == str(source)


def test_data_loader_with_a_batch_sampler_or_a_sampler_that_does_not_shuffle() -> None:
    views = AdapterRegistry()
    data = TensorDataset(torch.zeros(9, 2))
    sampler = BatchSampler(SequentialSampler(data), batch_size=3, drop_last=False)
    view = views.dataset_view(DataLoader(data, batch_sampler=sampler))
    assert view is not None and (view.batches, view.batch_size) == (3, 3)
    shard = DistributedSampler(data, num_replicas=3, rank=1, shuffle=False)
    view = views.dataset_view(DataLoader(data, batch_size=3, sampler=shard))
    assert view is not None and view.graph is not None
    assert view.batches == 1  # this rank's share
    assert view.samples == 3
    assert view.graph["shuffle"] is False
    assert view.graph["sampler"]["sampler_name"] == "DistributedSampler"


class Stream(IterableDataset[torch.Tensor]):
    def __iter__(self) -> Any:
        return iter(torch.zeros(6, 2))


def test_an_iterable_dataset_has_no_size() -> None:
    views = AdapterRegistry()
    view = views.dataset_view(DataLoader(Stream(), batch_size=2))
    assert view is not None
    assert (view.batches, view.batch_size, view.path) == (None, 2, None)


def test_a_bare_dataset_is_one_item_per_step(tmp_path: Path) -> None:
    views = AdapterRegistry()
    view = views.dataset_view(Images(str(tmp_path), rows=5))
    assert view is not None
    assert (view.batches, view.batch_size, view.path) == (5, None, str(tmp_path))
    assert view.graph is not None and view.graph["op_type"] == "Images"

    class Plain(Dataset[int]):
        def __getitem__(self, index: int) -> int:
            return index

    view = views.dataset_view(Plain())
    assert view is not None and view.batches is None


# ---------------------------------------------------------------------- tensors


def test_tensors_to_numpy() -> None:
    views = AdapterRegistry()
    weight = nn.Parameter(torch.tensor([[1.5, -2.0]]))
    array = views.to_numpy(weight * 2)  # needs grad: detached first
    np.testing.assert_array_equal(array, [[3.0, -4.0]])
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        narrow = views.to_numpy(torch.tensor([1.0, 2.5], dtype=dtype))
        assert narrow.dtype == np.float32
        np.testing.assert_array_equal(narrow, [1.0, 2.5])
    conjugate = views.to_numpy(torch.tensor([1 + 2j]).conj())
    np.testing.assert_array_equal(conjugate, [1 - 2j])
    sparse = views.to_numpy(torch.eye(2).to_sparse())
    np.testing.assert_array_equal(sparse, np.eye(2))
    assert views.to_numpy(torch.tensor(3)).shape == ()


def test_other_torch_objects_are_left_to_the_builtin_reader() -> None:
    views = AdapterRegistry()
    adapter = views.adapter_for(torch.zeros(2))  # the torch adapter
    assert adapter is not None
    assert adapter.to_numpy(torch.Size([2, 3])) is None
    np.testing.assert_array_equal(views.to_numpy(torch.Size([2, 3])), [2, 3])
    assert adapter.network_view(torch.zeros(2)) is None
    assert adapter.optimizer_view(nn.Linear(2, 2)) is None
    assert adapter.dataset_view(nn.Linear(2, 2)) is None


@pytest.mark.parametrize("dtype", [torch.bits8, torch.float4_e2m1fn_x2])
def test_a_tensor_numpy_cannot_hold_is_a_clear_error(dtype: torch.dtype) -> None:
    with pytest.raises(
        CollectorTypeError, match=rf"a {dtype} tensor cannot be read as a NumPy array"
    ):
        AdapterRegistry().to_numpy(torch.empty(2, dtype=dtype))


class _ProcessShards(torch.utils.data.Sampler[list[int]]):
    """Deals the batches of a whole-dataset batch sampler out to processes (as Accelerate does)."""

    def __init__(self, inner: BatchSampler, processes: int, index: int) -> None:
        self.inner, self.num_processes, self.process_index = inner, processes, index
        self.batch_size = inner.batch_size

    def __iter__(self):  # type: ignore[no-untyped-def]
        for number, batch in enumerate(self.inner):
            if number % self.num_processes == self.process_index:
                yield batch

    def __len__(self) -> int:
        return len(self.inner) // self.num_processes


def test_a_loader_whose_batch_sampler_deals_to_processes_reads_a_share() -> None:
    dataset = TensorDataset(torch.arange(192.0).reshape(-1, 1))
    whole = BatchSampler(SequentialSampler(dataset), batch_size=16, drop_last=False)
    loader = DataLoader(dataset, batch_sampler=_ProcessShards(whole, 2, 1))
    view = AdapterRegistry().dataset_view(loader)
    assert view is not None
    # 6 batches of 16 are this process's: its share, counted as such and summed by the merge.
    assert (view.batches, view.batch_size, view.sharding) == (6, 16, "shards")
    assert view.samples is None and view.get_dataset_size() == 6


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor(0.1),
        torch.tensor([0.1]),
        torch.tensor([[0.1]], dtype=torch.float64),
        torch.tensor(0.1, dtype=torch.bfloat16),
        torch.tensor(0.1, dtype=torch.float16),
        torch.tensor(7),
        torch.tensor(True),
        torch.tensor(float("nan")),
        torch.tensor(0.1, requires_grad=True) * 3,
    ],
)
def test_a_host_tensor_of_one_number_is_read_as_the_mean_reads_it(tensor: torch.Tensor) -> None:
    # The collected step's loss: read directly (no NumPy mean), the same float as the
    # mean of its one value, and no warning for a tensor that needs grad.
    number = AdapterRegistry().host_number(tensor)
    assert type(number) is float
    mean = tensor.detach().to(torch.float64).mean().item()
    assert number == mean or (np.isnan(number) and np.isnan(mean))


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor([0.1, 0.2]),
        torch.tensor([]),
        torch.tensor(1 + 2j),
        torch.tensor(0.1).to_sparse(),
    ],
)
def test_other_tensors_are_left_to_the_general_path(tensor: torch.Tensor) -> None:
    assert AdapterRegistry().host_number(tensor) is None
