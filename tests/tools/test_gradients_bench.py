"""tools/bench/gradients.py: the injection harness of the gradient rule, on a small job."""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import pytest

from tests._support.tool_modules import load_tool


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_tool("bench/gradients.py", "gradients_bench")


def test_a_grown_element_takes_its_row_and_a_scaled_bucket_scales_its_peak(
    bench: ModuleType,
) -> None:
    norm, size = 100.0, 1e6
    element = norm / math.sqrt(size)  # 0.1: the bucket's typical element
    grown, peak = bench.FAULTS["flip x2^16"](norm, 2.0, size)
    assert grown == pytest.approx(math.sqrt(norm**2 + element**2 * (4.0**16 - 1)))
    assert peak == pytest.approx(element * math.sqrt(255 + 4.0**16))  # the grown element's row
    # x2^4: its row (0.1 x sqrt(255 + 256) = 2.26) stays below a peak of 5.
    assert bench.FAULTS["flip x2^4"](norm, 5.0, size)[1] == 5.0
    assert bench.FAULTS["bucket x10"](norm, 2.0, size) == (1000.0, 20.0)


def test_clean_peaks_hold_a_share_of_the_norm_that_does_not_move_with_the_bucket(
    bench: ModuleType,
) -> None:
    rng = np.random.default_rng(0)
    sizes = np.array([1e4, 1e6, 1e8])
    norms = bench.MODELS["heavy-tail"](rng, 50, 8, 3)
    peaks = bench._clean_peaks(rng, "heavy-tail", norms, sizes)
    shares = peaks / norms
    assert np.all(shares <= 1.0) and np.all(shares > 0.0)
    # A typical row of 256 elements holds sqrt(256 / size); the largest 1 to 10 times that.
    typical = np.sqrt(256 / sizes)
    assert np.all(shares[..., 1:] >= typical[1:] * 0.8)
    assert np.all(shares[..., 1:] <= typical[1:] * 10 * 1.3)
    # The heavy tail scales the whole bucket: the share does not move with it.
    correlation = np.corrcoef(np.log(shares).ravel(), np.log(norms).ravel())[0, 1]
    assert abs(correlation) < 0.2
    # The largest row against the rest of the rows moves by the model's 5 %, in a bucket of
    # 39 rows too, and never holds all of the norm while the other rows hold anything.
    odds = np.log(shares / np.sqrt(1.0 - shares * shares))
    assert np.all(shares < 1.0)
    assert np.all((odds.std(axis=(0, 1)) > 0.04) & (odds.std(axis=(0, 1)) < 0.06))


def test_on_a_small_job_the_rule_names_the_faults_no_noise_hides_and_no_clean_rank(
    bench: ModuleType,
) -> None:
    result = bench.bench("gaussian", 16, 4, 200, 4, 0, True)
    assert result["false"] == 0.0
    for fault in ("flip x2^32", "flip x2^64", "bucket x100", "NaN", "+inf"):
        assert result["detected"][fault] == 1.0, fault
    assert result["detected"]["flip x2^4"] < 1.0  # x1.000 of a norm: below the noise


def test_without_injections_only_the_clean_runs_false_names_are_measured(
    bench: ModuleType,
) -> None:
    result = bench.bench("gaussian", 16, 4, 100, 0, 0, True)
    assert result["false"] == 0.0
    assert all(math.isnan(rate) for rate in result["detected"].values())
    with pytest.raises(SystemExit):
        bench.main(["--injections", "-1"])


def test_a_run_of_one_bucket_size_gives_a_point_of_the_detection_curve(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # In buckets of 10^8 elements x2^8 moves the norm x1.0003; the peak's row x16 / (1-10).
    norms_only = bench.bench("gaussian", 16, 4, 200, 6, 0, False, 1e8)["detected"]
    with_peaks = bench.bench("gaussian", 16, 4, 200, 6, 0, True, 1e8)["detected"]
    assert (norms_only["flip x2^8"], with_peaks["flip x2^8"]) == (0.0, 1.0)
    bench.main(["--ranks", "16", "--steps", "60", "--injections", "0", "--sizes", "1e4", "1e6"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(row[0], row[3]) for row in rows] == [
        (model, size) for model in bench.MODELS for size in ("1e+04", "1e+06")
    ]
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "10"])
