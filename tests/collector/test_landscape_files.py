"""The bytes of a landscape parameter file: what ``safetensors.numpy.save`` writes, laid out
on the training thread and joined on the writer's."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file
from safetensors.numpy import save as safetensors_bytes

from rankscribe.collector import ArrayNetwork, CallbackParams, RunContext, SummaryCollector
from tests.collector.test_landscape import file_map, landscape_collector, run_steps

#: Every dtype a landscape file holds, in the order safetensors writes them (widest last).
DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "float16",
    "int32",
    "uint32",
    "float32",
    "complex64",
    "float64",
    "int64",
    "uint64",
]


def saved_files(directory: Path, parameters: dict[str, np.ndarray[Any, Any]]) -> dict[str, bytes]:
    """Save ``parameters`` as the landscape of steps 1-3 (step ``s`` adds ``s`` to each)."""
    network = ArrayNetwork({name: value.copy() for name, value in parameters.items()}, name="Net")
    item = landscape_collector(directory, [[1, 2, 3]])

    def set_parameters(step: int) -> None:
        for name, value in parameters.items():
            network[name][...] = value + np.asarray(step).astype(value.dtype)

    run_steps([item], network, [1, 2, 3], before=set_parameters)
    item.end(RunContext(CallbackParams(mode="train", train_network=network)))
    return {step: Path(path).read_bytes() for step, path in file_map(directory).items()}


def expected_bytes(parameters: dict[str, np.ndarray[Any, Any]], step: int) -> bytes:
    return bytes(
        safetensors_bytes(
            {
                name: np.asarray(value + np.asarray(step).astype(value.dtype), value.dtype)
                for name, value in parameters.items()
            }
        )
    )


def test_every_dtype_and_shape_is_written_as_safetensors_writes_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    shapes = [(3,), (2, 5), (), (0,), (4, 1, 2), (7,), (3, 3), (1,), (6,), (2,), (5,), (2, 2)]
    shapes.append((3,))
    parameters = {
        f"layer.{index}.{dtype}": (rng.standard_normal(shape) * 10).astype(dtype)
        for index, (dtype, shape) in enumerate(zip(DTYPES, shapes, strict=True))
    }
    parameters['b.name with spaces, "quotes" and ü'] = np.arange(4, dtype=np.float32)
    files = saved_files(tmp_path, parameters)
    assert sorted(files, key=int) == ["1", "2", "3"]
    for step, data in files.items():
        assert data == expected_bytes(parameters, int(step)), step
        loaded = load_file(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        assert sorted(loaded) == sorted(parameters)
        for name, value in parameters.items():
            np.testing.assert_array_equal(
                loaded[name], value + np.asarray(int(step)).astype(value.dtype)
            )
            assert loaded[name].dtype == value.dtype


def test_each_parameter_set_leaves_the_page_cache_once_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing reads the sets in training; their pages would hold memory the size of every
    # set (docs/collector-schedule.md, "The landscape budget").
    advised: list[str] = []
    real_fsync = os.fsync
    synced: set[str] = set()

    def fsync(descriptor: int) -> None:
        real_fsync(descriptor)
        synced.add(os.readlink(f"/proc/self/fd/{descriptor}"))

    def advise(descriptor: int, offset: int, length: int, advice: int) -> None:
        name = os.readlink(f"/proc/self/fd/{descriptor}")
        assert name in synced  # on disk first
        assert (offset, length, advice) == (0, 0, os.POSIX_FADV_DONTNEED)
        advised.append(name)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "posix_fadvise", advise, raising=False)
    parameters: dict[str, np.ndarray[Any, Any]] = {
        "w": np.arange(6, dtype=np.float32),
        "b": np.ones(2, np.float64),
    }
    files = saved_files(tmp_path, parameters)
    assert sorted(files, key=int) == ["1", "2", "3"]
    # One advice per set (their temporary names, renamed after), none for the metadata.
    assert len(advised) == 3
    assert all(Path(name).name.startswith(".Net_") for name in advised)
    for step, data in files.items():
        assert data == expected_bytes(parameters, int(step))


def _grown(before: int) -> int:
    """Bytes tracemalloc saw allocated beyond ``before`` at their peak (then the peak reset)."""
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    return peak - before


def _on_disk(path: Path) -> None:
    """Wait (at most 30 s) until ``path`` is on disk, then for the writer's last moments."""
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not written within 30 s"
        time.sleep(0.01)
    time.sleep(0.3)  # the written set's arrays are given back after its rename


