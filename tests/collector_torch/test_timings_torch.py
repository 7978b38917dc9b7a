"""The forward time of a torch network, the device fingerprint and the device histograms,
on CPU tensors.

The accelerator paths run here through the same torch code: timing events
are a fake device-event class (what ``torch.Event`` offers: ``record``,
``query``, ``elapsed_time``, ``synchronize``) whose events the "device"
passes only one query later, and the device fingerprint and histograms are
forced on CPU tensors (``FINGERPRINT_CPU_ON_DEVICE``, ``HISTOGRAM_CPU_ON_DEVICE``).
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import pickle
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest
import torch
from torch import nn

# private: the torch adapter's forward timer and device paths, no public door
import rankscribe.collector.adapters._torch as torch_adapter
from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.jobview.feed import FINGERPRINT_TAG, FORWARD_TIME_TAG, STEP_TIME_TAG
from rankscribe.writer.events import Histogram, load_dir
from rankscribe.writer.reader import scalars
from tests._support.clocks import ManualClock

NO_LANDSCAPE = {"collect_landscape": None}
SLEEP = 0.005
STEPS = 6


class SlowNet(nn.Module):
    """A linear layer whose forward takes ``seconds`` of the collector's clock."""

    def __init__(self, clock: ManualClock, seconds: float = SLEEP) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.clock = clock
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(self.seconds)
        return self.fc(x)


