"""export_options={'tensor_format': 'npy'}: every recorded tensor also as a .npy file.

docs/file-format.md, "File names":
``<log_dir>/export_<T>/tensor/<urlquote(tag, safe='')>_<step>.npy``, files 0400, the tensor
folder 0700. A tag can never make a file land outside that folder.
"""

from __future__ import annotations

import logging
import os
from urllib.parse import quote

import numpy as np
import pytest

from rankscribe.writer.pb import lineage_pb2

NPY = {"tensor_format": "npy"}

TAGS = [
    "plain",
    "a/b c",
    "..",
    ".",
    "../../escape",
    "/etc/passwd",
    "dir\\file",
    "%",
    "%2F",
    "50% done",
    "α/β",
    "日本語 タグ",
    "tab\there\nnewline",
    "nul\x00byte",
    "~user",
    "x" * 300,
    "é" * 300,
]


def export_folder(record) -> str:
    return os.path.join(record.directory, f"export_{_timestamp(record)}", "tensor")


def _timestamp(record) -> str:
    # log_dir is the summary file; its T is the one every file of this record shares.
    return os.path.basename(record.log_dir).split(".")[4]


def every_file_under(directory) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(root, name), directory)
        for root, _, names in os.walk(directory)
        for name in names
    )


def test_tags_of_every_kind_land_inside_the_tensor_folder(make_record, tmp_path, log_dir, disk):
    arrays = {
        tag: np.arange(index + 2, dtype=dtype).reshape(1, -1)
        for index, (tag, dtype) in enumerate(
            zip(
                TAGS,
                [np.float32, np.float64, np.int64, np.int8, np.uint16, np.float16] * 3,
                strict=False,
            )
        )
    }
    record = make_record(export_options=NPY)
    for tag, array in arrays.items():
        record.add_value("tensor", tag, array)
    record.record(3)
    record.close()

    folder = export_folder(record)
    assert os.path.isdir(folder)
    assert disk.mode_of(folder) == 0o700
    names = os.listdir(folder)
    assert len(names) == len(TAGS)
    # Nothing anywhere but the summary file and the exported tensors.
    relative_folder = os.path.relpath(folder, tmp_path)
    outside = [
        path for path in every_file_under(tmp_path) if os.path.dirname(path) != relative_folder
    ]
    assert outside == [os.path.relpath(record.log_dir, tmp_path)]

    by_name = {}
    for tag, array in arrays.items():
        quoted = quote(tag, safe="")
        expected = f"{quoted}_3.npy"
        if len(expected) <= 255:
            assert expected in names, tag
            name = expected
        else:  # too long for a file name: a shortened, still unique name
            [name] = [n for n in names if n.startswith(quoted[:100])]
            assert name.endswith("_3.npy")
            assert len(name.encode()) <= 255
        assert "/" not in name and name not in (".", "..")
        by_name[name] = tag
        path = os.path.join(folder, name)
        assert os.path.realpath(os.path.dirname(path)) == os.path.realpath(folder)
        assert disk.mode_of(path) == 0o400
        loaded = np.load(path, allow_pickle=False)
        assert loaded.dtype == array.dtype, tag
        assert loaded.shape == array.shape
        np.testing.assert_array_equal(loaded, array)
    assert len(by_name) == len(TAGS)


def test_original_example_name(make_record, disk):
    record = make_record(export_options=NPY)
    record.add_value("tensor", "a/b c", np.ones(2))
    record.record(1)
    record.close()
    assert os.listdir(export_folder(record)) == ["a%2Fb%20c_1.npy"]  # docs/file-format.md


def test_export_folder_shares_the_summary_timestamp(make_record, log_dir, disk):
    record = make_record(export_options=NPY)
    record.add_value("tensor", "t", np.ones(2))
    record.record(1)
    record.close()
    [summary] = disk.summary_files(log_dir)
    assert sorted(os.listdir(log_dir)) == sorted(
        [summary.name, f"export_{disk.timestamp_of(summary)}"]
    )


@pytest.mark.parametrize(
    "array",
    [
        np.array([2**62 + 1, -(2**63)], dtype=np.int64),
        np.array([[0.1, np.nan], [np.inf, -0.0]], dtype=np.float64),
        np.array([True, False]),
        np.array([2**64 - 1], dtype=np.uint64),
        np.arange(60, dtype=np.float16).reshape(3, 4, 5),
        np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
    ],
    ids=lambda a: f"{a.dtype}{list(a.shape)}",
)
def test_exported_content_is_exact(make_record, array):
    record = make_record(export_options=NPY)
    record.add_value("tensor", "t", array)
    record.record(0)
    record.close()
    loaded = np.load(os.path.join(export_folder(record), "t_0.npy"), allow_pickle=False)
    assert loaded.dtype == array.dtype
    assert loaded.shape == array.shape
    assert loaded.tobytes(order="C") == np.ascontiguousarray(array).tobytes()


