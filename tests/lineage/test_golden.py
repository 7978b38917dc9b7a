"""MindSpore 2.10's own lineage files read back as MANIFEST.json and MindInsight say."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage, get_summary_lineage


@pytest.fixture
def golden_base(tmp_path: Path, lw: Any) -> Path:
    """The two golden lineage runs, with max_file_size the newer (as MindInsight saw them)."""
    base = tmp_path / "golden"
    for name, mtime in (("lineage_train_eval", 1_800_000_000), ("max_file_size", 1_800_000_100)):
        shutil.copytree(lw.golden / name, base / name)
        for file in (base / name).iterdir():
            os.utime(file, (mtime, mtime))
    return base


def _manifest(lw: Any) -> dict[str, Any]:
    return json.loads((lw.golden / "MANIFEST.json").read_text())


def _records(lw: Any, directory: str) -> list[dict[str, Any]]:
    files = _manifest(lw)["dirs"][directory]["files"]
    lineage = sorted((f for f in files if f["kind"] == "lineage"), key=lambda f: f["name"])
    return [record for file in lineage for record in file["records"]]


def test_get_summary_lineage_train_eval(golden_base: Path, lw: Any) -> None:
    records = _records(lw, "lineage_train_eval")
    train = next(r["train_lineage"] for r in records if r["what"] == "train_lineage")
    evaluation = next(r for r in records if r["what"] == "evaluation_lineage")
    # The manifest gives float32 fields widened; MindInsight shows the shortest float32 repr.
    assert train["hyper_parameters"]["learning_rate"] == 0.009999999776482582
    assert train["algorithm"]["loss"] == 2.3027029037475586
    hyper = {**train["hyper_parameters"], "learning_rate": 0.01}
    algorithm = {**train["algorithm"], "loss": 2.302703}

    result = get_summary_lineage(str(golden_base / "lineage_train_eval"))

    assert list(result) == [
        "summary_dir",
        "metric",
        "hyper_parameters",
        "algorithm",
        "train_dataset",
        "valid_dataset",
        "model",
        "dataset_graph",
    ]
    assert result["summary_dir"] == str(golden_base / "lineage_train_eval")
    assert (
        result["metric"]
        == evaluation["metric_json_decoded"]
        == {
            "acc": 0.0,
            "loss": 2.4045830368995667,
        }
    )
    assert (
        result["hyper_parameters"]
        == hyper
        == {
            "optimizer": "Momentum",
            "learning_rate": 0.01,
            "loss_function": "SoftmaxCrossEntropyWithLogits",
            "epoch": 2,
            "parallel_mode": "stand_alone",
            "device_num": 1,
            "batch_size": 4,
        }
    )
    assert result["algorithm"] == algorithm == {"network": "Net", "loss": 2.302703}
    assert result["train_dataset"] == train["train_dataset"]
    assert result["valid_dataset"] == evaluation["evaluation_lineage"]["valid_dataset"]
    assert result["model"] == train["model"]
    assert isinstance(result["model"]["size"], int)
    view = json.loads(lw.view.read_text())["filter_summary_lineage"]
    expected_graph = next(
        o["dataset_graph"] for o in view["object"] if o["summary_dir"] == "./lineage_train_eval"
    )
    assert result["dataset_graph"] == expected_graph
    # organize_graph turns the string 'None' into None
    leaf_map = result["dataset_graph"]["children"][0]["children"][0]
    assert leaf_map["operations"][2] == {"tensor_op_name": "HwcToChw", "tensor_op_params": None}


def test_get_summary_lineage_keys(golden_base: Path) -> None:
    run = str(golden_base / "lineage_train_eval")
    assert get_summary_lineage(run, keys=[]) == {"summary_dir": run}
    result = get_summary_lineage(run, keys=["model", "metric"])
    assert list(result) == ["summary_dir", "model", "metric"]
    assert result["metric"] == {"acc": 0.0, "loss": 2.4045830368995667}


def test_get_summary_lineage_max_file_size(golden_base: Path) -> None:
    result = get_summary_lineage(str(golden_base / "max_file_size"))
    assert result["hyper_parameters"] == {"optimizer": "SGD", "learning_rate": 0.5, "batch_size": 8}
    assert result["algorithm"] == {"network": "TinyNet", "loss": 0.75}
    assert result["metric"] == {}
    assert result["train_dataset"] == result["valid_dataset"] == result["model"] == {}
    assert result["dataset_graph"] == {}
    assert "user_defined" not in result


def _as_mindinsight_2_3_1(result: dict[str, Any], base: Path) -> dict[str, Any]:
    """2.3.1 shows summary_dir relative and adds 'added_info'; 0.7 (ours) does not."""
    objects = []
    for item in result["object"]:
        assert Path(item["summary_dir"]).is_absolute()
        relative = "./" + os.path.relpath(item["summary_dir"], base)
        objects.append({**item, "summary_dir": relative, "added_info": {}})
    return {**result, "object": objects}


@pytest.mark.parametrize("use_index", [False, True, True])
def test_filter_summary_lineage_matches_mindinsight(
    golden_base: Path, lw: Any, use_index: bool
) -> None:
    view = json.loads(lw.view.read_text())["filter_summary_lineage"]
    result = filter_summary_lineage(str(golden_base), use_index=use_index)
    assert _as_mindinsight_2_3_1(result, golden_base) == view
    # same key order as MindInsight, too
    assert [list(o["model_lineage"]) for o in result["object"]] == [
        list(o["model_lineage"]) for o in view["object"]
    ]
    assert list(result["customized"]) == list(view["customized"])


def test_filter_summary_lineage_user_defined_merge_order(golden_base: Path) -> None:
    """max_file_size kept 3 custom records: text from step 5 wins, keys keep first order."""
    result = filter_summary_lineage(
        str(golden_base), {"user_defined/s5": {"eq": 5}, "lineage_type": {"eq": "model"}}
    )
    assert result["count"] == 1
    (item,) = result["object"]
    assert list(item) == ["summary_dir", "model_lineage"]
    assert item["model_lineage"]["user_defined"] == {
        "s1": 1,
        "text": "step 5 padding padding padding",
        "s3": 3,
        "s5": 5,
    }
