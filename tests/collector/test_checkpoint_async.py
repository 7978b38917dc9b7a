"""async_save: the step only snapshots, failures reach the caller, and a crash never
leaves a partial file under a checkpoint's name."""

from __future__ import annotations

import logging
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np
import pytest

from rankscribe.collector import (
    CallbackParams,
    CheckpointConfig,
    ModelCheckpoint,
    RunContext,
    load_checkpoint,
)
from rankscribe.collector.errors import CheckpointTimeoutError, CheckpointWriteError
from tests._support.launchers import Launches, clean_environment, drop_launcher_variables


@pytest.fixture(autouse=True)
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    drop_launcher_variables(monkeypatch)


class Gate:
    """Holds every background write at its first chunk until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def write(self, handle: IO[bytes], chunk: bytes) -> None:
        self.started.set()
        self.release.wait(10)
        handle.write(chunk)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    stop_writes_with(monkeypatch, held.write)
    yield held
    held.release.set()  # never leave a writer thread behind


class HookedFile:
    """A binary file whose writes go through ``write(handle, chunk)``."""

    def __init__(self, handle: IO[bytes], write: Callable[[IO[bytes], bytes], None]) -> None:
        self._handle = handle
        self._write = write

    def write(self, chunk: bytes) -> int:
        self._write(self._handle, chunk)
        return len(chunk)

    def flush(self) -> None:
        self._handle.flush()

    def fileno(self) -> int:
        return self._handle.fileno()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> HookedFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._handle.__exit__(kind, error, trace)


def stop_writes_with(
    monkeypatch: pytest.MonkeyPatch, write: Callable[[IO[bytes], bytes], None]
) -> None:
    """Checkpoint files are written chunk by chunk through ``write`` (which may stop part-way).

    A checkpoint is written to a hidden ``.<name>.ckpt.<random>.tmp`` opened with
    ``os.fdopen`` (``rankscribe.ranks.files.atomic_write``): the handle of such a file
    hands each chunk to ``write``; every other file is left alone.
    """
    real_fdopen = os.fdopen

    def fdopen(descriptor: int, *args: Any, **options: Any) -> Any:
        handle = real_fdopen(descriptor, *args, **options)
        if ".ckpt." in os.readlink(f"/proc/self/fd/{descriptor}"):
            return HookedFile(handle, write)
        return handle

    monkeypatch.setattr(os, "fdopen", fdopen)


def written_file(handle: IO[bytes]) -> str:
    """The name of the (temporary) file behind ``handle``, which was opened from a descriptor."""
    return os.path.basename(os.readlink(f"/proc/self/fd/{handle.fileno()}"))


def failing_for(fragment: str) -> Callable[[IO[bytes], bytes], None]:
    """A chunk writer that fails half-way through files whose temp name holds ``fragment``."""

    def write(handle: IO[bytes], chunk: bytes) -> None:
        if fragment in written_file(handle):
            handle.write(chunk[: len(chunk) // 2])
            handle.flush()
            raise OSError(5, "Input/output error")
        handle.write(chunk)

    return write


def async_callback(directory: Path, **options: float) -> ModelCheckpoint:
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=10, async_save=True)
    return ModelCheckpoint(directory=directory, config=config, **options)  # type: ignore[arg-type]


def params_at(network: dict[str, np.ndarray], step: int) -> CallbackParams:
    return CallbackParams(train_network=network, cur_epoch_num=1, cur_step_num=step, batch_num=100)


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_step_returns_while_the_file_is_written(tmp_path: Path, gate: Gate) -> None:
    network = {"w": np.full(4, 1.0)}
    callback = async_callback(tmp_path)
    callback.step_end(RunContext(params_at(network, 1)))
    assert gate.started.wait(5)
    # The write is held: the step has returned, nothing is under the final name yet.
    assert not (tmp_path / "CKP-1_1.ckpt").exists()
    assert callback.latest_ckpt_file_name is None
    network["w"][:] = 99.0  # the optimizer moves on; the snapshot must not
    gate.release.set()
    callback.end(RunContext(params_at(network, 1)))
    assert callback.latest_ckpt_file_name == str(tmp_path / "CKP-1_1.ckpt")
    np.testing.assert_array_equal(
        load_checkpoint(tmp_path / "CKP-1_1.ckpt").parameters["w"], np.full(4, 1.0)
    )
    assert files(tmp_path) == ["CKP-1_1.ckpt"]


def test_background_failure_is_raised_on_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop_writes_with(monkeypatch, failing_for("CKP-1_2.ckpt"))
    network = {"w": np.zeros(1000)}
    callback = async_callback(tmp_path)
    callback.step_end(RunContext(params_at(network, 1)))
    with caplog.at_level(logging.ERROR, logger="rankscribe.collector.checkpoint._callback"):
        callback.step_end(RunContext(params_at(network, 2)))
        with pytest.raises(CheckpointWriteError) as caught:
            callback.step_end(RunContext(params_at(network, 3)))
    assert isinstance(caught.value, OSError)
    assert str(caught.value) == (
        f"the background save of {str(tmp_path / 'CKP-1_2.ckpt')!r} failed: "
        f"[Errno 5] Input/output error"
    )
    assert isinstance(caught.value.__cause__, OSError)
    # Logged when it happened, on the writer thread.
    assert any(
        "background save of checkpoint" in record.getMessage()
        and "CKP-1_2.ckpt" in record.getMessage()
        for record in caplog.records
    )
    assert files(tmp_path) == ["CKP-1_1.ckpt"]  # no partial file, no temporary file
    # Raised once; training goes on and saves again.
    callback.step_end(RunContext(params_at(network, 4)))
    callback.end(RunContext(params_at(network, 4)))
    assert files(tmp_path) == ["CKP-1_1.ckpt", "CKP-1_4.ckpt"]
    assert callback.latest_ckpt_file_name == str(tmp_path / "CKP-1_4.ckpt")


def test_failure_of_the_last_save_is_raised_by_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop_writes_with(monkeypatch, failing_for("CKP-1_5.ckpt"))
    callback = async_callback(tmp_path)
    with pytest.raises(CheckpointWriteError, match=r"CKP-1_5\.ckpt"):
        callback.end(RunContext(params_at({"w": np.zeros(3)}, 5)))
    assert files(tmp_path) == []


def test_leaving_the_with_block_raises_a_pending_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop_writes_with(monkeypatch, failing_for("CKP-1_1.ckpt"))
    with (
        pytest.raises(CheckpointWriteError, match=r"CKP-1_1\.ckpt"),
        async_callback(tmp_path) as callback,
    ):
        callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 1)))


def test_a_training_error_is_not_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop_writes_with(monkeypatch, failing_for("CKP-1_1.ckpt"))
    with (
        caplog.at_level(logging.ERROR),
        pytest.raises(RuntimeError, match="loss is NaN"),
        async_callback(tmp_path) as callback,
    ):
        callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 1)))
        raise RuntimeError("loss is NaN")
    assert "checkpoint save failed while training was failing" in caplog.text


def once_released(call: Callable[[], None]) -> None:
    """``call`` (a save that waits up to 0.05 s for the one in flight), again until it does
    not time out: released, a held save (its fsync and rename among it) completes within a
    few of those waits, however busy the disk; one wait alone failed on a loaded machine."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            call()
            return
        except CheckpointTimeoutError:
            assert time.monotonic() < deadline, "the released save never completed"


