"""What MindInsight 2.3.1 makes of a directory: run in MindInsight's own interpreter.

    PYTHONPATH=<MindInsight install> python -S mindinsight_side.py < request.json

The request is one JSON object:

- ``{"load": [<run dir>, ...]}``: MindInsight's datavisual ``DataLoader`` over
  each run; the answer lists, per run, what it kept for each plugin and tag.
- ``{"filter": <base dir>, "conditions": [<condition>, ...]}``:
  ``mindinsight.lineagemgr.model.filter_summary_lineage`` for each condition;
  each answer is ``{"result": ...}`` or ``{"error": [class name, error code,
  message]}``.
- ``{"versions": true}``: the versions of MindInsight and what it runs on.

The answer is one JSON object on stdout (non-finite floats as JSON's NaN and
Infinity extensions). This file imports nothing from RankScribe.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import sys
from importlib import metadata
from typing import Any


def _image(container: Any) -> dict[str, Any]:
    from PIL import Image

    with Image.open(io.BytesIO(container.encoded_image)) as image:
        pixels = __import__("numpy").asarray(image).tolist()
        mode = image.mode
    return {
        "height": container.height,
        "width": container.width,
        "colorspace": container.colorspace,
        "sha256": hashlib.sha256(container.encoded_image).hexdigest(),
        "mode": mode,
        "pixels": pixels,
    }


def _histogram(container: Any) -> dict[str, Any]:
    return {
        "buckets": [list(bucket.as_tuple()) for bucket in container.histogram._original_buckets],
        "min": container.min,
        "max": container.max,
        "count": container.count,
    }


def _tensor(container: Any) -> dict[str, Any]:
    return {
        "dims": list(container.dims),
        "data_type": container.data_type,
        "values": container.tensor_value.reshape(-1).tolist(),
    }


def _graph(graph: Any) -> dict[str, Any]:
    """The operator nodes MindInsight shows: name, type and inputs, scope by scope."""
    nodes: list[list[Any]] = []
    pending = list(graph.list_node_by_scope())
    while pending:
        node = pending.pop()
        if node["subnode_count"]:
            pending.extend(graph.list_node_by_scope(node["name"]))
        else:
            nodes.append([node["name"], node["type"], sorted(node["input"])])
    return {"nodes": sorted(nodes)}


def _value(plugin: str, value: Any) -> Any:
    if plugin == "scalar":
        return value
    if plugin == "image":
        return _image(value)
    if plugin == "histogram":
        return _histogram(value)
    if plugin == "tensor":
        return _tensor(value)
    if plugin in ("graph", "optimized_graph"):
        return _graph(value)
    return repr(value)


def load(run_dirs: list[str]) -> dict[str, Any]:
    from mindinsight.datavisual.data_transform.data_loader import DataLoader

    runs = {}
    for run_dir in run_dirs:
        loader = DataLoader(run_dir)
        loader.load()
        events = loader.get_events_data()
        plugins: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for plugin in ("scalar", "image", "histogram", "tensor", "graph"):
            try:
                tags = events.list_tags_by_plugin(plugin)
            except KeyError:
                continue
            plugins[plugin] = {
                tag: [
                    {
                        "step": event.step,
                        "wall_time": event.wall_time,
                        "value": _value(plugin, event.value),
                    }
                    for event in events.tensors(tag)
                ]
                for tag in tags
            }
        runs[run_dir] = {"integrity": loader.is_integrity, "plugins": plugins}
    return {"runs": runs}


def filter_all(base_dir: str, conditions: list[Any]) -> dict[str, Any]:
    from mindinsight.lineagemgr.model import filter_summary_lineage
    from mindinsight.utils.exceptions import MindInsightException

    answers: list[dict[str, Any]] = []
    for condition in conditions:
        try:
            result = filter_summary_lineage(summary_base_dir=base_dir, search_condition=condition)
        except MindInsightException as error:
            answers.append({"error": [type(error).__name__, error.error_code, error.message]})
        except Exception as error:  # what MindInsight lets through (e.g. marshmallow) is data
            answers.append({"error": [type(error).__name__, None, str(error)]})
        else:
            answers.append({"result": result})
    return {"answers": answers}


def versions() -> dict[str, Any]:
    names = ("mindinsight", "protobuf", "numpy", "marshmallow")
    return {"versions": {name: metadata.version(name) for name in names}}


def main() -> int:
    logging.disable(logging.CRITICAL)  # MindInsight logs every refused condition
    request = json.load(sys.stdin)
    if "load" in request:
        answer = load(request["load"])
    elif "filter" in request:
        answer = filter_all(request["filter"], request["conditions"])
    else:
        answer = versions()
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
