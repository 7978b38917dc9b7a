"""Final runs (read-only files, settled directory) are taken on two stats, and never stale.

A run written or extended after the index was made is seen by the next query,
in this process (which remembers its last scan) and in another one (which
reads the index from disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs, filter_summary_lineage
from tests._support.launchers import run_bounded
from tests.lineage._index_bases import OLD, finish, read_index
from tests.lineage._index_reads import as_a_new_process, query


def make_base(tmp_path: Path, lw: Any, count: int = 3) -> Path:
    base = tmp_path / "base"
    for index in range(count):
        lw.write(
            base / f"run{index}",
            [lw.train(network=f"Net{index}", loss=index / 10)],
            mtime=OLD + index,
        )
        finish(base / f"run{index}")
    return base


def final(base: Path, run: str) -> bool:
    """Whether the index on disk holds ``run`` as final."""
    index = read_index(base)
    return index["final"][index["path"].index(run)]


def networks(base: Path) -> list[str]:
    result = filter_summary_lineage(str(base), {"sorted_name": "network"})
    return [item["model_lineage"]["network"] for item in result["object"]]


def count_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every directory a scan lists, whether by entries (``scandir``) or by names only."""
    listed: list[str] = []
    real, real_names = os.scandir, os.listdir

    def listing(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return real(path)

    def names(path: Any = ".") -> list[str]:
        listed.append(os.fspath(path))
        return real_names(path)

    monkeypatch.setattr(os, "scandir", listing)
    monkeypatch.setattr(os, "listdir", names)
    return listed


def test_a_final_run_is_not_listed_again(
    tmp_path: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(tmp_path, lw)
    assert query(base).parsed_runs == 3
    assert all(read_index(base)["final"])
    listed = count_listings(monkeypatch)
    warm = query(base)
    assert (warm.parsed_runs, warm.reused_runs) == (0, 3)
    assert listed == [str(base)]  # the base dir only; each run took two stats
    as_a_new_process(base)  # from the index on disk
    listed.clear()
    again = query(base)
    assert (again.parsed_runs, again.reused_runs) == (0, 3)
    assert listed == [str(base)]


def test_a_new_file_in_a_final_run_is_seen(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    assert networks(base) == ["Net0", "Net1", "Net2"]
    lw.write(base / "run1", [lw.train(network="Net1b")], timestamp=1800000000)
    assert networks(base) == ["Net0", "Net1b", "Net2"]
    as_a_new_process(base)
    assert networks(base) == ["Net0", "Net1b", "Net2"]


def test_a_new_run_is_seen(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    assert networks(base) == ["Net0", "Net1", "Net2"]
    lw.write(base / "run3", [lw.train(network="Net3")])
    assert networks(base) == ["Net0", "Net1", "Net2", "Net3"]


def test_an_open_run_is_looked_at_every_time(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    live = lw.write(base / "live", [lw.train(network="Early")], mtime=OLD)
    os.utime(base / "live", (OLD, OLD))  # settled, but its file is still writable
    assert "Early" in networks(base)
    assert final(base, "./live") is False
    # the writer appends (same file: the directory's mtime does not move)
    with open(live, "ab") as stream:
        from rankscribe.writer.files import frame

        stream.write(frame(lw.train(network="Late").SerializeToString()))
    os.utime(base / "live", (OLD, OLD))
    assert "Late" in networks(base) and "Early" not in networks(base)


def test_a_recently_changed_directory_is_not_trusted_on_its_mtime(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    lw.write(base / "fresh", [lw.train(network="Fresh")])
    for file in (base / "fresh").iterdir():
        file.chmod(0o400)
    assert "Fresh" in networks(base)
    # Its directory's mtime is within a timestamp tick of the index's: listed every time.
    # A file added within the same timestamp tick would leave the mtime as it was.
    mtime = (base / "fresh").stat().st_mtime_ns
    lw.write(base / "fresh", [lw.train(network="Fresher")], timestamp=1800000000)
    os.utime(base / "fresh", ns=(mtime, mtime))
    assert "Fresher" in networks(base)


def test_a_run_that_becomes_final_is_written_to_the_index(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    lw.write(base / "run9", [lw.train(network="Net9")], mtime=OLD)
    os.utime(base / "run9", (OLD, OLD))
    networks(base)
    assert final(base, "./run9") is False
    finish(base / "run9")
    assert "Net9" in networks(base)
    assert final(base, "./run9") is True


def test_another_process_sees_what_this_one_indexed_and_then_more(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    assert networks(base) == ["Net0", "Net1", "Net2"]
    lw.write(base / "run4", [lw.train(network="Net4")])
    code = (
        "import sys; from rankscribe.lineage import filter_summary_lineage as f; "
        "r = f(sys.argv[1], {'sorted_name': 'network'}); "
        "print(','.join(o['model_lineage']['network'] for o in r['object']))"
    )
    shown = run_bounded(
        [sys.executable, "-c", code, str(base)], timeout=120, stderr_apart=True
    ).stdout.strip()
    assert shown == "Net0,Net1,Net2,Net4"
    # and this process sees the index the other one wrote, and a later change
    lw.write(base / "run5", [lw.train(network="Net5")])
    assert networks(base) == ["Net0", "Net1", "Net2", "Net4", "Net5"]


def test_a_removed_final_run_is_gone(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    networks(base)
    for file in (base / "run1").iterdir():
        file.unlink()
    (base / "run1").rmdir()
    assert networks(base) == ["Net0", "Net2"]


def _copy_in_place(source: Path, target: Path, *, keep_mtime: bool) -> None:
    """``cp source target`` (``cp -p`` with ``keep_mtime``): same inode, same directory mtime."""
    directory_times = target.parent.stat().st_mtime_ns
    inode = target.stat().st_ino
    times = target.stat().st_mtime_ns
    target.chmod(0o600)
    with open(target, "r+b") as stream:  # cp opens the existing file with O_TRUNC
        stream.truncate(0)
        stream.write(source.read_bytes())
    target.chmod(0o400)
    if keep_mtime:
        os.utime(target, ns=(times, times))
    os.utime(target.parent, ns=(directory_times, directory_times))
    assert target.stat().st_ino == inode


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["cp", "cp-p-same-size-and-mtime"])
def test_a_lineage_file_copied_over_a_final_run_is_seen(
    tmp_path: Path, lw: Any, keep_mtime: bool
) -> None:
    base = make_base(tmp_path, lw)
    other = lw.write(tmp_path / "elsewhere", [lw.train(network="Net7", loss=0.7)])
    target = next((base / "run1").iterdir())
    assert other.stat().st_size == target.stat().st_size  # so only the times can tell
    assert networks(base) == ["Net0", "Net1", "Net2"]
    _copy_in_place(other, target, keep_mtime=keep_mtime)
    assert networks(base) == ["Net0", "Net2", "Net7"]  # this process
    code = (
        "import sys; from rankscribe.lineage.cli import main; "
        "sys.exit(main(['query', sys.argv[1], '--sort', 'network', '--columns', "
        "'network,loss']))"
    )
    shown = run_bounded(
        [sys.executable, "-c", code, str(base)], timeout=120, stderr_apart=True
    ).stdout.splitlines()
    assert [line.split() for line in shown[1:4]] == [
        ["run0", "Net0", "0.0000"],
        ["run2", "Net2", "0.2000"],
        ["run1", "Net7", "0.7000"],
    ]


_WRITER = """
import os, sys, time
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2
base, count = sys.argv[1], int(sys.argv[2])
for index in range(count):
    event = lineage_pb2.LineageEvent(wall_time=1.0)
    event.train_lineage.algorithm.network = f"New{index}"
    event.train_lineage.algorithm.loss = 0.5
    directory = os.path.join(base, f"new{index:03d}")
    os.mkdir(directory)
    path = os.path.join(directory, "events.out.events.summary.1.0.vm_lineage")
    with open(path + ".part", "wb") as stream:
        stream.write(frame(event.SerializeToString()))
    os.chmod(path + ".part", 0o400)
    os.rename(path + ".part", path)
    # and an earlier, finished run rewritten in place (same inode), as cp does
    old = os.path.join(base, f"run{index % 3}", "events.out.events.summary.1700000000.0.vm_lineage")
    os.chmod(old, 0o600)
    event.train_lineage.algorithm.network = f"Rewritten{index}"
    with open(old, "r+b") as stream:
        stream.truncate(0)
        stream.write(frame(event.SerializeToString()))
    os.chmod(old, 0o400)
    time.sleep(0.02)
"""


def test_one_process_writes_runs_while_another_queries(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    networks(base)  # indexed
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(base), "30"])
    command = [
        sys.executable,
        "-m",
        "rankscribe.lineage.cli",
        "query",
        str(base),
        "--format",
        "json",
    ]
    counts = []
    try:
        while writer.poll() is None:
            process = subprocess.run(
                command, capture_output=True, text=True, timeout=120, check=False
            )
            assert process.returncode == 0, process.stderr
            assert "Traceback" not in process.stderr
            counts.append(json.loads(process.stdout)["count"])
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    assert counts == sorted(counts) and all(3 <= count <= 33 for count in counts)
    # Once the writer is done, a query from a new process shows every change, in-place
    # rewrites included, exactly as reading every file would.
    final_answer = json.loads(
        subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    )
    assert final_answer == filter_runs(base, lineage_type="model", use_index=False)
    shown = {item["model_lineage"]["network"] for item in final_answer["object"]}
    assert {"Rewritten27", "Rewritten28", "Rewritten29"} <= shown
    assert not shown & {"Net0", "Net1", "Net2"}
