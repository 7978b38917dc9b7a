"""Values read from an accelerator: no wait on the training thread, each at its own step.

A model on the fake device of ``tests/_support/fake_device.py`` (CPU tensors torch
computes on at once; copies to the host land only when their event passes, two steps
later; every wait made on the training thread counted) trains through ``TrainSession``
with the collector at collected steps. The same training on plain CPU tensors is the
reference: the loss and histograms recorded through the fake device must be the CPU
run's, at the same steps; the fingerprints follow the device rule
(docs/job-view.md, "Fingerprints within a budget") over the parameters as they were at
their step.
"""

from __future__ import annotations

import io
import time
from contextlib import nullcontext
from pathlib import Path

import crc32c
import numpy as np
import pytest
import torch
from torch import nn

from rankscribe.collector import Progress, SummaryCollector, TrainSession
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.collector.testing import device_backend
from rankscribe.jobview.feed import FINGERPRINT_TAG
from rankscribe.ranks import RankInfo
from rankscribe.writer import histogram_summary, scalar_summary, tensor_summary
from rankscribe.writer.events import Histogram, load_dir
from rankscribe.writer.reader import scalars
from tests._support.fake_device import FakeDevice

STEPS = 23
COLLECT_FREQ = 5
LOSS_TAG = "loss/auto"
ALONE = RankInfo(rank=0, world_size=1, local_rank=0, local_size=1, host="h", launcher="single")


def weighted_sum(data: bytes) -> int:
    """The device fingerprint's sum of a whole part, in Python integers modulo 2**64."""
    step, base, total = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0
    for index, byte in enumerate(data):
        total = (total + byte * (((index * step + base) % 2**64) | 1)) % 2**64
    return total - 2**64 if total >= 2**63 else total


def device_fingerprint(parameters: list[bytes]) -> float:
    """docs/job-view.md's rule for parts on a device (the model is under the budget)."""
    crc = 0
    for raw in parameters:
        crc = crc32c.crc32c(weighted_sum(raw).to_bytes(8, "little", signed=True), value=crc)
    return float(crc & 0xFFFFFF)


def model(device: FakeDevice | None) -> nn.Module:
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    if device is not None:
        for layer in (network[0], network[2]):
            assert isinstance(layer, nn.Linear)
            layer.weight = nn.Parameter(device.tensor(layer.weight.detach()))
            layer.bias = nn.Parameter(device.tensor(layer.bias.detach()))
    return network


def train(
    directory: Path, device: FakeDevice | None, pause: float = 0.0
) -> dict[int, tuple[float, list[bytes]]]:
    """Train, and return each step's exact loss and parameter bytes (read uncounted);
    ``pause``: seconds each step lasts more (the writer's thread gets to its work)."""
    network = model(device)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(4, 6, generator=generator), torch.randn(4, 1, generator=generator))
        for _ in range(STEPS)
    ]
    exact: dict[int, tuple[float, list[bytes]]] = {}
    collector = SummaryCollector(
        directory,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None, "histogram_regular": ".*"},
        system_interval=0,
    )
    with TrainSession([collector], network=network, optimizer=optimizer, epochs=1) as session:
        for _ in session.epochs():
            for step, (inputs, targets) in enumerate(batches, start=1):
                if device is not None:
                    device.tick()
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(network(inputs), targets)
                loss.backward()
                optimizer.step()
                with device.uncounted() if device is not None else nullcontext():
                    raw = [
                        value.detach().as_subclass(torch.Tensor).numpy().tobytes()
                        for value in network.parameters()
                    ]
                    exact[step] = (float(loss.detach()), raw)
                session.step((inputs, targets), loss.detach())
                time.sleep(pause)
            if device is not None:
                # The end of training may wait (the lineage reads the last loss): no step.
                device.counting = False
    return exact


