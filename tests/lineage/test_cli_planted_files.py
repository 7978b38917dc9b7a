"""A FIFO, or a link to one, planted where the commands read a file never hangs them.

Another user of a shared base dir may plant a FIFO at any name the commands read (the
lineage index, a lineage file, an event file, the live view's state file): each
command runs here as a real process (the console scripts) and must return within
seconds, saying something sensible. As root (CI), each planted file belongs to uid
65534, as another user's would.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from rankscribe.jobview.protocol import LIVE_STATE_NAME
from tests._support.launchers import Finished, run_bounded
from tests._support.needs import needs

GOLDEN = Path(__file__).resolve().parents[1] / "compat" / "data" / "mindspore-2.10"
BIN = Path(sys.executable).parent
INDEX = ".rankscribe-lineage-index.npz"  # docs/lineage-queries.md, "The index"
LINEAGE = "events.out.events.summary.1795245300.0.vm_lineage"
EVENTS = "events.out.events.summary.1795245300.0.vm_MS"
ANOTHER_USER = 65534  # nobody
IS_ROOT = os.geteuid() == 0


def plant(path: Path, how: str) -> None:
    """A FIFO at ``path`` (or a link there to one beside it), another user's when root."""
    if how == "fifo":
        os.mkfifo(path)
    else:
        pipe = path.with_name(path.name + ".pipe")
        os.mkfifo(pipe)
        path.symlink_to(pipe)
        if IS_ROOT:
            os.chown(pipe, ANOTHER_USER, ANOTHER_USER)
    if IS_ROOT:
        os.lchown(path, ANOTHER_USER, ANOTHER_USER)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A base dir holding one run recorded by MindSpore (summary and lineage files)."""
    root = tmp_path / "base"
    root.mkdir()
    shutil.copytree(GOLDEN / "lineage_train_eval", root / "golden")
    return root


def command(*arguments: str | Path) -> Finished:
    # A command that hangs is killed at the timeout and the test fails with its output.
    return run_bounded(
        [BIN / str(arguments[0]), *arguments[1:]], timeout=20, check=False, stderr_apart=True
    )


@pytest.mark.parametrize("how", ["fifo", "link to a fifo"])
@pytest.mark.parametrize(
    "where",
    [
        INDEX,  # the base dir's index: refused, warned about, rebuilt
        f"other/{LINEAGE}",  # the only lineage file of another run
        f"golden/{LINEAGE}",  # a lineage file beside the run's real ones
        f"golden/{EVENTS}",  # a summary file beside the run's real ones
    ],
)
def test_query_returns_with_a_fifo_planted_where_it_reads(base: Path, where: str, how: str) -> None:
    target = base / where
    target.parent.mkdir(exist_ok=True)
    plant(target, how)
    result = command("rankscribe-lineage", "query", base)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("golden  ")
    assert result.stdout.splitlines()[-1] == "1 matching run"
    if where == INDEX:
        found = "a FIFO" if how == "fifo" else "a symbolic link"
        assert f"it is {found}, not a regular file); rebuilding it" in result.stderr
        assert (base / INDEX).is_file() and not (base / INDEX).is_symlink()  # rebuilt


@pytest.mark.parametrize("how", ["fifo", "link to a fifo"])
@pytest.mark.parametrize("where", [LIVE_STATE_NAME, LINEAGE, EVENTS])
def test_show_returns_with_a_fifo_planted_where_it_reads(base: Path, where: str, how: str) -> None:
    plant(base / "golden" / where, how)
    result = command("rankscribe-lineage", "show", base / "golden")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"run {base / 'golden'}\n")
    assert "hyper_parameters  learning_rate" in result.stdout


def test_show_of_a_run_whose_only_lineage_file_is_a_fifo_says_so(base: Path) -> None:
    (base / "other").mkdir()
    plant(base / "other" / LINEAGE, "fifo")
    result = command("rankscribe-lineage", "show", base / "other")
    assert result.returncode == 1
    assert "error: no lineage file in" in result.stderr


@needs("plotly", envs="lineage")  # the report draws with it
def test_report_and_dump_return_with_a_fifo_named_like_an_event_file(base: Path) -> None:
    plant(base / "golden" / EVENTS, "fifo")
    report = command("rankscribe-lineage", "report", base, "-o", base / "report.html")
    assert report.returncode == 0, report.stderr
    assert (base / "report.html").stat().st_size > 0
    dump = command("rankscribe-dump", base / "golden" / EVENTS)
    assert dump.returncode == 1
    assert dump.stderr.strip() == (
        f"rankscribe-dump: error: refusing to read {base / 'golden' / EVENTS}: "
        "it is a FIFO, not a regular file"
    )


@pytest.mark.skipif(not IS_ROOT, reason="giving the index to another user (uid 65534) needs root")
def test_query_ignores_an_index_of_another_user(base: Path) -> None:
    assert command("rankscribe-lineage", "query", base).returncode == 0  # writes the index
    os.chown(base / INDEX, ANOTHER_USER, ANOTHER_USER)
    result = command("rankscribe-lineage", "query", base)
    assert result.returncode == 0, result.stderr
    assert (
        f"ignoring lineage index {base / INDEX} (it belongs to uid 65534 (nobody), not to this "
        "user, uid 0 (root)); reading the runs"
    ) in result.stderr
    assert result.stdout.splitlines()[-1] == "1 matching run"
