"""write_job_view: the job's files on disk and its verdicts."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from rankscribe.jobview import (
    JobView,
    RankSeries,
    judge_gradients,
    verdict_lines,
    write_job_view,
)
from rankscribe.jobview.errors import (
    JobViewDirNotExistError,
    JobViewParamTypeError,
    JobViewParamValueError,
)
from rankscribe.jobview.feed import (
    FINGERPRINT_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    STEP_TIME_TAG,
)
from rankscribe.jobview.parts import records_from_verdicts
from rankscribe.writer import files, reader
from rankscribe.writer.events import read_events, read_tensorboard_events

STEPS = 200


def _job(
    ranks: int,
    *,
    seed: int = 0,
    slow: dict[int, float] | None = None,
    steps: int = STEPS,
    noise: float = 0.1,
    fingerprints: dict[int, int] | None = None,
    shards: bool = False,
) -> dict[int, RankSeries]:
    """Balanced ranks with noisy step times (~10 ms); ``slow`` scales a rank's times.

    ``fingerprints`` maps a rank to the step from which its fingerprint leaves the others';
    with ``shards`` every rank holds a different fingerprint from the start.
    """
    rng = np.random.default_rng(seed)
    series = {}
    for rank in range(ranks):
        factor = (slow or {}).get(rank, 1.0)
        times = 0.01 * factor * (1 + noise * rng.standard_normal(steps)).clip(0.5)
        leave = (fingerprints or {}).get(rank)
        prints = []
        for step in range(1, steps + 1, 5):
            value = float(step * 1000 + (rank if shards else 0))
            if leave is not None and step >= leave:
                value += 0.5 + rank
            prints.append((step, value))
        series[rank] = RankSeries(
            rank,
            {
                STEP_TIME_TAG: [(step, float(times[step - 1])) for step in range(1, steps + 1)],
                "loss/auto": [(step, 1.0 / step + rank * 1e-3) for step in range(1, steps + 1)],
                FINGERPRINT_TAG: prints,
            },
        )
    return series


def _view(tmp_path: Path, series: dict[int, RankSeries], **options: object) -> JobView:
    world_size = options.pop("world_size", max(series) + 1)
    return write_job_view(tmp_path, series, world_size=world_size, **options)  # type: ignore[arg-type]


def test_a_slow_rank_is_the_straggler(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(4, slow={2: 1.5}))
    assert view.verdicts["job/straggler_rank"] == 2
    assert view.verdicts["job/straggler_slowest_share"] > 0.9
    assert view.verdicts["job/straggler_excess"] == pytest.approx(0.5, abs=0.1)
    assert view.verdicts["job/step_time_skew"] == pytest.approx(1.5, abs=0.15)
    assert verdict_lines(view.verdicts)[0].startswith("straggler: rank 2 costs ")


@pytest.mark.parametrize("ranks", [2, 3, 8])
@pytest.mark.parametrize("seed", range(5))
def test_noisy_but_balanced_ranks_have_no_straggler(tmp_path: Path, ranks: int, seed: int) -> None:
    view = _view(tmp_path, _job(ranks, seed=seed, noise=0.3))
    assert view.verdicts["job/straggler_rank"] == -1
    assert "job/straggler_excess" not in view.verdicts


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("seed", range(8))
def test_ranks_descheduled_at_random_have_no_straggler(
    tmp_path: Path, ranks: int, seed: int
) -> None:
    """Sub-millisecond steps on a loaded machine: each rank is 25x slower on random steps.

    Each rank's own median then swings with the mixture, so comparing the ranks'
    medians would flag one by chance; the step-by-step comparison does not.
    """
    rng = np.random.default_rng(seed)
    series = {}
    for rank in range(ranks):
        times = 0.0002 * (1 + 0.3 * rng.random(110)) * np.where(rng.random(110) < 0.45, 25, 1)
        series[rank] = RankSeries(
            rank, {STEP_TIME_TAG: [(step, float(times[step - 1])) for step in range(1, 111)]}
        )
    view = _view(tmp_path, series)
    assert view.verdicts["job/straggler_rank"] == -1


def test_a_rank_slower_by_a_hair_is_not_a_straggler(tmp_path: Path) -> None:
    """Slowest at every step, but 1 % of the step only: below the cost floor (2 %)."""
    view = _view(tmp_path, _job(2, slow={1: 1.01}, noise=0.001))
    assert view.verdicts["job/straggler_rank"] == -1
    assert view.verdicts["job/step_time_skew"] == pytest.approx(1.01 / 1.005, rel=0.01)


def test_a_rank_5_percent_slower_is_named_with_its_cost(tmp_path: Path) -> None:
    """5 % of a 10 ms step, at every step: clear and above the floor."""
    view = _view(tmp_path, _job(2, slow={1: 1.05}, noise=0.001))
    assert view.verdicts["job/straggler_rank"] == 1
    assert view.verdicts["job/straggler_cost_seconds"] == pytest.approx(0.0005, rel=0.05)


def test_a_clean_run_flags_nothing(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(3))
    verdicts = view.verdicts
    assert verdicts["job/straggler_rank"] == -1
    assert verdicts["job/divergence_check"] == "checked"
    assert (verdicts["job/diverged_ranks"], verdicts["job/diverged_first_step"]) == ("", -1)
    assert (verdicts["job/nonfinite_loss_ranks"], verdicts["job/nonfinite_loss_first_step"]) == (
        "",
        -1,
    )
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (-1, -1)
    assert verdicts["job/missing_ranks"] == "" and verdicts["job/ranks_reported"] == 3
    assert [verdicts[f"job/last_step/{rank}"] for rank in range(3)] == [STEPS] * 3
    assert verdict_lines(verdicts)[1:] == ["divergence: none (the ranks' parameters agree)"]


def test_a_rank_leaving_the_majority_is_diverged_from_that_step(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(4, fingerprints={3: 46}))
    verdicts = view.verdicts
    assert verdicts["job/divergence_check"] == "checked"
    assert verdicts["job/diverged_ranks"] == "3"
    assert verdicts["job/diverged_first_step"] == 46
    assert verdicts["job/diverged_step/3"] == 46
    assert "job/diverged_step/0" not in verdicts
    assert "divergence: rank 3 at step 46" in verdict_lines(verdicts)
    distinct = reader.scalars(view.paths[0])[f"{FINGERPRINT_TAG}/distinct"]
    assert {step: value for step, value in distinct if step in (41, 46)} == {41: 1.0, 46: 2.0}


def test_two_ranks_leaving_at_different_steps(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(5, fingerprints={1: 21, 4: 101}))
    assert view.verdicts["job/diverged_ranks"] == "1,4"
    assert view.verdicts["job/diverged_first_step"] == 21
    assert (view.verdicts["job/diverged_step/1"], view.verdicts["job/diverged_step/4"]) == (21, 101)


def test_without_a_majority_every_rank_that_disagrees_is_named(tmp_path: Path) -> None:
    """Two ranks that part ways: neither holds a majority, so both are reported."""
    view = _view(tmp_path, _job(2, fingerprints={1: 31}))
    assert view.verdicts["job/diverged_ranks"] == "0,1"
    assert (view.verdicts["job/diverged_step/0"], view.verdicts["job/diverged_step/1"]) == (31, 31)
    # a rank already diverged keeps its first step when the others split later
    view = _view(tmp_path, _job(4, fingerprints={1: 21, 2: 41, 3: 41}))
    assert view.verdicts["job/diverged_ranks"] == "0,1,2,3"
    steps = [view.verdicts[f"job/diverged_step/{rank}"] for rank in range(4)]
    assert steps == [41, 21, 41, 41]


def test_model_parallel_shards_are_not_flagged(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(4, shards=True, fingerprints={2: 51}))
    assert view.verdicts["job/divergence_check"] == "ranks_differ_at_start"
    assert view.verdicts["job/diverged_ranks"] == ""
    assert view.verdicts["job/diverged_first_step"] == -1
    assert "divergence: not checked (ranks differ at start)" in verdict_lines(view.verdicts)


def test_the_check_starts_at_the_first_step_every_rank_has_a_fingerprint(tmp_path: Path) -> None:
    series = _job(3)
    # rank 2 recorded its first fingerprints late; before that, ranks 0 and 1 differ
    series[1].scalars[FINGERPRINT_TAG][0] = (1, -5.0)
    series[2].scalars[FINGERPRINT_TAG] = series[2].scalars[FINGERPRINT_TAG][2:]
    view = _view(tmp_path, series)
    assert view.verdicts["job/divergence_check"] == "checked"
    assert view.verdicts["job/diverged_ranks"] == ""


def test_nan_loss_on_some_ranks_is_named_with_its_first_step(tmp_path: Path) -> None:
    series = _job(3)
    loss = series[1].scalars["loss/auto"]
    series[1].scalars["loss/auto"] = [
        (step, math.nan if step >= 17 else value) for step, value in loss
    ]
    series[2].scalars["loss/auto"][40] = (41, math.inf)
    view = _view(tmp_path, series)
    assert view.verdicts["job/nonfinite_loss_ranks"] == "1,2"
    assert view.verdicts["job/nonfinite_loss_first_step"] == 17
    assert view.verdicts["job/nonfinite_loss_step/1"] == 17
    assert view.verdicts["job/nonfinite_loss_step/2"] == 41
    curves = reader.scalars(view.paths[0])
    mean = dict(curves["loss/auto/mean"])
    assert not math.isnan(mean[16]) and math.isnan(mean[17])
    assert dict(curves["loss/auto/max_rank"])[17] == 2.0  # the others' extremes


def test_the_rank_that_stopped_first_and_the_missing_ranks(tmp_path: Path) -> None:
    series = _job(4)
    for rank_series in series.values():  # steps of 0.3 s: each written at once
        times = rank_series.scalars[STEP_TIME_TAG]
        rank_series.scalars[STEP_TIME_TAG] = [(step, 30 * value) for step, value in times]
    for tag, points in series[2].scalars.items():
        series[2].scalars[tag] = [(step, value) for step, value in points if step <= 120]
    for tag, points in series[3].scalars.items():
        series[3].scalars[tag] = [(step, value) for step, value in points if step <= 150]
    view = _view(tmp_path, series, world_size=6, missing=[5])
    verdicts = view.verdicts
    assert [verdicts[f"job/last_step/{rank}"] for rank in range(4)] == [200, 200, 120, 150]
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (2, 120)
    assert verdicts["job/stopped_early_ranks"] == "2,3"
    assert verdicts["job/missing_ranks"] == "4,5"
    assert "job/last_step/4" not in verdicts
    counts = dict(reader.scalars(view.paths[0])[f"{STEP_TIME_TAG}/ranks"])
    assert (counts[100], counts[130], counts[190]) == (4.0, 3.0, 2.0)


def test_the_job_file_holds_every_statistic_of_every_tag(tmp_path: Path) -> None:
    series = _job(3, steps=20)
    series[0].scalars["only/rank0"] = [(5, 2.0)]
    view = _view(tmp_path, series)
    assert len(view.paths) == 1
    name = os.path.basename(view.paths[0])
    assert name.startswith("events.out.events.summary.") and ".job." in name
    assert name.endswith("_MS")
    assert files.parse_file_name(view.paths[0]) is not None
    curves = reader.scalars(view.paths[0])
    suffixes = ["mean", "min", "max", "std", "ranks", "min_rank", "max_rank"]
    for tag in ("loss/auto", STEP_TIME_TAG, "only/rank0"):
        for suffix in suffixes:
            assert f"{tag}/{suffix}" in curves
    assert f"{FINGERPRINT_TAG}/mean" not in curves
    assert f"{FINGERPRINT_TAG}/ranks" in curves
    assert curves["only/rank0/mean"] == [(5, 2.0)] and curves["only/rank0/ranks"] == [(5, 1.0)]
    times = np.array(
        [[value for _, value in series[rank].scalars[STEP_TIME_TAG]] for rank in range(3)]
    )
    assert [step for step, _ in curves[f"{STEP_TIME_TAG}/mean"]] == list(range(1, 21))
    for suffix, expected in (
        ("mean", times.mean(axis=0)),
        ("min", times.min(axis=0)),
        ("max", times.max(axis=0)),
        ("std", times.std(axis=0)),
        ("min_rank", times.argmin(axis=0)),
        ("max_rank", times.argmax(axis=0)),
        ("slowest_rank", times.argmax(axis=0)),
        ("skew", times.max(axis=0) / np.median(times, axis=0)),
    ):
        got = [value for _, value in curves[f"{STEP_TIME_TAG}/{suffix}"]]
        # the file holds float32, as every summary scalar
        np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6)
    # the summary file opens with MindSpore's version record, one event per step after it
    events = list(read_events(view.paths[0]))
    assert events[0].version == "MindSpore.Event:1"
    assert [event.step for event in events[1:]] == list(range(1, 21))


def test_job_files_are_owner_read_only(tmp_path: Path) -> None:
    view = _view(tmp_path, _job(2, steps=10), tensorboard=True)
    assert len(view.paths) == 2
    for path in view.paths:
        assert os.stat(path).st_mode & 0o777 == 0o400
    assert os.path.basename(view.paths[1]).startswith("events.out.tfevents.")
    assert view.paths[1].endswith(".job")


def test_a_rerun_replaces_the_job_files_and_never_duplicates_a_point(tmp_path: Path) -> None:
    series = _job(2, steps=10)
    first = _view(tmp_path, series, tensorboard=True)
    series[0].scalars["loss/auto"] = [(step, 9.0) for step in range(1, 11)]
    second = _view(tmp_path, series, tensorboard=True)
    job_files = sorted(
        os.path.relpath(os.path.join(folder, name), tmp_path)
        for folder, _, names in os.walk(tmp_path)
        for name in names
        if not name.startswith(".")
    )
    # the TensorBoard file in the job's own folder (TensorBoard's run "job")
    assert job_files == sorted(os.path.relpath(path, tmp_path) for path in second.paths)
    assert os.path.dirname(second.paths[1]) == str(tmp_path / "job")
    assert set(first.paths).isdisjoint(second.paths)
    curves = reader.scalars(tmp_path)
    assert [step for step, _ in curves["loss/auto/max"]] == list(range(1, 11))
    assert [value for _, value in curves["loss/auto/max"]] == [9.0] * 10
    steps = [event.step for event in read_tensorboard_events(second.paths[1])]
    assert steps.count(5) == 1


def test_a_planted_link_at_a_job_file_name_is_replaced_not_followed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    planted = job / "events.out.events.summary.1700000000.job.attacker_MS"
    planted.symlink_to(outside)
    tb_planted = job / "events.out.tfevents.1700000000.attacker.job"
    tb_planted.symlink_to(outside)
    view = _view(job, _job(2, steps=10), tensorboard=True)
    assert outside.read_text() == "keep me"
    assert not planted.is_symlink() and not os.path.lexists(planted)
    assert not os.path.lexists(tb_planted)
    for path in view.paths:
        assert not os.path.islink(path)
        assert os.stat(path).st_mode & 0o777 == 0o400


def test_a_planted_link_at_the_tensorboard_folder_is_replaced_not_followed(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    job = tmp_path / "run"
    job.mkdir()
    (job / "job").symlink_to(outside)
    view = _view(job, _job(2, steps=10), tensorboard=True)
    assert os.listdir(outside) == []
    assert not (job / "job").is_symlink() and (job / "job").is_dir()
    assert os.stat(job / "job").st_mode & 0o777 == 0o700
    assert os.path.dirname(view.paths[1]) == str(job / "job")


def test_bad_arguments_are_refused_by_name(tmp_path: Path) -> None:
    series = _job(2, steps=3)
    with pytest.raises(JobViewDirNotExistError, match="job_dir"):
        write_job_view(tmp_path / "nope", series, world_size=2)
    with pytest.raises(JobViewParamValueError, match="world_size must be an int >= 1, got 0"):
        write_job_view(tmp_path, series, world_size=0)
    with pytest.raises(JobViewParamTypeError, match=r"series\[0\] must be a RankSeries"):
        write_job_view(tmp_path, {0: {"loss": []}}, world_size=1)  # type: ignore[dict-item]
    with pytest.raises(JobViewParamValueError, match="holds the series of rank 1"):
        write_job_view(tmp_path, {0: series[1]}, world_size=2)
    with pytest.raises(JobViewParamValueError, match=r"in range\(world_size=2\), got 5"):
        write_job_view(tmp_path, {5: RankSeries(5)}, world_size=2)
    with pytest.raises(JobViewParamValueError, match="missing must hold ranks"):
        write_job_view(tmp_path, series, world_size=2, missing=["1"])  # type: ignore[list-item]
    assert os.listdir(tmp_path) == []


def test_rank_series_last_step_and_pickling() -> None:
    import pickle

    series = RankSeries(3, {"a": [(1, 1.0), (9, 2.0)], "b": [(4, 0.5)], "c": []})
    assert series.last_step == 9
    assert RankSeries(0).last_step is None
    assert pickle.loads(pickle.dumps(series)) == series


def test_a_lineage_missing_a_stragglers_measures_reads_without_nan_or_question_marks() -> None:
    """A damaged or hand-edited lineage: what is missing is left out of the sentence."""
    bare = {
        "job/straggler_rank": 2,
        "job/straggler_ranks": "2,3",
        "job/straggler_timing/3": "rankscribe/forward_time",
        "job/straggler_excess/3": 0.25,
    }
    lines = verdict_lines(bare)
    text = "\n".join(lines)
    assert "nan" not in text and "?" not in text, lines
    assert (
        "stragglers: ranks 2,3 (rank 2 (no measure recorded); rank 3 25% slower by forward time)"
        in (lines)
    )
    assert lines[0] == "straggler: rank 2 (no measure recorded)"
    costed = {**bare, "job/straggler_cost_seconds/2": 0.004}  # a cost without its share
    assert "rank 2 costs 4.0 ms a step" in "\n".join(verdict_lines(costed))
    assert "nan" not in "\n".join(verdict_lines(costed))


def test_a_straggler_that_ended_while_the_job_ran_is_told_with_its_span() -> None:
    """No straggler at the end, but the live view named one that ended: the verdicts say
    so beside "none"; spans of verdicts still standing at the end are the straggler
    line's own, and a damaged spans value is left out."""
    ended = "rank 1 section/compute steps 104-511"
    none = {"job/straggler_rank": -1, "job/step_time_skew": 1.0}
    lines = verdict_lines({**none, "job/straggler_live_spans": ended})
    assert lines[:2] == [
        "straggler: none; step-time skew 1.00",
        f"named while the job ran: {ended}",
    ]
    standing = {
        "job/straggler_rank": 2,
        "job/straggler_message": "rank 2 costs 4.0 ms a step (20% of the step)",
    }
    both = f"{ended}; rank 2 forward steps 600-end"
    lines = verdict_lines({**standing, "job/straggler_live_spans": both})
    assert lines[1] == f"named while the job ran: {both}", lines
    for base in (none, standing):
        for spans in ("rank 2 forward steps 600-end", "", 42, [ended]):
            lines = verdict_lines({**base, "job/straggler_live_spans": spans})
            assert not any(line.startswith("named while") for line in lines), (spans, lines)


