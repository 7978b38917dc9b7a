"""tools/device_check.py --dry-run: one table of every check, from a stand-in NVML and CPU
tensors (here, beside the other torch tests: the dry run times torch tensors on the CPU)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "device_check.py"


def test_the_dry_run_prints_one_table_of_every_check() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--dry-run", "--parameters", "200000", "--steps", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["check", "reading", "value", "note"]
    rows = {}
    for line in lines[2:]:
        check, reading, value, *_ = [*re.split(r"\s{2,}", line), ""]
        rows[(check, reading)] = value
    # The stand-in device is thermally throttled at 1.41 GHz (SwThermalSlowdown, 0x20).
    assert rows[("nvml", "gpu_sm_clock_mhz")].startswith("1410 / 1410 / 1410")
    assert rows[("nvml", "gpu_throttle_thermal")].startswith("1 / 1 / 1")
    assert rows[("nvml", "gpu_throttle_reasons")].startswith("32 / 32 / 32")
    assert rows[("forward", "path")].startswith("device events")
    assert rows[("forward", "steps timed")].startswith("5 of 5")
    assert rows[("fingerprint", "parameters")].startswith("200,000 float32")
    # The device's sum of a slice is the same sum over a host copy of those bytes.
    assert rows[("fingerprint", "device sum == host sum")] == "yes"
    # Histograms counted through the device path equal the host's count.
    assert rows[("histogram", "device == host")] == "yes"
    # The training run's files hold a forward time per step and the stand-in's readings.
    steps = int(rows[("session", "steps")])
    assert steps >= 5
    assert int(rows[("session", "forward_time points")]) == steps
    assert int(rows[("session", "gpu tags")]) >= 9
    # The training run's model is on the fake device: no wait for it in the steps.
    assert rows[("session", "training-thread syncs")] == "0"
    # Each step's time on the host, collected and quiet, from the best collected run.
    assert float(rows[("session", "host: collected step")].removesuffix(" ms")) > 0
    assert float(rows[("session", "host: quiet step")].removesuffix(" ms")) > 0
    # What the cost budget decided in each collected run: the share it measured and the
    # steps, or that it shed nothing.
    said = [value for (check, reading), value in rows.items() if reading.startswith("budget, run")]
    assert len(said) >= 2
    assert all(
        re.fullmatch(r"\d+\.\d %, steps \d+-\d+", value) or value == "(nothing shed)"
        for value in said
    ), said
    # The gradient probe on a one-rank DDP network (gloo here), against the same without it.
    assert float(rows[("probe", "small step: bare")].removesuffix(" ms")) > 0
    assert float(rows[("probe", "session step: probed")].removesuffix(" ms")) > 0
    assert re.fullmatch(r"[+-]\d+\.\d %", rows[("probe", "session step: added")])
    assert rows[("probe", "training-thread syncs")] == "0"
    # Summary operators given device tensors: at the steps that keep each kind, read by
    # the writer's thread, each value the host copy of its step.
    assert rows[("operators", "steps with a tensor")] == "1, 8, 16, 24, 32, 40"
    assert rows[("operators", "steps with a histogram")] == "5"
    assert rows[("operators", "files == host copies")] == "yes"
    assert rows[("operators", "training-thread syncs")] == "0"
    assert {check for check, _ in rows} == {
        "nvml",
        "forward",
        "fingerprint",
        "histogram",
        "session",
        "probe",
        "operators",
        "total",
    }
