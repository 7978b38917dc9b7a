"""Every rank's machine: the sampler's tags in a rank's files, its argument, and the evidence.

The accelerator is NVIDIA's NVML through ``pynvml``; here a stand-in with the
real API (``tools/fake_nvml.py``) is installed as ``pynvml``, which the sampler
imports when a run starts. A step waits (with a deadline) until the fake
device was read, so no test sleeps for the sampler's sake.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    Callback,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.collector.errors import CollectorValueError
from rankscribe.jobview import rank_dir_arrays, verdict_lines
from rankscribe.lineage import merge_run_dir

FAKE_NVML = Path(__file__).resolve().parents[2] / "tools" / "fake_nvml.py"
GPU = "rankscribe/system/gpu_"
THERMAL = 0x20 | 0x40  # SwThermalSlowdown | HwThermalSlowdown (nvml.h)
DEADLINE = 30.0


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_pynvml"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield module
    sys.modules.pop("fake_pynvml", None)


def train(summary_dir: Path, device: Any, *, steps: int = 12, work: float = 0.0) -> None:
    """A single-process run whose every step waits until the sampler read the device again."""
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(
        rng.random((steps, 4)).astype(np.float32), rng.integers(0, 2, steps), batch_size=1
    )
    collector = SummaryCollector(
        summary_dir,
        collect_freq=4,
        collect_specified_data={"collect_landscape": None},
        system_interval=0.01,
    )

    def step(batch: Any) -> float:
        with collector.section("compute"):
            reads = device.reads
            deadline = time.monotonic() + DEADLINE
            while device.reads == reads:  # a new sample: at most one interval away
                assert time.monotonic() < deadline, "the sampler never read the device"
                time.sleep(0.001)
            time.sleep(work)  # the work of this "rank" (a slow one works longer)
        return 0.5

    TrainLoop(step, network=network).train(1, data, callbacks=[collector])
    collector.close()


def test_the_gpu_readings_are_recorded_at_the_steps_they_were_taken(
    nvml: ModuleType, tmp_path: Path
) -> None:
    nvml.set_device(0, sm_clock_mhz=1410, reasons=THERMAL, power_mw=412_500, temperature=88)
    train(tmp_path, nvml.devices[0])
    columns = rank_dir_arrays(tmp_path)
    steps, clock = columns[GPU + "sm_clock_mhz"]
    assert len(steps) >= 10 and set(clock) == {1410.0}
    assert set(steps) <= set(range(14))  # the training's steps (0: before its first, 13: after)
    assert set(columns[GPU + "power_watts"][1]) == {412.5}  # NVML's milliwatts, as watts
    assert set(columns[GPU + "temperature_c"][1]) == {88.0}
    assert set(columns[GPU + "throttle_thermal"][1]) == {1.0}
    assert set(columns[GPU + "throttle_power"][1]) == {0.0}
    assert set(columns[GPU + "throttle_reasons"][1]) == {float(THERMAL)}
    assert set(columns[GPU + "utilization"][1]) == {80.0}
    # The process too, from psutil.
    assert min(columns["rankscribe/system/rss_bytes"][1]) > 10e6


def test_a_sample_between_the_last_step_and_the_end_joins_the_last_sample(
    nvml: ModuleType, tmp_path: Path
) -> None:
    """A sample the thread takes after the last step was written (before the epoch's end
    writes what is kept) is not written beyond the step after the last: the sample as
    training ends joins it there."""
    nvml.set_device(0, sm_clock_mhz=1410)
    device = nvml.devices[0]

    class SampledAfterTheLastStep(Callback):
        def step_end(self, run_context: RunContext) -> None:
            if run_context.original_args().cur_step_num == 12:
                reads = device.reads
                deadline = time.monotonic() + DEADLINE
                while device.reads == reads:
                    assert time.monotonic() < deadline, "the sampler never read the device"
                    time.sleep(0.001)

    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((12, 4)).astype(np.float32), rng.integers(0, 2, 12))
    collector = SummaryCollector(tmp_path, collect_freq=4, system_interval=0.01)
    TrainLoop(lambda batch: 0.5, network=network).train(
        1, data, callbacks=[collector, SampledAfterTheLastStep()]
    )
    collector.close()
    steps, clock = rank_dir_arrays(tmp_path)[GPU + "sm_clock_mhz"]
    assert steps[0] == 0 and steps[-1] == 13 and list(steps) == sorted(set(steps))
    assert set(clock) == {1410.0}


def test_a_throttled_rank_is_named_with_its_clock_and_throttling(
    nvml: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The two "ranks" are this process run twice, one sleeping longer: their process
    # readings (CPU shares, context switches) would compare the two runs of the test,
    # and outrank the GPU's. Only the device is sampled.
    monkeypatch.setattr("psutil.Process", _no_process)
    job = tmp_path / "job"
    # Rank 0 runs at full clock; rank 1 (the same device index on its own host) is hot.
    train(job / "rank_0", nvml.devices[0], work=0.001)
    nvml.set_device(0, sm_clock_mhz=1410, reasons=THERMAL, temperature=91)
    train(job / "rank_1", nvml.devices[0], work=0.02)
    outcome = merge_run_dir(job)
    assert outcome.job_view is not None
    verdicts = outcome.job_view.verdicts
    assert verdicts["job/straggler_rank"] == 1
    evidence = str(verdicts["job/straggler_evidence/1"])
    assert "thermal throttling in 100 % of the samples (others: 0 %)" in evidence
    assert "SM clock 1.41 GHz against a median of 1.98 GHz" in evidence
    assert f"evidence: rank 1: {evidence}" in verdict_lines(outcome.lineage.section("user_defined"))


def _no_process(*_: object) -> None:
    raise OSError("the process is not sampled in this test")


def test_an_nvml_error_turns_gpu_sampling_off_with_one_warning(
    nvml: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nvml.fail()
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((3, 4)).astype(np.float32), rng.integers(0, 2, 3), batch_size=1)
    collector = SummaryCollector(tmp_path, system_interval=0.01)
    TrainLoop(lambda batch: 0.5, network=network).train(1, data, callbacks=[collector])
    collector.close()
    warnings = [record for record in caplog.records if "NVML" in record.getMessage()]
    assert len(warnings) == 1 and "not sampled" in warnings[0].getMessage()
    assert not any(tag.startswith(GPU) for tag in rank_dir_arrays(tmp_path))


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "10", True])
def test_a_bad_system_interval_is_an_error_naming_it(value: object, tmp_path: Path) -> None:
    with pytest.raises(CollectorValueError, match=r"'system_interval'.*seconds >= 0"):
        SummaryCollector(tmp_path, system_interval=value)  # type: ignore[arg-type]


def test_a_bad_environment_variable_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSCRIBE_SYSTEM_INTERVAL", "often")
    with pytest.raises(CollectorValueError, match=r"RANKSCRIBE_SYSTEM_INTERVAL.*'often'"):
        SummaryCollector(tmp_path)


@pytest.mark.parametrize("value", [1e13, 86_400.5, 1e-9, 0.009, -0.0001, 10**400])
def test_a_system_interval_out_of_range_is_an_error_naming_the_range(
    value: object, tmp_path: Path
) -> None:
    with pytest.raises(CollectorValueError, match=r"'system_interval'.*from 0\.01 to 86400"):
        SummaryCollector(tmp_path, system_interval=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["1e13", "86401", "1e-9", "0.001", "-1", "inf"])
def test_an_environment_variable_out_of_range_is_an_error_naming_it_and_the_range(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSCRIBE_SYSTEM_INTERVAL", text)
    with pytest.raises(CollectorValueError) as raised:
        SummaryCollector(tmp_path)
    assert str(raised.value) == (
        "For the environment variable RANKSCRIBE_SYSTEM_INTERVAL, the value should be a finite "
        "number of seconds >= 0 (0 or 'off' turns the system sampling off; else from 0.01 to "
        f"86400), but got {text!r}."
    )


@pytest.mark.parametrize("text", ["0.01", "86400"])
def test_the_sampler_thread_lives_at_either_end_of_the_range(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a day the thread waits up to a day: a wait it cannot make would kill it at once."""
    monkeypatch.setenv("RANKSCRIBE_SYSTEM_INTERVAL", text)
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: failures.append(hook.exc_value))
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((3, 4)).astype(np.float32), rng.integers(0, 2, 3), batch_size=1)
    collector = SummaryCollector(tmp_path)
    sampling: list[bool] = []

    def step(batch: Any) -> float:
        sampling.append(any(t.name == "rankscribe-system" for t in threading.enumerate()))
        return 0.5

    TrainLoop(step, network=network).train(1, data, callbacks=[collector])
    collector.close()
    assert failures == []
    assert sampling == [True, True, True]