def test_a_range_of_ranks_is_counted_in_the_plural() -> None:
    lines = verdict_lines({"job/missing_ranks": "1-3", "job/untimed_ranks": "5"})
    assert "missing: ranks 1-3" in lines
    assert "no timing: rank 5 (step times off: not judged as stragglers)" in lines


def _gradient_norms(
    ranks: int, steps: int, *, faults: dict[tuple[int, int, int], float] | None = None
) -> dict[int, RankSeries]:
    """Each rank's bucket norms (3 buckets, noisy alike), ``faults``: (rank, step, bucket) ->
    the factor of that norm; and a step time, so the ranks report steps."""
    rng = np.random.default_rng(7)
    series = {}
    for rank in range(ranks):
        scalars: dict[str, list[tuple[int, float]]] = {
            STEP_TIME_TAG: [(step, 0.1) for step in range(1, steps + 1)]
        }
        for bucket in range(3):
            norms = (2.0**bucket) * np.exp(0.1 * rng.standard_normal(steps))
            for (fault_rank, step, fault_bucket), factor in (faults or {}).items():
                if (fault_rank, fault_bucket) == (rank, bucket):
                    norms[step - 1] *= factor
            scalars[f"{GRADIENT_NORM_TAG_PREFIX}{bucket}"] = list(
                zip(range(1, steps + 1), norms.tolist(), strict=True)
            )
        series[rank] = RankSeries(rank, scalars)
    return series