def rank_scalars(directory: Path) -> dict[str, dict[int, float]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return {tag: dict(points) for tag, points in scalars(path).items()}


def train(directory: Path, network: nn.Module, *, forwards: int = 1, collect_freq: int = 3) -> None:
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    batches = [(torch.rand(2, 4), torch.tensor([0, 1])) for _ in range(STEPS)]

    def step(batch: Any) -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.stack(
            [nn.functional.cross_entropy(network(batch[0]), batch[1]) for _ in range(forwards)]
        ).sum()
        loss.backward()
        optimizer.step()
        return loss

    collector = SummaryCollector(
        directory, collect_freq=collect_freq, collect_specified_data=NO_LANDSCAPE
    )
    TrainLoop(step, network=network, optimizer=optimizer).train(1, batches, callbacks=[collector])


def test_the_forward_time_of_every_step_is_timed_around_the_modules_forward(
    tmp_path: Path, collector_clock: ManualClock
) -> None:
    network = SlowNet(collector_clock)
    train(tmp_path, network, forwards=2)
    found = rank_scalars(tmp_path)
    forward = found[FORWARD_TIME_TAG]
    assert sorted(forward) == list(range(1, STEPS + 1))
    # two forward calls per step add up; the step holds them
    assert forward == {step: pytest.approx(2 * SLEEP) for step in forward}
    assert found[STEP_TIME_TAG] == {step: pytest.approx(2 * SLEEP) for step in forward}
    # once training ends the user's module is left as it was: no hooks, its own forward
    assert not network._forward_pre_hooks and not network._forward_hooks
    assert "forward" not in vars(network)


def test_a_copy_of_the_network_made_in_training_computes_with_its_own_weights_untimed(
    tmp_path: Path, collector_clock: ManualClock
) -> None:
    # An EMA or swa_utils.AveragedModel deep-copies the network while it is timed.
    network = SlowNet(collector_clock)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    batches = [(torch.rand(2, 4), torch.tensor([0, 1])) for _ in range(STEPS)]
    averaged: list[SlowNet] = []

    def step(batch: Any) -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(network(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        if not averaged:
            averaged.append(copy.deepcopy(network))
            with torch.no_grad():
                averaged[0].fc.weight.zero_()
        # The copy's own clock is a copy too: its forward moves the collector's clock
        # only if it ran the original's forward.
        out = averaged[0](batch[0])
        assert torch.equal(out, averaged[0].fc.bias.detach().expand(2, 2))
        return loss

    collector = SummaryCollector(tmp_path, collect_freq=3, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(step, network=network, optimizer=optimizer).train(1, batches, callbacks=[collector])
    forward = rank_scalars(tmp_path)[FORWARD_TIME_TAG]
    assert forward == {step: pytest.approx(SLEEP) for step in range(1, STEPS + 1)}


def test_a_timed_module_pickles_as_itself_and_its_copy_is_not_timed(
    collector_clock: ManualClock,
) -> None:
    module = SlowNet(collector_clock)
    timer = torch_adapter.ForwardTimer(module)
    data = pickle.dumps(module)
    assert b"rankscribe" not in data  # loading the file needs no RankScribe
    loaded = pickle.loads(data)
    x = torch.rand(3, 4)
    torch.testing.assert_close(loaded(x), module(x))
    with torch.no_grad():
        loaded.fc.weight.zero_()
    assert torch.equal(loaded(x), loaded.fc.bias.detach().expand(3, 2))  # its own weights
    # Three calls, one of them the original's: the copies moved their own clocks.
    [(taken, seconds)] = timer.take(1)
    assert taken == 1 and seconds == pytest.approx(SLEEP)
    timer.remove()


def test_the_forward_reads_as_the_modules_own_and_one_set_over_it_stays(
    collector_clock: ManualClock,
) -> None:
    module = SlowNet(collector_clock)
    signature = inspect.signature(module.forward)
    timer = torch_adapter.ForwardTimer(module)
    # what the HF Trainer picks its columns by, and what a library's wrapper reads
    assert inspect.signature(module.forward) == signature
    assert module.forward.__name__ == "forward"
    assert not hasattr(module.forward, "__func__")
    # a library wraps the forward after the timer (as accelerate's mixed precision does)
    timed = module.forward
    module.forward = lambda x: 2 * timed(x)  # type: ignore[method-assign]
    x = torch.rand(1, 4)
    doubled = 2 * module.fc(x)
    torch.testing.assert_close(module(x), doubled)
    [(taken, seconds)] = timer.take(1)
    assert taken == 1 and seconds == pytest.approx(SLEEP)
    timer.remove()
    torch.testing.assert_close(module(x), doubled)  # theirs stays and still works
    assert timer.take(2) == []


def test_a_forward_the_module_had_of_its_own_is_put_back(collector_clock: ManualClock) -> None:
    module = SlowNet(collector_clock)
    own = module.forward
    # an instance forward (accelerate's, a compiled one) before the run
    module.forward = own  # type: ignore[method-assign]
    timer = torch_adapter.ForwardTimer(module)
    module(torch.rand(1, 4))
    [(taken, seconds)] = timer.take(1)
    assert taken == 1 and seconds == pytest.approx(SLEEP)
    timer.remove()
    assert vars(module)["forward"] is own


@pytest.mark.parametrize("first_removed", [0, 1])
@pytest.mark.parametrize("had_own", [False, True])
def test_two_timers_on_one_module_both_time_it_and_leave_it_as_it_was(
    collector_clock: ManualClock, first_removed: int, had_own: bool
) -> None:
    # Two collectors on one network (each run's timer), ended in either order.
    module = SlowNet(collector_clock)
    own = module.forward
    if had_own:
        module.forward = own  # type: ignore[method-assign]
    timers = [torch_adapter.ForwardTimer(module), torch_adapter.ForwardTimer(module)]
    x = torch.rand(1, 4)
    expected = module.fc(x)
    torch.testing.assert_close(module(x), expected)
    for timer in timers:
        [(taken, seconds)] = timer.take(1)
        assert taken == 1 and seconds == pytest.approx(SLEEP)
    timers[first_removed].remove()
    torch.testing.assert_close(module(x), expected)
    assert timers[first_removed].take(2) == []
    [(taken, seconds)] = timers[1 - first_removed].take(2)
    assert taken == 2 and seconds == pytest.approx(SLEEP)
    timers[1 - first_removed].remove()
    torch.testing.assert_close(module(x), expected)
    if had_own:
        assert vars(module)["forward"] is own
    else:
        assert "forward" not in vars(module)


def test_hooks_time_a_module_that_a_data_parallel_could_replicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_clock: ManualClock
) -> None:
    inner = SlowNet(collector_clock)
    parallel = nn.DataParallel(inner)  # on the CPU it calls the module it holds
    assert torch_adapter.keeps_hooks(parallel)
    compiled = nn.Module()  # what torch.compile returns holds the module as _orig_mod
    compiled._orig_mod = SlowNet(collector_clock)
    assert torch_adapter.keeps_hooks(compiled)
    assert not torch_adapter.keeps_hooks(inner)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert torch_adapter.keeps_hooks(inner)  # a DataParallel may still be made of it
    monkeypatch.undo()
    seen: list[bool] = []
    optimizer = torch.optim.SGD(parallel.parameters(), lr=0.1)

    def step(batch: Any) -> torch.Tensor:
        seen.append("forward" in vars(inner) or bool(inner._forward_pre_hooks))
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(parallel(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        assert "forward" not in vars(inner) and inner._forward_pre_hooks
        return loss

    batches = [(torch.rand(2, 4), torch.tensor([0, 1])) for _ in range(STEPS)]
    collector = SummaryCollector(tmp_path, collect_freq=3, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(step, network=parallel, optimizer=optimizer).train(1, batches, callbacks=[collector])
    assert all(seen)
    forward = rank_scalars(tmp_path)[FORWARD_TIME_TAG]
    assert forward == {step: pytest.approx(SLEEP) for step in range(1, STEPS + 1)}
    assert not inner._forward_pre_hooks and not inner._forward_hooks


def test_the_timer_files_logged_calls_by_the_step_they_ended_in(
    collector_clock: ManualClock,
) -> None:
    clock = collector_clock
    network = SlowNet(clock, 0.0)
    timer = torch_adapter.ForwardTimer(network)
    x = torch.rand(1, 4)
    try:
        # Steps 5, 6, 7 end at 1.0, 2.0, 3.0: two calls in step 5, none in 6, one in 7,
        # and one call after the last end, which stays for the next take.
        for at, seconds in ((0.2, 0.1), (0.5, 0.2), (2.5, 0.3), (3.5, 0.4)):
            clock.seconds = at
            network.seconds = seconds
            network(x)
        steps, spent = timer.take_logged(5, [1.0, 2.0, 3.0])
        assert list(steps) == [5, 7]
        assert list(spent) == pytest.approx([0.1 + 0.2, 0.3])
        [(step, seconds)] = timer.take(8)
        assert step == 8 and seconds == pytest.approx(0.4)
        # One call a step, each in its own: the common case reads the same way.
        for at in (10.0, 11.0, 12.0):
            clock.seconds = at
            network(x)
        steps, spent = timer.take_logged(9, [10.5, 11.5, 12.5])
        assert list(steps) == [9, 10, 11]
        assert list(spent) == pytest.approx([0.4, 0.4, 0.4])
        assert timer.take(12) == []
    finally:
        timer.remove()


class FakeDevice:
    """Timing events a device passes one query after they were recorded."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.synchronized = 0
        self.made = 0
        self.recorded = 0  # events recorded so far
        self.passed = 0  # the last of them the device has passed

    def event(self) -> FakeEvent:
        self.made += 1
        return FakeEvent(self)


class FakeEvent:
    """A timing event of :class:`FakeDevice`, which passes its events in the order they
    were recorded: an event passes at its second query, or when a later one has passed
    (or been waited for)."""

    def __init__(self, device: FakeDevice) -> None:
        self.device = device
        self.at: float | None = None
        self.queried = 0
        self.place = 0  # in the stream: its record's number

    def record(self) -> None:
        self.at = self.device.clock()
        self.queried = 0  # recorded again: passed once the device gets there again
        self.device.recorded += 1
        self.place = self.device.recorded

    def query(self) -> bool:
        self.queried += 1
        if self.queried > 1:
            self.device.passed = max(self.device.passed, self.place)
        return self.place <= self.device.passed

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        # A device's events have no time until it has passed them (torch raises).
        assert end.place <= self.device.passed, "read before the device passed it"
        return (end.at - self.at) * 1000.0  # milliseconds, as torch.Event gives it

    def synchronize(self) -> None:
        self.device.synchronized += 1
        self.device.passed = max(self.device.passed, self.place)


def test_device_events_are_read_a_step_later_without_a_synchronise(
    collector_clock: ManualClock,
) -> None:
    device = FakeDevice(collector_clock)
    module = SlowNet(collector_clock)
    timer = torch_adapter.ForwardTimer(module, event_factory=device.event)
    assert timer.on_device
    module(torch.rand(1, 4))
    assert timer.take(1) == []  # the device has not passed step 1's events yet
    module(torch.rand(1, 4))
    module(torch.rand(1, 4))
    [(step, seconds)] = timer.take(2)
    assert step == 1 and seconds == pytest.approx(SLEEP)
    assert device.synchronized == 0
    [(step, seconds)] = timer.finish()  # the end of training: one wait, for the last step
    assert step == 2 and seconds == pytest.approx(2 * SLEEP)
    assert device.synchronized == 1
    timer.remove()
    assert not module._forward_pre_hooks and not module._forward_hooks


def test_the_collector_files_late_device_forward_times_under_their_own_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_clock: ManualClock
) -> None:
    device = FakeDevice(collector_clock)
    monkeypatch.setattr(torch_adapter, "_device_events", lambda module: device.event)
    train(tmp_path, SlowNet(collector_clock))
    forward = rank_scalars(tmp_path)[FORWARD_TIME_TAG]
    assert sorted(forward) == list(range(1, STEPS + 1))
    assert forward == {step: pytest.approx(SLEEP) for step in forward}
    # Events whose times were read are recorded again: two steps' pairs at most (the
    # device passes an event at its second query), not two new events a step.
    assert device.made == 4
    assert device.synchronized == 1  # at the end of training only, never per step


def test_device_events_are_recorded_again_once_read_and_each_step_keeps_its_time(
    collector_clock: ManualClock,
) -> None:
    """40 steps whose forwards take 1 to 40 ms, two forward calls in every third: each
    step's time from its own events, though the events are the same few recorded again."""
    device = FakeDevice(collector_clock)
    module = SlowNet(collector_clock)
    timer = torch_adapter.ForwardTimer(module, event_factory=device.event)
    found = []
    for step in range(1, 41):
        module.seconds = step / 1000
        for _ in range(2 if step % 3 == 0 else 1):
            module(torch.rand(1, 4))
        found += timer.take(step)
    found += timer.finish()
    assert [step for step, _ in found] == list(range(1, 41))
    assert [seconds for _, seconds in found] == pytest.approx(
        [step / 1000 * (2 if step % 3 == 0 else 1) for step in range(1, 41)]
    )
    assert device.made <= 8  # two steps' events in flight, two pairs in a step at most
    assert device.synchronized == 1


def _weighted_sum(data: bytes, start: int) -> int:
    """The device fingerprint's sum, computed in Python integers modulo 2**64."""
    step = 0x9E3779B97F4A7C15
    base = 0xBF58476D1CE4E5B9
    total = 0
    for index, byte in enumerate(data):
        weight = (((start + index) * step + base) % 2**64) | 1
        total = (total + byte * weight) % 2**64
    return total - 2**64 if total >= 2**63 else total


def test_the_device_fingerprint_is_the_documented_weighted_sum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch_adapter, "_DEVICE_CHUNK", 64)  # several chunks per tensor
    tensor = torch.arange(100, dtype=torch.float32)
    part = torch_adapter.TorchDevicePart(tensor)
    assert part.nbytes == 400
    raw = tensor.numpy().tobytes()
    [digest] = type(part.digest(10, 390)).resolve([part.digest(10, 390)])
    assert int.from_bytes(digest, "little", signed=True) == _weighted_sum(raw[10:390], 10)


def device_sums(parts: list[Any]) -> list[int]:
    """Each device part's whole-part sum, resolved as the collector resolves them."""
    digests = [part.digest(0, part.nbytes) for part in parts]
    return [int.from_bytes(raw, "little", signed=True) for raw in type(digests[0]).resolve(digests)]


def documented_fingerprint(network: nn.Module) -> int:
    """docs/job-view.md's rule for parts on a device: each parameter's bytes reduced to the
    weighted sum (8 bytes, little-endian), CRC-32C over those in order, its low 24 bits."""
    crc = 0
    for _, value in network.named_parameters():
        raw = value.detach().reshape(-1).view(torch.uint8).numpy().tobytes()
        crc = crc32c.crc32c(_weighted_sum(raw, 0).to_bytes(8, "little", signed=True), value=crc)
    return crc & 0xFFFFFF


def test_the_device_fingerprint_tells_one_changed_byte_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch_adapter, "FINGERPRINT_CPU_ON_DEVICE", True)
    torch.manual_seed(0)
    first = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
    second = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
    second.load_state_dict(first.state_dict())
    adapter = torch_adapter.create_adapter()
    parts = [
        torch_adapter.TorchNetwork(model, adapter).fingerprint_parts() for model in (first, second)
    ]
    assert all(isinstance(part, torch_adapter.TorchDevicePart) for part in parts[0])
    before = device_sums(parts[0])
    assert device_sums(parts[1]) == before
    with torch.no_grad():
        layer = second[1]
        assert isinstance(layer, nn.Linear)
        raw = layer.bias.view(torch.uint8)
        raw[3] ^= 1  # one bit of one byte
    after = device_sums(parts[1])
    # the parts are weight, bias, weight, bias: only the last one's sum moved
    assert [a == b for a, b in zip(before, after, strict=True)] == [True, True, True, False]


def test_the_collector_records_device_fingerprints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_clock: ManualClock
) -> None:
    monkeypatch.setattr(torch_adapter, "FINGERPRINT_CPU_ON_DEVICE", True)
    torch.manual_seed(0)
    network = SlowNet(collector_clock, seconds=0.0)
    train(tmp_path, network)
    prints = rank_scalars(tmp_path)[FINGERPRINT_TAG]
    assert sorted(prints) == [0, 1, 3, 6]
    assert len(set(prints.values())) == 4  # the parameters changed at every step
    assert all(0 <= value < 2**24 and float(value).is_integer() for value in prints.values())
    assert prints[6] == documented_fingerprint(network)  # the last step: as it is now


def test_cpu_tensors_are_hashed_in_place() -> None:
    network = nn.Linear(3, 2)
    parts = torch_adapter.TorchNetwork(network, torch_adapter.create_adapter()).fingerprint_parts()
    raw = b"".join(value.detach().numpy().tobytes() for _, value in network.named_parameters())
    # The bytes themselves go to the CRC (its rule: tests/collector/test_timings.py).
    assert b"".join(bytes(part.digest(0, part.nbytes)) for part in parts) == raw
    assert bytes(parts[0].digest(5, 21)) == raw[5:21]
    assert np.shares_memory(
        np.frombuffer(parts[0].digest(0, 4), np.uint8),
        network.weight.detach().numpy().view(np.uint8),
    )


class Weights(nn.Module):
    """Parameters of chosen contents, for histograms (the loss touches every one)."""

    def __init__(self, values: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.names = list(values)
        for name, value in values.items():
            self.register_parameter(name, nn.Parameter(value))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x.sum()
        for name in self.names:
            total = total + getattr(self, name).float().nan_to_num().sum() * 0.0
        return total


def recorded_histograms(directory: Path) -> dict[tuple[str, int | None], Histogram]:
    found: dict[tuple[str, int | None], Histogram] = {}
    for event in load_dir(directory):
        for value in getattr(event, "values", ()):
            if isinstance(value.value, Histogram):
                found[(value.tag, event.step)] = value.value
    return found


def histograms_of(
    directory: Path, values: dict[str, torch.Tensor]
) -> dict[tuple[str, int | None], Histogram]:
    network = Weights({name: value.clone() for name, value in values.items()})
    optimizer = torch.optim.SGD(network.parameters(), lr=0.0)  # the values stay as given

    def step(batch: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad()
        loss = network(batch)
        loss.backward()
        optimizer.step()
        return loss.detach()

    collector = SummaryCollector(
        directory,
        collect_freq=1,
        collect_specified_data={"collect_landscape": None, "histogram_regular": ".*"},
    )
    batches = [torch.ones(2) for _ in range(2)]
    TrainLoop(step, network=network, optimizer=optimizer).train(1, batches, callbacks=[collector])
    return recorded_histograms(directory)


@pytest.mark.parametrize("deterministic", [False, True], ids=["histc", "deterministic"])
def test_histograms_counted_on_the_device_are_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deterministic: bool
) -> None:
    generator = torch.Generator().manual_seed(3)
    normal = torch.randn(1 << 20, generator=generator)
    with_specials = torch.randn(5000, generator=generator)
    with_specials[::97] = float("nan")
    with_specials[5::301] = float("inf")
    with_specials[7::401] = float("-inf")
    narrow = 1.0 + torch.arange(40, dtype=torch.float32) * 2**-23  # 40 float32 steps wide
    values = {
        "normal": normal,  # 90 buckets, float32 edges
        "halves": torch.randn(3000, generator=generator).half(),
        "brain": torch.randn(3000, generator=generator).bfloat16(),  # bucketed as float32
        "doubles": torch.randn(3000, generator=generator, dtype=torch.float64),
        "specials": with_specials,
        "only_nan": torch.full((7,), float("nan")),
        "constant": torch.full((12,), 2.5),
        "few": torch.tensor([0.1, 0.2, 0.3, 0.1]),
        "narrow": narrow,  # float32 rounding would merge edges: float64 edges
        "edges": torch.linspace(-1.0, 1.0, 91),  # values on the edges themselves
    }
    host = histograms_of(tmp_path / "host", values)
    monkeypatch.setattr(torch_adapter, "HISTOGRAM_CPU_ON_DEVICE", True)
    if deterministic:
        # A GPU refuses histc's atomic adds here: the numbers are counted by sorting
        # (histc refusing on this CPU too proves it is not called).
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("_histc_cuda does not have a deterministic implementation")

        monkeypatch.setattr(torch, "histc", refused)
        torch.use_deterministic_algorithms(True)
    try:
        device = histograms_of(tmp_path / "device", values)
    finally:
        torch.use_deterministic_algorithms(False)
    assert sorted(device) == sorted(host)
    assert {tag for tag, _ in host} == {f"{name}/auto" for name in values}
    for key, expected in host.items():
        got = device[key]
        assert got.buckets == expected.buckets, key  # edges, widths and counts, exactly
        assert (got.count, got.nan_count, got.pos_inf_count, got.neg_inf_count) == (
            expected.count,
            expected.nan_count,
            expected.pos_inf_count,
            expected.neg_inf_count,
        ), key
        assert (got.min, got.max) == (expected.min, expected.max), key
        if expected.sum is None:
            assert got.sum is None
        else:  # added in another order: the last bits may differ
            assert got.sum == pytest.approx(expected.sum, rel=1e-9, abs=1e-9), key
    assert host[("specials/auto", 1)].nan_count == 52
    assert len(host[("normal/auto", 1)].buckets) == 90
    assert host[("only_nan/auto", 1)].buckets == ()


@pytest.mark.parametrize(
    ("operation", "error", "said"),
    [
        (
            "histc",
            RuntimeError("histc is not implemented for this device\nmore"),
            "histc is not implemented for this device",
        ),
        (  # Apple's MPS has no float64
            "bucketize",
            TypeError("Cannot convert a MPS Tensor to float64 dtype"),
            "Cannot convert a MPS Tensor to float64 dtype",
        ),
    ],
    ids=["refused", "no-float64"],
)
def test_a_device_that_cannot_count_hands_its_tensors_to_the_host(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    operation: str,
    error: Exception,
    said: str,
) -> None:
    values = {"weight": torch.randn(500, generator=torch.Generator().manual_seed(4))}
    host = histograms_of(tmp_path / "host", values)
    monkeypatch.setattr(torch_adapter, "HISTOGRAM_CPU_ON_DEVICE", True)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(torch, operation, refuse)
    device = histograms_of(tmp_path / "device", values)
    assert device == host
    warnings = [
        record.getMessage() for record in caplog.records if "host instead" in record.getMessage()
    ]
    assert warnings == [
        f"Histograms of device tensors are read on the host instead: the device could not "
        f"count them ({said})."
    ]


@pytest.mark.parametrize(
    "size",
    [1_000, (1 << 16) - 1, 1 << 16, (1 << 16) * 3 + 17, 4_000_000 + 5],
    ids=["small", "just-under-rows", "rows-no-tail", "rows-and-tail", "25-mb-bucket"],
)
def test_a_device_buckets_norm_is_its_float64_norm_from_one_pass_of_rows(size: int) -> None:
    """The probe's norm on an accelerator (run here on CPU tensors): the bucket's float64
    norm, and the largest norm of a row of 256 (the tail a row of its own), as the host
    path reads them; float64 device tensors, so the step's norms stack and copy as one."""
    generator = torch.Generator().manual_seed(size)
    bucket = torch.randn(size, generator=generator) * 1e-3
    bucket[size // 3] = 7.0  # a row that stands apart: the peak
    norm, peak = torch_adapter.GradientProbe.device_norm(bucket)
    assert norm.dtype == peak.dtype == torch.float64
    assert norm.shape == peak.shape == ()
    exact = math.sqrt(float((bucket.double() ** 2).sum()))
    assert abs(float(norm) - exact) <= 1e-7 * exact
    rows = [bucket[first : first + 256].double() for first in range(0, size, 256)]
    largest = max(math.sqrt(float((row**2).sum())) for row in rows)
    assert abs(float(peak) - largest) <= 1e-6 * largest


def test_a_half_precision_device_buckets_rows_are_summed_in_float32() -> None:
    """A float16 bucket whose rows' sums of squares pass float16's range (65504) still has
    a finite norm: its rows are normed in float32."""
    bucket = torch.full((1 << 17,), 100.0, dtype=torch.float16)  # each row's sum: 2.56e6
    norm, peak = torch_adapter.GradientProbe.device_norm(bucket)
    assert float(norm) == pytest.approx(100.0 * math.sqrt(1 << 17), rel=1e-7)
    assert float(peak) == pytest.approx(100.0 * 16, rel=1e-7)


def test_a_device_bucket_with_nan_or_an_overflowing_row_reads_non_finite() -> None:
    """NaN stays NaN; an element whose square passes float32's range makes the norm and the
    peak +inf on a device (the host's second float64 pass would need a wait): either is a
    non-finite norm, which the gradient rule names at once (docs/gradients.md)."""
    bucket = torch.ones(1 << 17)
    bucket[1000] = math.nan
    norm, peak = torch_adapter.GradientProbe.device_norm(bucket)
    assert math.isnan(float(norm)) and math.isnan(float(peak))
    bucket[1000] = 3e19
    norm, peak = torch_adapter.GradientProbe.device_norm(bucket)
    assert float(norm) == math.inf and float(peak) == math.inf


DEVICE_LAG = 5  # steps the device runs behind the host
BUDGET_LOGGER = "rankscribe.collector.cost._budget"


class LaggingDevice:
    """A device ``step_seconds`` of the test's clock a step, ``lag`` steps behind the host:
    its timing events read the device's time at their place in the stream, and pass once
    the host has launched ``lag`` steps more (or at a wait)."""

    def __init__(self, step_seconds: float, lag: int = DEVICE_LAG) -> None:
        self.step_seconds = step_seconds
        self.lag = lag
        self.launched = 0  # steps the host has launched
        self.caught_up = False

    def event(self) -> LaggingEvent:
        return LaggingEvent(self)


class LaggingEvent:
    def __init__(self, device: LaggingDevice) -> None:
        self.device = device
        self.place = 0

    def record(self) -> None:
        self.place = self.device.launched

    def query(self) -> bool:
        return self.device.caught_up or self.device.launched >= self.place + self.device.lag

    def elapsed_time(self, end: LaggingEvent) -> float:
        return (end.place - self.place) * self.device.step_seconds * 1000.0

    def synchronize(self) -> None:
        self.device.caught_up = True


def train_on_lagging_device(
    directory: Path,
    device: LaggingDevice,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> list[str]:
    """300 steps of 1 s of the host's clock, on ``device``; the histograms take 2 s of it
    at each collected step (every 10th: 20 % of the host's step). The cost budget's
    messages."""
    monkeypatch.setattr(torch_adapter, "_device_events", lambda module: device.event)
    counted = torch_adapter.TorchOptimizer.histogram_values

    def slow_histograms(self: Any, tensors: list[Any]) -> list[Any]:
        clock.advance(2.0)
        return counted(self, tensors)

    monkeypatch.setattr(torch_adapter.TorchOptimizer, "histogram_values", slow_histograms)
    network = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    batches = [(torch.rand(2, 4), torch.tensor([0, 1])) for _ in range(100)]

    def step(batch: Any) -> torch.Tensor:
        clock.advance(1.0)
        device.launched += 1
        return nn.functional.cross_entropy(network(batch[0]), batch[1])

    collector = SummaryCollector(directory, collect_freq=10, collect_specified_data=NO_LANDSCAPE)
    with caplog.at_level(logging.INFO, logger=BUDGET_LOGGER):
        TrainLoop(step, network=network, optimizer=optimizer).train(
            3, batches, callbacks=[collector]
        )
    return [record.getMessage() for record in caplog.records if record.name == BUDGET_LOGGER]


def test_the_cost_budget_times_its_windows_on_the_device_when_the_host_runs_ahead(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    collector_clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The device takes 10 s a step while the host launches one a second: the histograms'
    2 s a collected step are 2 % of the job's step, not the 20 % of the host's. The first
    window (steps 20-29) decides nothing (under twice the budget); the first full one
    (30-129) sheds to every 3rd collected step, once the device has passed its end mark."""
    said = train_on_lagging_device(
        tmp_path, LaggingDevice(10.0), collector_clock, monkeypatch, caplog
    )
    [message] = said
    assert message.startswith("The collector cost 2.0 % of the training step over steps 31-130")
    assert "parameter histograms but at every 3rd collected step (every 30 steps)" in message
    histograms = sorted({step for _, step in recorded_histograms(tmp_path) if step is not None})
    # Decided at step 135 (the device passes step 130's mark 5 steps later): the
    # collected steps after it keep every 3rd.
    assert histograms == [1, *range(10, 131, 10), 150, 180, 210, 240, 270, 300]


def test_the_cost_budget_keeps_the_hosts_clock_where_the_device_keeps_up(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    collector_clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A device as fast as the host (1 s a step): the window's time is the host's, which
    holds the histograms' seconds too, and the first window sheds as on the CPU."""
    said = train_on_lagging_device(
        tmp_path, LaggingDevice(1.0), collector_clock, monkeypatch, caplog
    )
    [message] = said
    assert message.startswith("The collector cost 20.0 % of the training step over steps 21-30")


def test_a_decision_the_device_has_not_caught_up_with_by_the_next_window_is_the_hosts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    collector_clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A device 200 steps behind: the first window's decision still waits when the next
    window closes (step 130), and is made then, on the host's clock."""
    device = LaggingDevice(10.0, lag=200)
    said = train_on_lagging_device(tmp_path, device, collector_clock, monkeypatch, caplog)
    [message] = said
    assert message.startswith("The collector cost 20.0 % of the training step over steps 21-30")
    histograms = sorted({step for _, step in recorded_histograms(tmp_path) if step is not None})
    # Every collected step until then (decided before step 130's work); then every 20th
    # (the 20 % read on the host's clock).
    assert histograms == [1, *range(10, 121, 10), 200]