@pytest.mark.parametrize(("argument", "variable"), [(0, None), (None, "0"), (None, "off")])
def test_zero_or_off_samples_nothing(
    argument: float | None, variable: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if variable is not None:
        monkeypatch.setenv("RANKSCRIBE_SYSTEM_INTERVAL", variable)
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((3, 4)).astype(np.float32), rng.integers(0, 2, 3), batch_size=1)
    collector = SummaryCollector(tmp_path, system_interval=argument)
    TrainLoop(lambda batch: 0.5, network=network).train(1, data, callbacks=[collector])
    collector.close()
    tags = rank_dir_arrays(tmp_path)
    assert "rankscribe/step_time" in tags
    assert not any(tag.startswith("rankscribe/system/") for tag in tags)


def test_the_rank_samples_the_device_cuda_visible_devices_names(
    nvml: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVML numbers every device; CUDA_VISIBLE_DEVICES (here one UUID) says which is this rank's.
    nvml.set_device(1, sm_clock_mhz=1005)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-00000001")
    train(tmp_path / "uuid", nvml.devices[1], steps=3)
    assert set(rank_dir_arrays(tmp_path / "uuid")[GPU + "sm_clock_mhz"][1]) == {1005.0}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    train(tmp_path / "index", nvml.devices[1], steps=3)
    assert set(rank_dir_arrays(tmp_path / "index")[GPU + "sm_clock_mhz"][1]) == {1005.0}


@pytest.mark.parametrize("visible", ["", "-1"])
def test_no_visible_device_no_gpu_tags(
    nvml: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, visible: str
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((3, 4)).astype(np.float32), rng.integers(0, 2, 3), batch_size=1)
    collector = SummaryCollector(tmp_path, system_interval=0.01)
    TrainLoop(lambda batch: 0.5, network=network).train(1, data, callbacks=[collector])
    collector.close()
    assert not any(tag.startswith(GPU) for tag in rank_dir_arrays(tmp_path))
    assert nvml.devices[0].reads == 0


def test_a_gpu_lost_during_the_run_stops_gpu_sampling_with_one_warning(
    nvml: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    device = nvml.devices[0]
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((6, 4)).astype(np.float32), rng.integers(0, 2, 6), batch_size=1)
    collector = SummaryCollector(tmp_path, system_interval=0.01)
    process_tag = "rankscribe/system/threads"

    def step(batch: Any) -> float:
        deadline = time.monotonic() + DEADLINE
        if device.reads >= 2:
            nvml.fail()  # the GPU is lost: the next read raises NVMLError
            while not any("stops" in record.getMessage() for record in caplog.records):
                assert time.monotonic() < deadline, "the sampler never met the error"
                time.sleep(0.001)
        while device.reads < 2:
            assert time.monotonic() < deadline, "the sampler never read the device"
            time.sleep(0.001)
        return 0.5

    TrainLoop(step, network=network).train(1, data, callbacks=[collector])
    collector.close()
    stops = [record for record in caplog.records if "GPU sampling stops" in record.getMessage()]
    assert len(stops) == 1
    columns = rank_dir_arrays(tmp_path)
    assert len(columns[GPU + "sm_clock_mhz"][0]) >= 1  # the samples before the loss stay
    assert process_tag in columns  # the process is still sampled


def test_a_run_shorter_than_the_interval_is_sampled_as_it_starts_and_ends(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(rng.random((3, 4)).astype(np.float32), rng.integers(0, 2, 3), batch_size=1)
    collector = SummaryCollector(tmp_path, system_interval=3600)  # no tick of the grid falls in

    def step(batch: Any) -> float:
        time.sleep(0.05)  # three steps span more than the shortest span of a share (0.1 s)
        return 0.5

    TrainLoop(step, network=network).train(1, data, callbacks=[collector])
    collector.close()
    tags = rank_dir_arrays(tmp_path)
    steps, rss = tags["rankscribe/system/rss_bytes"]
    assert list(steps) == [0, 4] and min(rss) > 10e6  # before the first step, after the last
    # A share "since the last sample" needs one before it: the last sample only.
    assert list(tags["rankscribe/system/cpu_percent"][0]) == [4]


def sampled_run(
    summary_dir: Path, *, steps: int, step_seconds: float, interval: float
) -> tuple[dict[str, Any], float]:
    """A run of ``steps`` steps that sleep ``step_seconds`` (the sampler's thread takes the
    interpreter on time meanwhile), sampled every ``interval``: its tags, and the seconds
    its training took (the sampler runs from its start to its end, not while closing)."""
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(4, 2)).astype(np.float32)}, name="Linear")
    data = ArrayDataset(
        rng.random((steps, 4)).astype(np.float32), rng.integers(0, 2, steps), batch_size=1
    )
    collector = SummaryCollector(
        summary_dir, collect_specified_data={"collect_landscape": None}, system_interval=interval
    )

    def step(batch: Any) -> float:
        time.sleep(step_seconds)
        return 0.5

    started = time.monotonic()
    TrainLoop(step, network=network).train(1, data, callbacks=[collector])
    seconds = time.monotonic() - started
    collector.close()
    return rank_dir_arrays(summary_dir), seconds