def test_a_rank_whose_local_gradient_stands_apart_is_named_by_step_and_bucket(
    tmp_path: Path,
) -> None:
    faults = {(5, 40, 1): 50.0, (3, 12, 2): math.nan}
    verdicts = _view(tmp_path, _gradient_norms(8, 60, faults=faults)).verdicts
    assert verdicts["job/gradient_check"] == "checked"
    assert (verdicts["job/gradient_ranks"], verdicts["job/gradient_first_step"]) == ("3,5", 12)
    assert (verdicts["job/gradient_step/5"], verdicts["job/gradient_bucket/5"]) == (40, 1)
    assert verdicts["job/gradient_ratio/5"] == pytest.approx(50.0, rel=0.5)
    assert verdicts["job/gradient_nonfinite/5"] == 0
    assert (verdicts["job/gradient_step/3"], verdicts["job/gradient_bucket/3"]) == (12, 2)
    assert verdicts["job/gradient_nonfinite/3"] == 1 and "job/gradient_ratio/3" not in verdicts
    assert verdicts["job/gradient_persistent/5"] == 0
    lines = [line for line in verdict_lines(verdicts) if line.startswith("gradient:")]
    assert lines == [
        "gradient: rank 3's local gradient at step 12, before the reduce: bucket 2, a NaN or "
        "infinite local norm; named once",
        f"gradient: rank 5's local gradient at step 40, before the reduce: bucket 1, "
        f"{verdicts['job/gradient_ratio/5']:.3g}x the other ranks' median norm; named once",
    ]
    records = [record for record in records_from_verdicts(verdicts) if record["kind"] == "gradient"]
    assert [(r["ranks"], r["since_step"], r["bucket"], r["nonfinite"]) for r in records] == [
        ([3], 12, 2, True),
        ([5], 40, 1, False),
    ]
    assert records[0]["ratio"] is None and records[1]["ratio"] == verdicts["job/gradient_ratio/5"]


