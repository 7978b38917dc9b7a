"""The gradient probe on a real ``torchrun --nproc_per_node 3`` DDP job (gloo, CPU).

One launch trains the same network four times (torchrun_gradients.py): with the
probe, without it, with a hook of the user's registered once training has begun
(chained behind the probe), and with one registered before (the probe is off).
Three ranks, not two: DDP multiplies each gradient by ``1 / 3``, which differs from
a division by 3 in the last bit (with 2 ranks both are exact), so only an odd
group shows that the probe's reduction is DDP's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.jobview.feed import (
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    STEP_TIME_TAG,
)
from tests._support.job_files import rank_scalars
from tests._support.launchers import clean_environment, run_bounded, torchrun

SCRIPT = Path(__file__).resolve().parent / "torchrun_gradients.py"
BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "gradient_probe.py"
JOB_TIMEOUT = 240
STEPS = 20
RANKS = (0, 1, 2)
PER_BUCKET_TAGS = (GRADIENT_NORM_TAG_PREFIX, GRADIENT_PEAK_TAG_PREFIX)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("gradients")
    result = run_bounded(
        torchrun(
            SCRIPT,
            out,
            "probe,plain,probe_view,plain_view,chained,early,probe_large,plain_large,"
            "chained_large,probe_accum,plain_accum",
            str(STEPS),
            ranks=len(RANKS),
        ),
        env=clean_environment(OMP_NUM_THREADS="1"),
        cwd=out,
        timeout=JOB_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.output
    return out, result.output


def rank_result(job_dir: Path, rank: int) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((job_dir / f"rank_{rank}.json").read_text())
    return result


def gradient_tags(found: dict[str, dict[int, float]]) -> list[str]:
    return sorted(tag for tag in found if tag.startswith("rankscribe/gradient/"))


def test_the_probe_leaves_ddps_reduced_gradients_bit_identical(jobs: tuple[Path, str]) -> None:
    out, _ = jobs
    for rank in RANKS:
        # gradients copied into DDP's buckets, or views of them; and buckets of 10^6
        # elements, which the probe norms and scales block by block
        for suffix in ("", "_view", "_large"):
            probed = rank_result(out / f"probe{suffix}", rank)["parameters"]
            plain = rank_result(out / f"plain{suffix}", rank)["parameters"]
            assert probed.keys() == plain.keys()
            for name in probed:  # exact float equality, element by element, after every update
                assert probed[name] == plain[name], (suffix, name)
    assert gradient_tags(rank_scalars(out / "probe" / "rank_0"))  # it did run
    assert gradient_tags(rank_scalars(out / "plain" / "rank_0")) == []  # gradient_probe=False


@pytest.mark.parametrize("scenario", ["chained", "chained_large"])
def test_each_rank_records_its_local_bucket_norms_and_peaks_before_the_reduce(
    jobs: tuple[Path, str], scenario: str
) -> None:
    out, _ = jobs
    for rank in RANKS:
        found = rank_scalars(out / scenario / f"rank_{rank}")
        # The user's hook, chained behind the probe, saw each bucket's local gradient.
        seen: dict[str, dict[str, float]] = rank_result(out / scenario, rank)["norms"]
        assert sorted(map(int, seen)) == list(range(1, STEPS + 1))
        buckets = {bucket for norms in seen.values() for bucket in norms}
        assert len(buckets) >= 2
        assert gradient_tags(found) == sorted(
            [GRADIENT_READY_TAG]
            + [prefix + bucket for bucket in buckets for prefix in PER_BUCKET_TAGS]
        )
        peaks: dict[str, dict[str, float]] = rank_result(out / scenario, rank)["peaks"]
        for step, norms in seen.items():
            for bucket, norm in norms.items():
                recorded = found[GRADIENT_NORM_TAG_PREFIX + bucket][int(step)]
                assert recorded == pytest.approx(norm, rel=1e-6)  # float32 in the file
                # The largest norm of 256 consecutive elements, as the user's hook took it.
                peak = found[GRADIENT_PEAK_TAG_PREFIX + bucket][int(step)]
                assert peak == pytest.approx(peaks[step][bucket], rel=1e-6)
                assert 0.0 < peak <= recorded * (1 + 1e-6)
        ready = found[GRADIENT_READY_TAG]
        assert sorted(ready) == list(range(1, STEPS + 1))
        for number, seconds in ready.items():
            assert 0.0 < seconds <= found[STEP_TIME_TAG][number]
    # Each rank's own micro-batch: the local norms differ between the ranks.
    first = rank_result(out / scenario, 0)["norms"]
    second = rank_result(out / scenario, 1)["norms"]
    assert not np.allclose(first["5"]["0"], second["5"]["0"])


def test_the_norms_the_probe_takes_while_it_reduces_are_the_local_gradients_float64_norms(
    jobs: tuple[Path, str],
) -> None:
    """Where the probe reduces, it scales each block of a large bucket as it norms it: the
    norms are still the local gradient's, before the scaling (a tensor hook on each
    parameter summed the local gradient's squares in float64)."""
    out, _ = jobs
    for rank in RANKS:
        found = rank_scalars(out / "probe_large" / f"rank_{rank}")
        squares = {
            int(step): total
            for step, total in rank_result(out / "probe_large", rank)["squares"].items()
        }
        assert sorted(squares) == list(range(1, STEPS + 1))
        norm_tags = [tag for tag in found if tag.startswith(GRADIENT_NORM_TAG_PREFIX)]
        for step, total in squares.items():
            recorded = sum(found[tag][step] ** 2 for tag in norm_tags if step in found[tag])
            # float32 in the file: each bucket's norm within 2**-24, so the sum within 1e-6
            assert np.sqrt(recorded) == pytest.approx(np.sqrt(total), rel=1e-6), (rank, step)