def test_a_share_is_read_over_a_tenth_of_a_second_at_least(tmp_path: Path) -> None:
    """Over a few ms the kernel's 10 ms ticks made a steady process read 0 % or hundreds."""
    tags, seconds = sampled_run(tmp_path, steps=60, step_seconds=0.01, interval=0.03)
    sampled = len(tags["rankscribe/system/rss_bytes"][0])
    share_steps, shares = tags["rankscribe/system/cpu_percent"]
    # Every share spans 0.1 s or more of the run, and none overlaps another.
    assert 2 <= len(share_steps) <= seconds / 0.1, (len(share_steps), seconds)
    assert len(share_steps) < sampled / 2  # samples 30 ms apart: most carry no share
    assert np.all((shares >= 0) & (shares <= 100 * (os.cpu_count() or 1))), shares


def test_a_share_taken_within_a_step_is_kept_with_the_steps_last_sample(tmp_path: Path) -> None:
    """Samples every 10 ms, steps of 50 ms: the step keeps its last sample, and the shares
    one of its earlier samples read (every 0.1 s or so), which the last one lacks."""
    tags, seconds = sampled_run(tmp_path, steps=30, step_seconds=0.05, interval=0.01)
    share_steps = tags["rankscribe/system/cpu_percent"][0]
    # A share every 0.1 s of the 1.5 s or so; when only the step's last sample was kept,
    # the share of an earlier one was lost nearly every time.
    assert len(share_steps) >= seconds / 0.1 / 2, (len(share_steps), seconds)
    assert np.all(np.diff(share_steps) > 0)