def test_a_rank_whose_norms_are_a_step_behind_is_judged_at_its_own_steps(
    tmp_path: Path,
) -> None:
    """Rank 3 recorded the same number of steps one step later (2-61, the others 1-60):
    its norms are not laid out with the others' as if they shared steps; its fault,
    at its own step 41, is named there."""
    series = _gradient_norms(8, 60, faults={(3, 40, 1): 50.0})
    series[3] = RankSeries(
        3,
        {
            tag: [(step + 1, value) for step, value in points]
            for tag, points in series[3].scalars.items()
        },
    )
    verdicts = _view(tmp_path, series).verdicts
    assert verdicts["job/gradient_ranks"] == "3"
    assert (verdicts["job/gradient_step/3"], verdicts["job/gradient_bucket/3"]) == (41, 1)


@pytest.mark.parametrize("float32", [False, True])
def test_the_merge_judges_the_norms_as_they_are_float64_or_float32(
    tmp_path: Path, float32: bool
) -> None:
    """The merge's ratio is the rule's on the very numbers the ranks recorded: float64
    norms are not rounded to float32 on the way (those read from summary files are
    float32 numbers already, and are judged as such)."""
    series = _gradient_norms(8, 60, faults={(5, 40, 1): 50.0})
    if float32:
        for rank_series in series.values():
            for tag, points in rank_series.scalars.items():
                rank_series.scalars[tag] = [
                    (step, float(np.float32(value))) for step, value in points
                ]
    tags = [f"{GRADIENT_NORM_TAG_PREFIX}{bucket}" for bucket in range(3)]
    norms = np.array(
        [[[value for _, value in series[rank].scalars[tag]] for tag in tags] for rank in range(8)]
    ).transpose(2, 0, 1)  # steps, ranks, buckets
    [finding] = judge_gradients(norms)
    verdicts = _view(tmp_path, series).verdicts
    assert (finding.step, finding.rank, finding.bucket) == (40, 5, 1)
    assert verdicts["job/gradient_ratio/5"] == finding.ratio