def test_end_waits_with_a_timeout(tmp_path: Path, gate: Gate) -> None:
    callback = async_callback(tmp_path, save_timeout=0.05)
    callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 1)))
    with pytest.raises(CheckpointTimeoutError) as caught:
        callback.end(RunContext(params_at({"w": np.zeros(3)}, 1)))
    assert isinstance(caught.value, TimeoutError)
    assert str(caught.value) == (
        f"the background save of {str(tmp_path / 'CKP-1_1.ckpt')!r} did not finish within "
        f"0.05 s; it is still running"
    )
    gate.release.set()
    once_released(lambda: callback.end(RunContext(params_at({"w": np.zeros(3)}, 1))))
    assert files(tmp_path) == ["CKP-1_1.ckpt"]


def test_one_write_in_flight_at_most(tmp_path: Path, gate: Gate) -> None:
    callback = async_callback(tmp_path, save_timeout=0.05)
    callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 1)))
    assert gate.started.wait(5)
    # The next save waits for the held one rather than starting a second writer.
    with pytest.raises(CheckpointTimeoutError):
        callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 2)))
    # On disk: one temporary file, step 1's; step 2's write has not begun.
    (temporary,) = files(tmp_path)
    assert temporary.startswith(".CKP-1_1.ckpt.") and temporary.endswith(".tmp")
    gate.release.set()
    once_released(lambda: callback.step_end(RunContext(params_at({"w": np.zeros(3)}, 2))))
    once_released(lambda: callback.end(RunContext(params_at({"w": np.zeros(3)}, 2))))
    assert files(tmp_path) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