def test_with_gradient_accumulation_the_probe_norms_each_steps_accumulated_local_gradient(
    jobs: tuple[Path, str],
) -> None:
    """Half of each step's batch backward under ``no_sync`` (DDP reduces nothing), the
    other half synchronised: one reduce a step, of the two halves' gradients summed. The
    probe records every step, its norms are those of that local sum, and DDP's reduced
    gradients come out bit-identical to a run without the probe."""
    out, _ = jobs
    for rank in RANKS:
        probed = rank_result(out / "probe_accum", rank)
        plain = rank_result(out / "plain_accum", rank)["parameters"]
        assert probed["parameters"] == plain
        found = rank_scalars(out / "probe_accum" / f"rank_{rank}")
        assert sorted(found[GRADIENT_READY_TAG]) == list(range(1, STEPS + 1))
        squares = {int(step): total for step, total in probed["squares"].items()}
        assert sorted(squares) == list(range(1, STEPS + 1))
        norm_tags = [tag for tag in found if tag.startswith(GRADIENT_NORM_TAG_PREFIX)]
        assert len(norm_tags) >= 2
        for step, total in squares.items():
            recorded = sum(found[tag][step] ** 2 for tag in norm_tags if step in found[tag])
            assert np.sqrt(recorded) == pytest.approx(np.sqrt(total), rel=1e-6), (rank, step)


def test_a_hook_registered_before_training_turns_the_probe_off_with_a_warning(
    jobs: tuple[Path, str],
) -> None:
    out, output = jobs
    assert "The gradient probe is off for this network" in output
    for rank in RANKS:
        assert gradient_tags(rank_scalars(out / "early" / f"rank_{rank}")) == []
        # the user's hook ran, alone, at every step
        assert len(rank_result(out / "early", rank)["norms"]) == STEPS


def test_gradient_probe_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(CollectorTypeError, match=r"'gradient_probe'.*bool.*got str 'yes'"):
        SummaryCollector(tmp_path, gradient_probe="yes")  # type: ignore[arg-type]


def test_the_probes_cost_bench_checks_its_norms_against_a_chained_hooks(tmp_path: Path) -> None:
    """tools/bench/gradient_probe.py --verify: the norms the probe hands on equal a hook's
    own float64 norms of the same buckets (the check run on a GPU when one is lent)."""
    result = run_bounded(
        torchrun(BENCH, "--steps", "2", "--reps", "1", "--width", "64", "--verify", ranks=2),
        env=clean_environment(OMP_NUM_THREADS="1"),
        cwd=tmp_path,
        timeout=JOB_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.output
    assert re.search(
        r"^cpu, 2 ranks, width 64, batch 32 \(16,640 parameters\)", result.output, re.M
    )
    verified = re.search(
        r"^verify: (\d+) norms, largest relative difference (\S+)$", result.output, re.M
    )
    assert verified is not None, result.output
    # One bucket (a small network) at each of the 10 steps, each checked.
    assert int(verified[1]) == 10
    assert float(verified[2]) < 1e-6