def _with_peaks(series: dict[int, RankSeries], *, lacking: int | None = None) -> None:
    """Each rank's bucket peaks: 1 % of the norm, with 5 % noise of their own (``lacking``:
    a rank that records none)."""
    rng = np.random.default_rng(8)
    for rank, ranks_series in series.items():
        if rank == lacking:
            continue
        for bucket in range(3):
            norms = ranks_series.scalars[f"{GRADIENT_NORM_TAG_PREFIX}{bucket}"]
            ranks_series.scalars[f"{GRADIENT_PEAK_TAG_PREFIX}{bucket}"] = [
                (step, norm * 0.01 * math.exp(0.05 * rng.standard_normal())) for step, norm in norms
            ]


def test_a_rank_whose_largest_element_took_its_buckets_norm_is_named_by_its_peak(
    tmp_path: Path,
) -> None:
    """Rank 5's bucket 1 at step 40: an element grown to 90 % of the norm, which it moved
    x1.2 only (below the smallest ratio a norm is named at): the peak names it. Rank 6's
    bucket 2 at step 50 grew x50 with such an element: the norm names it, and its ratio
    is the norm's."""
    series = _gradient_norms(8, 60, faults={(5, 40, 1): 1.2, (6, 50, 2): 50.0})
    _with_peaks(series)
    peaks = series[5].scalars[f"{GRADIENT_PEAK_TAG_PREFIX}1"]
    peaks[39] = (40, 0.9 * series[5].scalars[f"{GRADIENT_NORM_TAG_PREFIX}1"][39][1])
    both = series[6].scalars[f"{GRADIENT_PEAK_TAG_PREFIX}2"]
    both[49] = (50, 0.9 * series[6].scalars[f"{GRADIENT_NORM_TAG_PREFIX}2"][49][1])
    (tmp_path / "peaks").mkdir()
    verdicts = _view(tmp_path / "peaks", series).verdicts
    assert (verdicts["job/gradient_ranks"], verdicts["job/gradient_step/5"]) == ("5,6", 40)
    assert (verdicts["job/gradient_bucket/5"], verdicts["job/gradient_element/5"]) == (1, 1)
    assert (verdicts["job/gradient_bucket/6"], verdicts["job/gradient_element/6"]) == (2, 0)
    assert verdicts["job/gradient_ratio/6"] == pytest.approx(50.0, rel=0.5)
    # Its row against the rest of the bucket, 0.9 / sqrt(1 - 0.9^2), over the others' 0.01.
    assert verdicts["job/gradient_ratio/5"] == pytest.approx(206.0, rel=0.3)
    [line, _] = [line for line in verdict_lines(verdicts) if line.startswith("gradient:")]
    assert line == (
        "gradient: rank 5's local gradient at step 40, before the reduce: bucket 1, its "
        "largest row of 256 elements, against the rest of the bucket, is "
        f"{verdicts['job/gradient_ratio/5']:.3g}x the other ranks'; named once"
    )
    record, other = [r for r in records_from_verdicts(verdicts) if r["kind"] == "gradient"]
    assert (record["element"], record["ratio"]) == (True, verdicts["job/gradient_ratio/5"])
    assert (other["element"], other["ratio"]) == (False, verdicts["job/gradient_ratio/6"])
    # DDP's first step has fewer buckets (it rebuilds them): the steps are laid out one by
    # one, not as one cube, and the peaks still name rank 5.
    for ranks_series in series.values():
        for prefix in (GRADIENT_NORM_TAG_PREFIX, GRADIENT_PEAK_TAG_PREFIX):
            del ranks_series.scalars[f"{prefix}2"][0]
    (tmp_path / "rebuilt").mkdir()
    rebuilt = _view(tmp_path / "rebuilt", series).verdicts
    assert (rebuilt["job/gradient_step/5"], rebuilt["job/gradient_element/5"]) == (40, 1)
    assert rebuilt["job/gradient_ratio/5"] == verdicts["job/gradient_ratio/5"]
    # A rank without peaks in its files: the norms are judged alone, and x1.2 names nobody.
    lacking = _gradient_norms(8, 60, faults={(5, 40, 1): 1.2})
    _with_peaks(lacking, lacking=2)
    lacking[5].scalars[f"{GRADIENT_PEAK_TAG_PREFIX}1"][39] = peaks[39]
    (tmp_path / "lacking").mkdir()
    assert _view(tmp_path / "lacking", lacking).verdicts["job/gradient_ranks"] == ""


