"""PyTorch data loaders and datasets as the collector's dataset view."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch

from rankscribe.collector._checks import is_int
from rankscribe.collector.adapters._views import DatasetView, content_digest

__all__ = ["dataset_view"]

# Dataset wrappers (Subset, ConcatDataset, user wrappers) are followed this deep at most.
_DATASET_DEPTH = 8


def _wrapped_datasets(dataset: Any) -> list[Any]:
    """The datasets ``dataset`` reads from: ConcatDataset's ``datasets``, Subset's ``dataset``."""
    inner = getattr(dataset, "datasets", None)
    if isinstance(inner, (list, tuple)):
        return [item for item in inner if isinstance(item, torch.utils.data.Dataset)]
    inner = getattr(dataset, "dataset", None)
    return [inner] if isinstance(inner, torch.utils.data.Dataset) else []


def _datasets(dataset: Any, depth: int = 0) -> Iterator[Any]:
    """``dataset`` and those it wraps, depth first."""
    yield dataset
    if depth < _DATASET_DEPTH:
        for inner in _wrapped_datasets(dataset):
            yield from _datasets(inner, depth + 1)


def _own_path(dataset: Any) -> str | None:
    for attribute in ("root", "path"):
        value = getattr(dataset, attribute, None)
        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
    return None


def _dataset_path(dataset: Any) -> str | None:
    """The first ``root``/``path`` of the dataset or of one it wraps."""
    for item in _datasets(dataset):
        path = _own_path(item)
        if path is not None:
            # The original records the directory of a dataset file.
            return os.path.dirname(path) if os.path.isfile(path) else path
    return None


def _length(sized: Any) -> int | None:
    try:
        return len(sized)
    except TypeError:  # an IterableDataset without __len__
        return None


def _dataset_node(dataset: Any, depth: int = 0) -> dict[str, Any]:
    """One dataset as a node of the lineage's dataset graph (MindInsight's form)."""
    kind = type(dataset)
    node: dict[str, Any] = {"op_type": kind.__name__, "op_module": kind.__module__}
    size = _length(dataset)
    if size is not None:
        node["num_samples"] = size
    path = _own_path(dataset)
    if path is not None:
        node["dataset_dir"] = path
    inner = _wrapped_datasets(dataset) if depth < _DATASET_DEPTH else []
    node["children"] = [_dataset_node(item, depth + 1) for item in inner]
    return node


def _shuffles(sampler: Any) -> bool:
    flag = getattr(sampler, "shuffle", None)  # DistributedSampler says it itself
    if isinstance(flag, bool):
        return flag
    return isinstance(sampler, torch.utils.data.RandomSampler)


def _int_or_none(value: object) -> int | None:
    return value if is_int(value) else None


def _loader_batch_size(loader: Any) -> int | None:
    batch_size = _int_or_none(loader.batch_size)
    if batch_size is None:  # a batch_sampler given by the user
        batch_size = _int_or_none(getattr(loader.batch_sampler, "batch_size", None))
    return batch_size


def _plain_batches(loader: Any) -> bool:
    """True when the loader batches its own sampler with torch's ``BatchSampler``."""
    batches = loader.batch_sampler
    return batches is None or (
        type(batches) is torch.utils.data.BatchSampler and batches.sampler is loader.sampler
    )


def _loader_view(loader: Any) -> DatasetView:
    kind, sampler = type(loader), loader.sampler
    batch_size = _loader_batch_size(loader)
    graph = {
        "op_type": kind.__name__,
        "op_module": kind.__module__,
        "batch_size": batch_size,
        "shuffle": _shuffles(sampler),
        "drop_last": bool(loader.drop_last),
        "num_workers": int(loader.num_workers),
        "sampler": {
            "sampler_name": type(sampler).__name__,
            "sampler_module": type(sampler).__module__,
        },
        "children": [_dataset_node(loader.dataset)],
    }
    batches = _length(loader)
    # Samples per epoch: what the sampler draws (a DistributedSampler's is this
    # rank's share), less what drop_last leaves out. Under another batch sampler
    # (Accelerate's shards the batches of a sampler over the whole dataset) the
    # sampler's length is not this rank's: count batches x batch size instead.
    samples = _length(sampler) if _plain_batches(loader) else None
    if loader.drop_last and batches is not None and batch_size is not None:
        samples = batches * batch_size
    sharding = _sharding(sampler) if _plain_batches(loader) else _batch_sharding(loader)
    return DatasetView(
        batches,
        batch_size,
        _dataset_path(loader.dataset),
        graph,
        samples,
        sharding,
        _digest(loader.dataset) if sharding == "whole" else None,
    )


def _sharding(sampler: Any) -> str | None:
    """``shards`` for a DistributedSampler's share, ``whole`` for every item of the dataset."""
    replicas = getattr(sampler, "num_replicas", None)
    if isinstance(replicas, int) and not isinstance(replicas, bool):
        return "shards" if replicas > 1 else "whole"
    sampler_types = (torch.utils.data.SequentialSampler, torch.utils.data.RandomSampler)
    return "whole" if isinstance(sampler, sampler_types) else None


def _batch_sharding(loader: Any) -> str | None:
    """A batch sampler that deals batches out to processes (Accelerate's) reads a share."""
    processes = getattr(loader.batch_sampler, "num_processes", None)
    if isinstance(processes, int) and not isinstance(processes, bool):
        return "shards" if processes > 1 else "whole"
    return None


def _item_bytes(item: Any) -> bytes:
    if isinstance(item, torch.Tensor):
        return bytes(item.detach().cpu().contiguous().numpy().tobytes())
    if isinstance(item, (list, tuple)):
        return b"\0".join(_item_bytes(part) for part in item)
    if isinstance(item, dict):
        return b"\0".join(_item_bytes(item[key]) for key in sorted(item, key=str))
    return repr(item).encode()


def _digest(dataset: Any) -> str | None:
    """Length, first and last item of a map-style dataset, hashed (two items read)."""
    size = _length(dataset)
    if not size or isinstance(dataset, torch.utils.data.IterableDataset):
        return None
    try:
        ends = [_item_bytes(dataset[0]), _item_bytes(dataset[size - 1])]
    except Exception:  # any dataset's own error: no digest, the sizes are summed
        return None
    return content_digest(size, ends)


def dataset_view(obj: object) -> DatasetView | None:
    """A ``DataLoader``; or a ``Dataset`` iterated directly (one item per step, size unknown)."""
    if isinstance(obj, torch.utils.data.DataLoader):
        return _loader_view(obj)
    if isinstance(obj, torch.utils.data.Dataset):
        # One item (one sample) per step, every item of it.
        size = _length(obj)
        return DatasetView(
            size, None, _dataset_path(obj), _dataset_node(obj), size, "whole", _digest(obj)
        )
    return None