def rank_scalars(directory: Path) -> dict[str, dict[int, float]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return {tag: dict(points) for tag, points in scalars(path).items()}


def histograms(directory: Path) -> dict[tuple[str, int | None], Histogram]:
    return {
        (value.tag, event.step): value.value
        for event in load_dir(directory)
        for value in getattr(event, "values", ())
        if isinstance(value.value, Histogram)
    }


def test_values_read_from_a_device_wait_for_nothing_and_land_at_their_step(
    tmp_path: Path,
) -> None:
    reference = train(tmp_path / "cpu", None)
    device = FakeDevice(lag=2)
    with device.installed(), device_backend(device):
        exact = train(tmp_path / "device", device)
    # Nothing the collector did on the training thread waited for the device, nor
    # behind another thread's wait for it...
    assert device.waits == []
    assert device.stalls == 0
    # ...and it did read through it: the loss and fingerprint sums of each collected
    # step, and step 0's fingerprint, were copies that landed only when their event passed.
    expected_cpu = rank_scalars(tmp_path / "cpu")
    collected = sorted(expected_cpu[LOSS_TAG])
    assert collected[:3] == [1, 5, 10]
    assert device.copies_started == 2 * len(collected) + 1
    assert device.copies_done == device.copies_started
    found = rank_scalars(tmp_path / "device")
    # The loss of each collected step is the CPU run's, at the same step.
    assert found[LOSS_TAG] == expected_cpu[LOSS_TAG]
    assert found[LOSS_TAG] == {step: pytest.approx(exact[step][0], abs=0) for step in collected}
    assert exact == reference  # the fake device computes what the CPU computes
    # The fingerprints: the device rule over the parameters as they were at their step.
    start = [value.detach().numpy().tobytes() for value in model(None).parameters()]
    expected_prints = {0: device_fingerprint(start)}
    expected_prints.update({step: device_fingerprint(exact[step][1]) for step in collected})
    assert found[FINGERPRINT_TAG] == expected_prints
    assert len(set(expected_prints.values())) == len(expected_prints)  # each step moved them
    # The histograms: the host's buckets of the same values, at the same steps.
    on_host, on_device = histograms(tmp_path / "cpu"), histograms(tmp_path / "device")
    assert sorted(on_device) == sorted(on_host)
    assert {step for _, step in on_host} == set(collected)
    for key, want in on_host.items():
        got = on_device[key]
        assert got.buckets == want.buckets, key
        assert (got.count, got.min, got.max) == (want.count, want.min, want.max), key
        assert got.sum == pytest.approx(want.sum, rel=1e-9, abs=1e-12), key


def test_the_training_thread_never_waits_behind_the_writers_wait_for_a_device_far_behind(
    tmp_path: Path,
) -> None:
    # A device 8 steps behind, 5 steps between collected steps: when the next collected
    # step comes, the writer's thread is still waiting for the last one's loss and
    # fingerprint. The training thread must see them as not arrived yet; it once saw
    # them as arrived as soon as the writer began to wait, and waited behind that wait
    # for the device's whole queue at every collected step (on a GPU: 55 ms a step).
    device = FakeDevice(lag=8)
    with device.installed(), device_backend(device):
        exact = train(tmp_path, device, pause=0.05)
    assert device.waits == []
    assert device.stalls == 0
    found = rank_scalars(tmp_path)
    collected = [1, 5, 10, 15, 20]
    assert found[LOSS_TAG] == {step: pytest.approx(exact[step][0], abs=0) for step in collected}
    assert sorted(found[FINGERPRINT_TAG]) == [0, *collected]


def test_the_fake_device_counts_a_read_on_the_training_thread() -> None:
    # The oracle of the test above: the reads a collector must not make are counted.
    device = FakeDevice()
    with device.installed():
        value = device.tensor(torch.tensor([1.5, 2.5]))
        float(value[0])
        value.tolist()
        value.to("cpu")
        value.to(torch.float64)  # stays on the device: no wait
        host, event = device.start_copy(value)
        assert torch.isnan(host).all() and not event.query()  # nothing landed yet
        event.synchronize()
        assert host.tolist() == [1.5, 2.5]
    assert device.waits == ["__float__", "tolist", "to", "event.synchronize"]


def test_a_backend_without_the_methods_is_refused() -> None:
    refused = pytest.raises(CollectorTypeError, match=r"'backend' must have the methods .* lacks")
    with refused, device_backend(object()):
        pass


def test_progress_shows_a_device_loss_without_waiting_and_the_last_one_at_the_end() -> None:
    device = FakeDevice(lag=2)
    stream = io.StringIO()
    progress = Progress(every_steps=1, every_seconds=None, stream=stream, rank_info=ALONE)
    training = TrainSession([progress], epochs=1, steps_per_epoch=6)
    with device.installed(), device_backend(device), training as session:
        for _ in session.epochs():
            for step in range(1, 7):
                device.tick()
                session.step(None, device.tensor(torch.tensor(1.0 / step)))
            device.counting = False  # the end of training may wait: no step
    assert device.waits == []
    shown = [line.split("loss ")[1].split()[0] for line in stream.getvalue().splitlines()[:-1]]
    # Each step's line shows the latest loss the device has passed (two steps behind,
    # one copy under way at a time), and the end of training shows the last step's own.
    assert shown == ["-", "-", "1.0000", "1.0000", "0.3333", "0.3333", "0.1667"]


def test_summary_operators_read_a_device_value_without_waiting_and_record_it_at_its_step(
    tmp_path: Path,
) -> None:
    """A script's tensor_summary, histogram_summary and scalar_summary of tensors on the
    device at every step: nothing on the training thread waits for the device (each
    value's copy to the host is started at the steps that record its kind, and read by
    the writer's thread), and the files hold what a run on the CPU holds, step for step."""

    def run(directory: Path, device: FakeDevice | None) -> None:
        collector = SummaryCollector(
            directory,
            collect_freq=COLLECT_FREQ,
            collect_tensor_freq=4,
            collect_specified_data={"collect_landscape": None, "histogram_regular": "^$"},
            fingerprints=False,
            system_interval=0,
            cost_budget="off",
        )
        with TrainSession([collector], epochs=1, steps_per_epoch=STEPS) as session:
            for _ in session.epochs():
                for step in range(1, STEPS + 1):
                    if device is not None:
                        device.tick()
                    values = torch.arange(6, dtype=torch.float32).reshape(2, 3) * step
                    if device is not None:
                        values = device.tensor(values)
                    tensor_summary("activations", values)
                    # bfloat16, which NumPy lacks: as float32 (exact) on either path
                    tensor_summary("activations_bfloat16", values.to(torch.bfloat16))
                    histogram_summary("activations_histogram", values)
                    scalar_summary("activation_peak", values.amax())
                    session.step(None, 1.0 / step)
                if device is not None:
                    device.counting = False

    run(tmp_path / "cpu", None)
    device = FakeDevice(lag=2)
    with device.installed(), device_backend(device):
        run(tmp_path / "device", device)
    assert device.waits == []
    assert device.stalls == 0
    # the tensors at this rank's tensor steps, the others at the collected steps: 6 x 2 + 5 x 2
    assert device.copies_started == 22
    assert device.copies_done == device.copies_started

    def written(directory: Path) -> dict[tuple[str, int | None], object]:
        return {
            (value.tag, event.step): value.value
            for event in load_dir(directory)
            for value in getattr(event, "values", ())
            if value.tag.startswith("activation")
        }

    on_host, on_device = written(tmp_path / "cpu"), written(tmp_path / "device")
    for tag in ("activations", "activations_bfloat16"):
        assert sorted(key for key in on_host if key[0] == tag) == [
            (tag, step) for step in (1, 4, 8, 12, 16, 20)
        ]
    assert sorted(on_device, key=str) == sorted(on_host, key=str)
    for key, want in on_host.items():
        got = on_device[key]
        if isinstance(want, Histogram):
            assert isinstance(got, Histogram)
            assert (got.buckets, got.count, got.min, got.max) == (
                want.buckets,
                want.count,
                want.min,
                want.max,
            ), key
        elif isinstance(want, float):
            assert got == want, key
        else:
            np.testing.assert_array_equal(got, want)