def test_a_step_with_a_negative_norm_in_a_ranks_files_is_not_judged(tmp_path: Path) -> None:
    """No probe records a norm below 0: the job view leaves that step unjudged (rank 1's
    x50 there is not named, nor is the negative norm) and judges the others (rank 2's x50
    at step 40 is named)."""
    series = _gradient_norms(4, 60, faults={(1, 30, 0): 50.0, (2, 40, 1): 50.0})
    norms = series[3].scalars[f"{GRADIENT_NORM_TAG_PREFIX}2"]
    norms[29] = (30, -1.0)
    verdicts = _view(tmp_path, series).verdicts
    assert (verdicts["job/gradient_ranks"], verdicts["job/gradient_first_step"]) == ("2", 40)
    assert (verdicts["job/gradient_step/2"], verdicts["job/gradient_bucket/2"]) == (40, 1)


def test_a_rank_apart_in_a_named_faults_fallout_is_kept_apart_from_the_ranks_named(
    tmp_path: Path,
) -> None:
    """Rank 2's bucket x50 at step 40; then every rank's norms x10 for three steps (the
    corrupted update in every replica), rank 1's bucket 0 30 times the others' at 42."""
    faults = {
        (rank, step, bucket): 10.0
        for rank in range(4)
        for step in (41, 42, 43)
        for bucket in range(3)
    }
    faults.update({(2, 40, 1): 50.0, (1, 42, 0): 300.0})
    verdicts = _view(tmp_path, _gradient_norms(4, 60, faults=faults)).verdicts
    assert (verdicts["job/gradient_ranks"], verdicts["job/gradient_first_step"]) == ("2", 40)
    assert verdicts["job/gradient_named_steps/2"] == 1
    assert verdicts["job/gradient_fallout_ranks"] == "1"
    assert (verdicts["job/gradient_fallout_step/1"], verdicts["job/gradient_fallout_of/1"]) == (
        42,
        2,
    )
    [line] = [line for line in verdict_lines(verdicts) if line.startswith("gradient:")]
    assert line.endswith(
        "; its update moved every replica's norms, and rank 1 at step 42 stood apart after "
        "it (its fallout, not named)"
    )
    records = [record for record in records_from_verdicts(verdicts) if record["kind"] == "gradient"]
    assert [(r["ranks"], r["since_step"]) for r in records] == [([2], 40)]