def test_each_set_is_copied_into_memory_made_ready_for_it_and_none_is_kept_after(
    tmp_path: Path,
) -> None:
    # Two intervals of three sets, a budget of three: the later interval is saved (steps
    # 4-6). The first save call (step 1) decides; the writer thread then makes step 4's
    # arrays, and each set written gives its arrays to the next. A copy into new memory
    # costs the training thread up to 100 ms on a machine that hands out memory at first
    # touch (docs/collector-schedule.md, "The landscape budget").
    weights = np.zeros(1 << 20, np.float32)  # a 4 MiB set
    network = ArrayNetwork({"w": weights}, name="Net")
    set_bytes = weights.nbytes
    collector = SummaryCollector(
        tmp_path,
        collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3], [4, 5, 6]]}},
        landscape_budget=3 * set_bytes + 4096,
    )

    def step_to(step: int) -> None:
        weights[...] = step

    tracemalloc.start()
    try:
        run_steps([collector], network, [1, 2, 3], before=step_to)
        time.sleep(0.5)  # the writer thread makes the arrays of the first set saved
        ready = tracemalloc.get_traced_memory()[0]  # those arrays among it
        for step in (4, 5, 6):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            run_steps([collector], network, [step], before=step_to, begin=False)
            assert _grown(before) < set_bytes // 4, step  # no new arrays for the copy
            _on_disk(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        # After the last set nothing waits for a next one: a set's memory less than before.
        assert tracemalloc.get_traced_memory()[0] < ready - set_bytes // 2
        collector.end(RunContext(CallbackParams(mode="train", train_network=network)))
    finally:
        tracemalloc.stop()
    assert sorted(file_map(tmp_path), key=int) == ["4", "5", "6"]
    for step in (4, 5, 6):
        loaded = load_file(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        np.testing.assert_array_equal(loaded["w"], np.full(1 << 20, step, np.float32))


def test_nothing_is_kept_after_the_last_set_the_run_reaches(tmp_path: Path) -> None:
    # A run of 10 steps whose intervals go on to step 12: step 6 is its last set.
    weights = np.zeros(1 << 20, np.float32)
    network = ArrayNetwork({"w": weights}, name="Net")
    collector = SummaryCollector(
        tmp_path, collect_specified_data={"collect_landscape": {"intervals": [[4, 5, 6, 11, 12]]}}
    )
    tracemalloc.start()
    try:
        run_steps([collector], network, [1, 2, 3, 4, 5])
        _on_disk(tmp_path / "ckpt_dir" / "Net_5_step.ckpt")
        waiting = tracemalloc.get_traced_memory()[0]  # step 5's arrays wait for step 6
        run_steps([collector], network, [6], begin=False)
        _on_disk(tmp_path / "ckpt_dir" / "Net_6_step.ckpt")
        assert tracemalloc.get_traced_memory()[0] < waiting - weights.nbytes // 2
        collector.end(RunContext(CallbackParams(mode="train", train_network=network)))
    finally:
        tracemalloc.stop()
    assert sorted(file_map(tmp_path), key=int) == ["4", "5", "6"]


def test_a_set_whose_shapes_changed_is_copied_into_new_memory(tmp_path: Path) -> None:
    # The arrays a written set gives back fit a set of the same shapes and dtypes only.
    parameters: dict[str, np.ndarray[Any, Any]] = {"w": np.zeros((4, 256), np.float32)}
    network = ArrayNetwork(parameters, name="Net")
    collector = SummaryCollector(
        tmp_path, collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3]]}}
    )
    shapes = {1: (4, 256), 2: (4, 256), 3: (2, 8, 64)}
    for step in (1, 2, 3):
        network.parameters["w"] = np.full(shapes[step], step, np.float32)  # step 3: new shape
        run_steps([collector], network, [step], begin=step == 1)
        _on_disk(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
    collector.end(RunContext(CallbackParams(mode="train", train_network=network)))
    for step in (1, 2, 3):
        loaded = load_file(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        np.testing.assert_array_equal(loaded["w"], np.full(shapes[step], step, np.float32))


def test_a_big_endian_parameter_is_stored_little_endian(tmp_path: Path) -> None:
    parameters = {"w": np.arange(6, dtype=">f4").reshape(2, 3), "n": np.arange(3, dtype=">i8")}
    files = saved_files(tmp_path, parameters)
    for step, data in files.items():
        native = {
            name: value.astype(value.dtype.newbyteorder("=")) for name, value in parameters.items()
        }
        assert data == expected_bytes(native, int(step))


def test_a_dtype_the_format_cannot_hold_is_logged_naming_the_parameter(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "w": np.zeros(2, np.float32),
        "phase": np.zeros(2, np.complex128),
    }
    network = ArrayNetwork(arrays, name="Net")
    item = landscape_collector(tmp_path, [[1, 2, 3]])
    run_steps([item], network, [1, 2, 3])
    item.end(RunContext(CallbackParams(mode="train", train_network=network)))
    assert "Saving the landscape parameters of step 1 failed: parameter 'phase' has dtype " in (
        caplog.text
    )
    assert "complex128, which a landscape file cannot hold" in caplog.text
    assert not list((tmp_path / "ckpt_dir").glob("*.ckpt"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layers=st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.tuples(
            st.sampled_from(DTYPES),
            st.lists(st.integers(0, 4), max_size=3),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_set_of_parameters_is_written_as_safetensors_writes_it(
    tmp_path_factory: pytest.TempPathFactory, layers: dict[str, tuple[str, list[int]]]
) -> None:
    parameters = {
        name: np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        if dtype != "bool"
        else np.zeros(shape, dtype=bool)
        for name, (dtype, shape) in layers.items()
    }
    directory = tmp_path_factory.mktemp("landscape")
    for step, data in saved_files(directory, parameters).items():
        assert data == expected_bytes(parameters, int(step))
