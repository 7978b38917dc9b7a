"""SummaryRecord(network=...) beyond graph_proto(): the rankscribe.graph_builders plugins.

The writer env has no collector: a network without graph_proto() is refused with an
error naming the argument and what is understood. A builder installed as an entry point
(here a distribution made in a temporary directory on sys.path) gives the graph.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from rankscribe.writer import SummaryRecord
from rankscribe.writer.errors import WriterError, WriterTypeError
from rankscribe.writer.pb import anf_ir_pb2

BUILDER_MODULE = """
from rankscribe.writer.pb import anf_ir_pb2


def build(network):
    if type(network).__name__ != "KnownNet":
        return None

    def graph():
        graph = anf_ir_pb2.GraphProto(name="known")
        graph.node.add(name="relu", op_type="ReLU")
        return graph

    return graph
"""


class Module:
    """Shaped like a framework network: parameters, no graph_proto()."""

    def named_parameters(self) -> list[tuple[str, object]]:
        return [("weight", [1.0, 2.0])]


class KnownNet:
    pass


# The two tests below expect no graph builder but this file's own; the collector installs
# one, so they run where it is not installed: the writer env.
_NO_OTHER_BUILDER = pytest.mark.skipif(
    bool(entry_points(group="rankscribe.graph_builders")),
    reason="a graph builder is installed (the collector's); the writer env runs this",
)


def _install_builder(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "graph_builder_example.py").write_text(BUILDER_MODULE)
    info = root / "graph_builder_example-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: graph-builder-example\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[rankscribe.graph_builders]\nexample = graph_builder_example:build\n"
    )
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "graph_builder_example", raising=False)


@_NO_OTHER_BUILDER
def test_without_the_collector_a_module_is_refused_with_what_is_understood(
    log_dir: Path,
) -> None:
    with pytest.raises(WriterTypeError) as raised:
        SummaryRecord(log_dir, network=Module())
    error = raised.value
    assert isinstance(error, WriterError) and isinstance(error, TypeError)
    message = str(error)
    for part in (
        "'network'",
        "graph_proto()",
        "torch.nn.Module",
        "rankscribe.collector.ArrayNetwork",
        "rankscribe-collector installed",
        "but got Module",
        "graph builders installed: none",
    ):
        assert part in message, f"{part!r} not in {message!r}"
    assert not log_dir.exists()  # refused before anything was created


@_NO_OTHER_BUILDER
def test_an_installed_builder_gives_the_graph(
    tmp_path: Path, log_dir: Path, disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "site").mkdir()
    _install_builder(tmp_path / "site", monkeypatch)
    with SummaryRecord(log_dir, network=KnownNet()) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    events = disk.all_summary_events(log_dir)
    assert [event.WhichOneof("what") for event in events] == ["version", "graph_def", "summary"]
    expected = anf_ir_pb2.GraphProto(name="known")
    expected.node.add(name="relu", op_type="ReLU")
    assert events[1].graph_def == expected

    # A network the installed builder does not know is still refused, naming the builder.
    with pytest.raises(WriterTypeError, match=r"graph builders installed: example\)"):
        SummaryRecord(tmp_path / "other", network=Module())
    assert not (tmp_path / "other").exists()


def test_a_train_network_nothing_knows_is_skipped_not_raised(log_dir: Path, disk) -> None:
    with SummaryRecord(log_dir) as record:
        record.add_value("scalar", "loss", 0.5)
        assert record.record(1, train_network=Module()) is True
    events = disk.all_summary_events(log_dir)
    assert [event.WhichOneof("what") for event in events] == ["version", "summary"]