def test_a_rank_named_at_many_steps_is_persistent_and_clean_norms_name_nobody(
    tmp_path: Path,
) -> None:
    for name in ("faulty", "clean", "plain"):
        (tmp_path / name).mkdir()
    faults = {(2, step, 0): 20.0 for step in range(30, 36)}
    verdicts = _view(tmp_path / "faulty", _gradient_norms(4, 60, faults=faults)).verdicts
    assert verdicts["job/gradient_ranks"] == "2"
    assert verdicts["job/gradient_named_steps/2"] == 6
    assert verdicts["job/gradient_persistent/2"] == 1
    [record] = [r for r in records_from_verdicts(verdicts) if r["kind"] == "gradient"]
    assert record["persistent"] is True and record["message"].endswith(
        "named at 6 steps, persistent"
    )
    clean = _view(tmp_path / "clean", _gradient_norms(4, 60)).verdicts
    assert (clean["job/gradient_check"], clean["job/gradient_ranks"]) == ("checked", "")
    assert "gradient: none (no rank's local gradient stood apart before the reduce)" in (
        verdict_lines(clean)
    )
    # A job without the probe says nothing of gradients.
    plain = _view(tmp_path / "plain", _job(3)).verdicts
    assert "job/gradient_check" not in plain
    assert not any(line.startswith("gradient") for line in verdict_lines(plain))
