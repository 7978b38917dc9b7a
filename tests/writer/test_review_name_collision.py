"""Another process can take a file name first: files are created lazily, so two
processes writing into one directory in the same second (two scripts with one
log_dir, a pool of workers of rank 0) claim the same T. The one that opens second
must write under a new name instead of losing everything it records."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.pb import lineage_pb2


def _scalars_of(path: os.PathLike[str] | str) -> dict[str, list[tuple[int, float]]]:
    return reader.scalars(path, strict=True)


def test_a_name_taken_by_another_process_is_not_fatal(tmp_path, disk):
    record = SummaryRecord(tmp_path)
    # Another process, created in the same second, claimed the same T and wrote first.
    taken = record.log_dir
    other = textwrap.dedent(f"""
        import time
        from rankscribe.writer import SummaryRecord
        time.time = lambda: {float(_timestamp(taken))}
        with SummaryRecord({os.fspath(tmp_path)!r}) as other:
            other.add_value("scalar", "other", 1.0)
            other.record(0)
    """)
    subprocess.run([sys.executable, "-c", other], check=True, timeout=60)
    assert os.path.exists(taken)

    for step in range(3):
        record.add_value("scalar", "mine", float(step))
        record.record(step)
    record.close()

    files = disk.summary_files(tmp_path)
    assert len(files) == 2
    assert _scalars_of(taken) == {"other": [(0, 1.0)]}
    (mine,) = [path for path in files if os.fspath(path) != taken]
    assert _scalars_of(mine) == {"mine": [(0, 0.0), (1, 1.0), (2, 2.0)]}
    assert record.files == [os.fspath(mine)]
    assert record.log_dir == os.fspath(mine)


def test_lineage_and_tensorboard_files_also_move_to_a_free_name(tmp_path):
    record = SummaryRecord(tmp_path, formats=("mindinsight", "tensorboard"))
    lineage_name = record.log_dir[: -len("_MS")] + "_lineage"
    for path in (record.log_dir, lineage_name):
        with open(path, "wb"):
            pass
    record.add_value("scalar", "loss", 0.5)
    record.add_value("train_lineage", "train", lineage_pb2.TrainLineage())
    record.record(1)
    record.close()

    assert _scalars_of(tmp_path) == {"loss": [(1, 0.5)]}
    assert len(reader.load_lineage_dir(tmp_path, strict=True)) == 1
    assert all(os.path.getsize(path) > 0 for path in record.files)
    assert len(record.files) == 3


def _timestamp(path: str) -> int:
    return int(os.path.basename(path).split(".")[4])