def test_retention_runs_after_background_writes(tmp_path: Path) -> None:
    config = CheckpointConfig(keep_checkpoint_max=2, async_save=True)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    network = {"w": np.zeros(2)}
    for step in range(1, 6):
        network["w"][:] = step
        callback.step_end(RunContext(params_at(network, step)))
    callback.end(RunContext(params_at(network, 5)))
    assert files(tmp_path) == ["CKP-1_4.ckpt", "CKP-1_5.ckpt"]
    np.testing.assert_array_equal(
        load_checkpoint(tmp_path / "CKP-1_4.ckpt").parameters["w"], [4.0, 4.0]
    )


CRASHING_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from rankscribe.collector import CallbackParams, CheckpointConfig, ModelCheckpoint, RunContext

    class HalfWritten:
        # The file of step 3's checkpoint: half of its first chunk reaches the disk, then
        # the process is killed.
        def __init__(self, handle):
            self.handle = handle

        def write(self, chunk):
            self.handle.write(chunk[: len(chunk) // 2])
            self.handle.flush()
            os.fsync(self.handle.fileno())
            print("HALF", flush=True)
            time.sleep(60)  # killed here

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.handle.close()

    real_fdopen = os.fdopen

    def fdopen(descriptor, *args, **options):
        handle = real_fdopen(descriptor, *args, **options)
        if "CKP-1_3.ckpt" in os.readlink(f"/proc/self/fd/{descriptor}"):
            return HalfWritten(handle)
        return handle

    os.fdopen = fdopen  # the call the checkpoint's atomic write opens its file with
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=10, async_save=True)
    callback = ModelCheckpoint(directory=sys.argv[1], config=config)
    network = {"w": np.zeros(200_000, np.float32)}
    for step in (1, 2, 3):
        network["w"][:] = step
        params = CallbackParams(train_network=network, cur_epoch_num=1, cur_step_num=step,
                                batch_num=10)
        callback.step_end(RunContext(params))
    callback.end(RunContext(params))
""")


def test_kill_during_a_background_save_leaves_only_complete_checkpoints(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(CRASHING_SCRIPT)
    directory = tmp_path / "ckpt"
    with Launches(timeout=120) as launches:
        process = launches.start([sys.executable, script, directory], env=clean_environment())
        launches.wait_until(
            process, lambda: launches.printed(process).startswith("HALF\n"), "the half write"
        )
        os.kill(process.pid, signal.SIGKILL)
        [killed] = launches.wait(check=False)
    assert killed.returncode == -signal.SIGKILL, killed.output
    names = files(directory)
    assert [name for name in names if name.endswith(".ckpt")] == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]
    for step in (1, 2):
        parameters, _ = load_checkpoint(directory / f"CKP-1_{step}.ckpt")
        assert parameters["w"].shape == (200_000,)
        assert np.all(parameters["w"] == step)
    # The interrupted save's half-written bytes are only in its hidden temporary file.
    leftovers = [name for name in names if not name.endswith(".ckpt")]
    assert len(leftovers) == 1
    assert leftovers[0].startswith(".CKP-1_3.ckpt.")
    assert leftovers[0].endswith(".tmp")
    assert (
        0 < os.path.getsize(directory / leftovers[0]) < os.path.getsize(directory / "CKP-1_2.ckpt")
    )
    # And a new run in that directory is not confused by it.
    assert ModelCheckpoint(directory=directory).prefix == "CKP_1"