def test_one_file_per_tag_and_step(make_record):
    record = make_record(export_options=NPY)
    for step in (-1, 0, 7, 2**40):
        record.add_value("tensor", "w", np.full(2, step, dtype=np.int64))
        record.add_value("tensor", "b", np.full(1, step, dtype=np.int64))
        record.record(step)
    record.close()
    folder = export_folder(record)
    assert sorted(os.listdir(folder)) == sorted(
        f"{tag}_{step}.npy" for tag in ("w", "b") for step in (-1, 0, 7, 2**40)
    )
    assert np.load(os.path.join(folder, "w_-1.npy")).tolist() == [-1, -1]
    assert np.load(os.path.join(folder, f"b_{2**40}.npy")).tolist() == [2**40]


def test_a_tag_recorded_twice_at_one_step_keeps_the_last(make_record):
    record = make_record(export_options=NPY)
    record.add_value("tensor", "w", np.zeros(2))
    record.record(5)
    record.add_value("tensor", "w", np.ones(2))
    record.record(5)
    record.close()
    folder = export_folder(record)
    assert os.listdir(folder) == ["w_5.npy"]  # no temporary file left behind
    np.testing.assert_array_equal(np.load(os.path.join(folder, "w_5.npy")), np.ones(2))


def test_long_tags_with_a_common_prefix_do_not_collide(make_record):
    record = make_record(export_options=NPY)
    base = "layer/" * 60
    for index in range(3):
        record.add_value("tensor", f"{base}{index}", np.full(1, index))
    record.record(1)
    record.close()
    folder = export_folder(record)
    names = os.listdir(folder)
    assert len(names) == 3
    assert sorted(int(np.load(os.path.join(folder, n))[0]) for n in names) == [0, 1, 2]


@pytest.mark.parametrize("options", [None, {"tensor_format": None}, {}])
def test_no_export_without_npy(make_record, log_dir, options):
    record = make_record(export_options=options)
    record.add_value("tensor", "t", np.ones(2))
    record.record(1)
    record.close()
    assert [name for name in os.listdir(log_dir) if name.startswith("export")] == []


def test_only_tensors_are_exported(make_record, log_dir):
    record = make_record(export_options=NPY)
    record.add_value("scalar", "s", 1.0)
    record.add_value("histogram", "h", np.ones(4))
    record.add_value("image", "i", np.zeros((1, 3, 2, 2)))
    record.add_value("train_lineage", "l", lineage_pb2.TrainLineage())
    record.record(1)
    record.close()
    assert [name for name in os.listdir(log_dir) if name.startswith("export")] == []


def test_filtered_tensors_are_not_exported(make_record):
    record = make_record(export_options=NPY)
    record.add_value("tensor", "dropped", np.ones(2))
    record.record(1, plugin_filter=lambda plugin: plugin != "tensor")
    record.add_value("tensor", "kept", np.ones(2))
    record.record(2)
    record.close()
    assert os.listdir(export_folder(record)) == ["kept_2.npy"]


def test_export_files_do_not_count_against_max_file_size(make_record, log_dir, disk):
    record = make_record(export_options=NPY, max_file_size=1000)
    for step in range(3):
        record.add_value("tensor", "w", np.full(100, step, dtype=np.float32))  # ~400+ B each
        record.record(step)
    record.close()
    assert sorted(os.listdir(export_folder(record))) == ["w_0.npy", "w_1.npy", "w_2.npy"]
    assert [e.step for e in disk.summary_steps(log_dir)] == [0, 1, 2]


@pytest.mark.parametrize("raise_exception", [False, True])
def test_export_failure_is_an_os_error_of_the_writer(
    make_record, log_dir, disk, caplog, raise_exception
):
    record = make_record(export_options=NPY, raise_exception=raise_exception)
    # The record's export_<T> is its own from the start: the obstacle is inside it.
    log_dir.joinpath(f"export_{_timestamp(record)}", "tensor").write_text("in the way")
    record.add_value("tensor", "w", np.ones(2))
    record.record(1)
    with caplog.at_level(logging.ERROR, logger="rankscribe"):
        if raise_exception:
            with pytest.raises(OSError):
                record.flush()
        else:
            assert record.flush() is False  # the .npy is not on disk: no success reported
        record.add_value("tensor", "w", np.ones(2))
        assert record.record(2) is True
        if raise_exception:
            with pytest.raises(OSError):
                record.flush()
        else:
            assert record.flush() is False
    if not raise_exception:
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1  # logged once, not once per tensor
        assert "export" in errors[0].getMessage()
    record.close()
    # The summary file is not affected.
    assert [e.step for e in disk.summary_steps(log_dir)] == [1, 2]
