"""The file system is not trusted: planted links are never followed, nothing is shared by
accident, and what the writer creates is private unless group-readable is asked for."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from rankscribe.ranks.files import (
    GROUP_READABLE_ENV,
    UnsafeFileError,
    atomic_write,
    dir_mode,
    file_mode,
    make_private_dir,
)
from rankscribe.writer import SummaryRecord, events, reader
from rankscribe.writer.errors import WriterTypeError
from tests._support.modes import umask_022  # noqa: F401 - autouse: every test here runs under it

from .conftest import NameClaims, mode_of, summary_files, timestamp_of


def test_the_umask_fixture_unsets_the_writer_s_group_readable_variable() -> None:
    assert GROUP_READABLE_ENV not in os.environ  # the fixture ran


def export_tensors(record: SummaryRecord, steps: int = 20) -> None:
    for step in range(steps):
        record.add_value("tensor", "w", np.full(3, step))
        record.record(step)


def every_path(root: Path) -> list[Path]:
    return [root, *sorted(root.rglob("*"))]


# ---------------------------------------------------------------- planted links


def test_a_planted_export_link_is_never_followed(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    now = time.time()
    for second in range(int(now) - 1, int(now) + 5):  # every T the record could take
        (log_dir / f"export_{second}").symlink_to(elsewhere, target_is_directory=True)
    with SummaryRecord(log_dir, export_options={"tensor_format": "npy"}) as record:
        export_tensors(record, 3)
    assert list(elsewhere.iterdir()) == []  # nothing written through a link
    [summary] = summary_files(log_dir)
    export = log_dir / f"export_{timestamp_of(summary)}"
    assert not export.is_symlink() and export.is_dir()
    assert sorted(p.name for p in (export / "tensor").iterdir()) == [
        "w_0.npy",
        "w_1.npy",
        "w_2.npy",
    ]


def test_two_writers_of_two_processes_in_one_second_get_their_own_export_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name_claims: NameClaims
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.5)  # the same second
    records = []
    for _ in range(2):
        name_claims.forget()  # a second process knows nothing of the first one's claims
        records.append(SummaryRecord(tmp_path, export_options={"tensor_format": "npy"}))
    for record in records:
        export_tensors(record)
    for record in records:
        record.close()
    exported = sorted(tmp_path.glob("export_*/tensor/*.npy"))
    assert len(exported) == 40  # 20 of 40 survived when the two shared one folder
    assert len({path.parent.parent for path in exported}) == 2
    for path in exported:
        assert int(np.load(path)[0]) == int(path.stem.split("_")[1])


def test_make_private_dir_refuses_a_link_or_a_file_where_it_must_create(tmp_path: Path):
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    with pytest.raises(FileExistsError):
        make_private_dir(link, exist_ok=False)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        make_private_dir(dangling, exist_ok=False)
    with pytest.raises(NotADirectoryError):
        make_private_dir(dangling)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        make_private_dir(tmp_path / "file")
    assert not (tmp_path / "nowhere").exists()  # nothing created through the link
    # An existing directory the user made (a link to one included) is used as it is.
    assert make_private_dir(link) == str(link)


def test_a_planted_link_at_a_file_name_is_replaced_never_written_through(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "index.json").symlink_to(victim)
    atomic_write(tmp_path / "index.json", [b"{}"], mode=file_mode(False))
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "index.json").is_symlink()
    assert (tmp_path / "index.json").read_bytes() == b"{}"


# ---------------------------------------------------------------- modes


def test_everything_is_private_by_default_parents_included(tmp_path: Path) -> None:
    log_dir = tmp_path / "a" / "b" / "logs"  # three directories made on the way
    with SummaryRecord(
        log_dir, export_options={"tensor_format": "npy"}, formats=("mindinsight", "tensorboard")
    ) as record:
        export_tensors(record, 2)
        record.add_value("train_lineage", "l", _train_lineage())
        record.record(3)
        record.flush()
        open_files = [Path(p) for p in record.files]
        assert {mode_of(path) for path in open_files} == {0o600}
    for path in every_path(tmp_path / "a"):
        expected = 0o700 if path.is_dir() else 0o400
        assert mode_of(path) == expected, f"{path}: {oct(mode_of(path))}"
    assert len(list((tmp_path / "a").rglob("*.npy"))) == 2


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_group_readable_is_one_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    os.umask(0o077)  # the switch gives the mode it names, whatever the umask
    options = {}
    if how == "argument":
        options["group_readable"] = True
    else:
        monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    log_dir = tmp_path / "shared" / "logs"
    with SummaryRecord(log_dir, export_options={"tensor_format": "npy"}, **options) as record:
        export_tensors(record, 2)
        record.flush()
        assert {mode_of(path) for path in record.files} == {0o640}
    for path in every_path(tmp_path / "shared"):
        expected = 0o750 if path.is_dir() else 0o440
        assert mode_of(path) == expected, f"{path}: {oct(mode_of(path))}"
        assert not mode_of(path) & stat.S_IRWXO


def test_the_argument_wins_over_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    with SummaryRecord(tmp_path / "logs", group_readable=False) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
    assert mode_of(tmp_path / "logs") == 0o700
    assert {mode_of(path) for path in summary_files(tmp_path / "logs")} == {0o400}
    with pytest.raises(WriterTypeError, match="'group_readable' must be a bool"):
        SummaryRecord(tmp_path / "other", group_readable="yes")


def test_mode_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (file_mode(True), file_mode(False), dir_mode()) == (0o400, 0o600, 0o700)
    assert (file_mode(True, True), file_mode(False, True), dir_mode(True)) == (0o440, 0o640, 0o750)
    monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    assert (file_mode(True), file_mode(False), dir_mode()) == (0o440, 0o640, 0o750)
    assert (file_mode(True, False), dir_mode(False)) == (0o400, 0o700)
    monkeypatch.setenv(GROUP_READABLE_ENV, "0")
    assert dir_mode() == 0o700


def _train_lineage():
    from rankscribe.writer.pb import lineage_pb2

    message = lineage_pb2.TrainLineage()
    message.algorithm.network = "Net"
    return message


def test_a_fifo_named_like_an_event_file_is_refused_never_waited_on(tmp_path: Path) -> None:
    # Another user may plant one in a shared summary dir: reading the dir skips it, and
    # naming it is an error at once (an OSError), never a read that waits for a writer.
    with SummaryRecord(tmp_path / "run") as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    fifo = tmp_path / "run" / "events.out.events.summary.1795245300.0.vm_MS"
    os.mkfifo(fifo)
    previous = signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(10)
    try:
        assert reader.scalars(tmp_path / "run") == {"loss": [(1, 0.5)]}
        for read in (reader.scalars, reader.scalar_arrays, lambda p: list(events.read_events(p))):
            with pytest.raises(UnsafeFileError, match="it is a FIFO, not a regular file"):
                read(fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _blocked(_signum: int, _frame: object) -> None:
    raise TimeoutError("blocked on a FIFO")
