"""The searchable fields of a run's lineage: their names, where each lives, what each holds.

Part of the record model: the index stores these fields for every run and the queries
filter and sort on them (``docs/lineage-queries.md``), so both read them here and
neither asks the other. The names are MindInsight 2.3.1's (``filter_summary_lineage``).
"""

from __future__ import annotations

__all__ = ["FIELD_MAPPING", "INT_FIELDS", "NUMBER_FIELDS", "STRING_FIELDS", "field_kind"]

# name -> (section, key in that section); summary_dir and dataset_mark are the run's own.
FIELD_MAPPING: dict[str, tuple[str, str | None]] = {
    "summary_dir": ("summary_dir", None),
    "loss_function": ("hyper_parameters", "loss_function"),
    "train_dataset_path": ("train_dataset", "train_dataset_path"),
    "train_dataset_count": ("train_dataset", "train_dataset_size"),
    "test_dataset_path": ("valid_dataset", "valid_dataset_path"),
    "test_dataset_count": ("valid_dataset", "valid_dataset_size"),
    "network": ("algorithm", "network"),
    "optimizer": ("hyper_parameters", "optimizer"),
    "learning_rate": ("hyper_parameters", "learning_rate"),
    "epoch": ("hyper_parameters", "epoch"),
    "batch_size": ("hyper_parameters", "batch_size"),
    "device_num": ("hyper_parameters", "device_num"),
    "loss": ("algorithm", "loss"),
    "model_size": ("model", "size"),
    "dataset_mark": ("dataset_mark", None),
}

STRING_FIELDS = (
    "summary_dir",
    "loss_function",
    "train_dataset_path",
    "test_dataset_path",
    "network",
    "optimizer",
    "dataset_mark",
)
INT_FIELDS = (
    "train_dataset_count",
    "test_dataset_count",
    "epoch",
    "batch_size",
    "device_num",
    "model_size",
)
NUMBER_FIELDS = ("learning_rate", "loss")


def field_kind(name: str) -> str | None:
    """What a searchable name holds: 'text', 'int', 'number', 'any', or None if unknown."""
    if name in STRING_FIELDS:
        return "text"
    if name in INT_FIELDS:
        return "int"
    if name in NUMBER_FIELDS or (name.startswith("metric/") and name != "metric/"):
        return "number"
    if name.startswith("user_defined/"):
        return "any"
    return None
