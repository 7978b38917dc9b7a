"""Partials as the tree merges them (docs/job-view.md, "Tree").

- a node merges its children one by one but combines them in one pass: the
  result equals one pass over every rank (JobStatistics) whatever the
  grouping, the order, the steps each rank has and the non-finite values,
  through the wire at every hop;
- many single-rank partials merged into one, combined in one pass when read, give
  numpy's mean and std and its nanmin/nanmax, NaN and inf included;
- a rank's own partial travels as its points only, and decodes to the very
  statistics it was built with; merged ones travel whole;
- the wire refuses steps out of order in any run, naming the tag.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.jobview import JobStatistics, RankSeries
from rankscribe.jobview.feed import (
    FINGERPRINT_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    STEP_TIME_TAG,
)
from rankscribe.jobview.protocol import JobPartial, PartialFormatError, TagStatistics
from tests._support.npz_files import read_archive, write_archive

_COLUMNS = (
    "steps",
    "count",
    "finite_mean",
    "m2",
    "minimum",
    "min_rank",
    "maximum",
    "max_rank",
    "nan",
    "posinf",
    "neginf",
)


def _same_float(got: float, want: float, scale: float) -> bool:
    if math.isnan(want) or math.isinf(want):
        return got == want or (math.isnan(got) and math.isnan(want))
    return got == pytest.approx(want, rel=1e-9, abs=1e-12 * scale + 1e-300)


def _assert_like_one_pass(got: JobPartial, whole: JobStatistics) -> None:
    assert sorted(got.tags) == sorted(whole.tags)
    for tag, want in whole.tags.items():
        have = got.tags[tag]
        assert have.steps.tolist() == want.steps.tolist()
        assert have.count.tolist() == want.count.tolist()
        assert have.nan.tolist() == want.nan.tolist()
        assert have.posinf.tolist() == want.posinf.tolist()
        assert have.neginf.tolist() == want.neginf.tolist()
        np.testing.assert_array_equal(have.minimum, want.minimum)  # NaN == NaN here
        np.testing.assert_array_equal(have.maximum, want.maximum)
        assert have.min_rank.tolist() == want.min_rank.tolist()
        assert have.max_rank.tolist() == want.max_rank.tolist()
        finite = np.abs(np.where(np.isfinite(want.minimum), want.minimum, 0.0))
        finite = np.maximum(finite, np.abs(np.where(np.isfinite(want.maximum), want.maximum, 0)))
        for name in ("mean", "std"):
            computed, expected = getattr(have, name), getattr(want, name)
            exact = ~np.isfinite(expected)  # NaN and inf: the same, NaN equal to NaN
            np.testing.assert_array_equal(computed[exact], expected[exact], err_msg=tag + name)
            error = np.abs(computed[~exact] - expected[~exact])
            bound = 1e-9 * np.abs(expected[~exact]) + 1e-12 * finite[~exact] + 1e-300
            if name == "std":
                # Squares of deviations under ~1e-154 are subnormal and keep few digits, in
                # any order of merging: the std is good to sqrt(count * smallest normal) there.
                tiny = np.finfo(np.float64).tiny
                bound = bound + np.sqrt(np.maximum(want.count[~exact], 1) * tiny)
            assert bool(np.all(error <= bound)), (tag, name)
    assert got.ranks == whole.ranks


def _wire(partial: JobPartial) -> JobPartial:
    return JobPartial.from_bytes(partial.to_bytes())


_value = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 1.0, -2.5, math.inf, -math.inf, math.nan]),
)
_rank_points = st.dictionaries(
    st.sampled_from(["a", "b", "loss/auto", STEP_TIME_TAG]),
    st.dictionaries(st.integers(0, 9), _value, min_size=1, max_size=8),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_rank_points, min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_a_tree_of_any_shape_gives_one_pass_statistics(
    ranks: list[dict[str, dict[int, float]]], shuffler: random.Random
) -> None:
    series = [{tag: sorted(points.items()) for tag, points in scalars.items()} for scalars in ranks]
    whole = JobStatistics()
    for rank, scalars in enumerate(series):
        whole.add(RankSeries(rank, scalars))
    nodes = [_wire(JobPartial.of_rank(rank, scalars)) for rank, scalars in enumerate(series)]
    shuffler.shuffle(nodes)
    while len(nodes) > 1:  # a random tree: a node takes a few others, one by one, via the wire
        parent = nodes.pop(shuffler.randrange(len(nodes)))
        for _ in range(min(len(nodes), shuffler.randint(1, 9))):
            parent.merge(_wire(nodes.pop(shuffler.randrange(len(nodes)))))
        nodes.append(_wire(parent) if shuffler.random() < 0.5 else parent)
    _assert_like_one_pass(nodes[0], whole)


@pytest.mark.parametrize(
    ("ranks", "last_step"),
    [(41, 30), (4, 60_000)],  # more parts, and more steps, than may wait to be combined
)
def test_more_than_may_wait_to_be_combined_still_merges_exactly(ranks: int, last_step: int) -> None:
    """The offline merge folds every rank into one partial: parts are combined on the way."""
    rng = np.random.default_rng(5)
    whole, merged = JobStatistics(), JobPartial()
    for rank in range(ranks):
        steps = np.arange(rank % 3, last_step, 1 + rank % 2)  # ranks at different steps
        values = rng.normal(size=len(steps)).tolist()
        points = {"x": list(zip(steps.tolist(), values, strict=True))}
        whole.add(RankSeries(rank, points))
        merged.merge(JobPartial.of_rank(rank, points))
    _assert_like_one_pass(merged, whole)


_any_values = st.lists(
    st.one_of(
        st.floats(-1e100, 1e100, allow_nan=False, allow_infinity=False),
        st.sampled_from([math.inf, -math.inf, math.nan, 0.0, 1.0]),
    ),
    min_size=1,
    max_size=12,
)


def merged_at_once(values: list[float]) -> TagStatistics:
    """One rank per value, merged into rank 0's partial one by one and combined when read
    (one vectorized pass over every part: merge_groups of job/_batch_merge.py)."""
    partial = JobPartial.of_rank(0, {"x": [(7, values[0])]})
    for rank, value in enumerate(values[1:], start=1):
        partial.merge(JobPartial.of_rank(rank, {"x": [(7, value)]}))
    return partial.tags["x"]


@given(_any_values)
def test_merge_all_at_once_matches_numpy(values: list[float]) -> None:
    merged = merged_at_once(values)
    array = np.array(values)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = [np.mean(array), np.std(array), np.nanmin(array), np.nanmax(array)]
    got = [merged.mean[0], merged.std[0], merged.minimum[0], merged.maximum[0]]
    finite = array[np.isfinite(array)]
    scale = float(np.abs(finite).max()) if len(finite) else 0.0
    assert all(
        _same_float(float(a), float(b), scale) for a, b in zip(got, expected, strict=True)
    ), (values, got, expected)
    assert merged.count[0] == len(values)
    # Ties and NaN: the lowest rank holding the extreme (NaN only when every value is NaN).
    if not np.isnan(expected[2]):
        assert merged.min_rank[0] == int(np.flatnonzero(array == expected[2])[0])
        assert merged.max_rank[0] == int(np.flatnonzero(array == expected[3])[0])


@pytest.mark.parametrize(
    ("values", "mean", "std"),
    [
        ([math.inf, 1.0], math.inf, math.nan),
        ([math.nan], math.nan, math.nan),
        ([math.inf, -math.inf], math.nan, math.nan),
        ([2.0, 4.0], 3.0, 1.0),
    ],
)
def test_merge_all_decides_numpys_cases(values: list[float], mean: float, std: float) -> None:
    merged = merged_at_once(values)
    assert _same_float(float(merged.mean[0]), mean, 0.0)
    assert _same_float(float(merged.std[0]), std, 0.0)


def _header(data: bytes) -> dict[str, Any]:
    header: dict[str, Any] = read_archive(data)[0]
    return header


def test_a_ranks_own_partial_travels_as_its_points_and_decodes_to_the_same_statistics() -> None:
    points = {
        "loss/auto": [(1, 0.5), (2, math.nan), (3, math.inf)],
        "acc": [(1, 0.1), (2, 0.2), (3, 0.3)],
        "lr": [(2, 1e-3)],
    }
    own = JobPartial.of_rank(4, points)
    data = own.to_bytes()
    assert sorted(tag for tag, _, _ in _header(data)["one_rank"]) == ["acc", "loss/auto", "lr"]
    assert _header(data)["tags"] == []
    decoded = JobPartial.from_bytes(data)
    for tag, statistics in own.tags.items():
        for column in _COLUMNS:
            np.testing.assert_array_equal(
                getattr(decoded.tags[tag], column), getattr(statistics, column), err_msg=tag
            )
    # Merged with another rank, the statistics are no single rank's: they travel whole.
    decoded.merge(JobPartial.of_rank(5, {"acc": [(1, 0.4)]}))
    merged = decoded.to_bytes()
    assert [tag for tag, _ in _header(merged)["tags"]] == ["acc"]
    again = JobPartial.from_bytes(merged)
    assert again.tags["acc"].count.tolist() == [2, 1, 1]
    assert again.tags["acc"].max_rank.tolist() == [5, 4, 4]
    assert len(data) < len(merged)


def test_ranks_that_share_their_steps_send_them_once() -> None:
    # A subtree's step times, every rank at steps 11-310: the steps travel once, the
    # values once per rank (what rank 0 receives at 16,384 ranks is half as large).
    steps = np.arange(11, 311, dtype=np.int64)
    merged = JobPartial.of_rank(1, {STEP_TIME_TAG: (steps, np.full(300, 0.1))})
    for rank in range(2, 9):
        merged.merge(JobPartial.of_rank(rank, {STEP_TIME_TAG: (steps, np.full(300, 0.1 * rank))}))
    data = merged.to_bytes()
    header, (ints, floats, _) = read_archive(data)
    assert [(tag, counts) for tag, _, counts in header["per_rank"]] == [(STEP_TIME_TAG, 300)]
    whole = sum(count for _, count in header["tags"])  # the step time's statistics, 7 + 4 rows
    assert (len(ints), len(floats)) == (7 * whole + 300, 4 * whole + 8 * 300)
    decoded = JobPartial.from_bytes(data)
    for rank in range(1, 9):
        got_steps, got_values = decoded.per_rank[STEP_TIME_TAG][rank]
        assert got_steps.tolist() == steps.tolist()
        assert got_values.tolist() == [0.1 * rank] * 300
    # A rank at other steps (rank 9 missed the last one): each rank sends its own.
    decoded.merge(JobPartial.of_rank(9, {STEP_TIME_TAG: (steps[:-1], np.full(299, 0.9))}))
    header, _ = read_archive(decoded.to_bytes())
    assert [counts for _, _, counts in header["per_rank"]] == [[300] * 8 + [299]]
    again = JobPartial.from_bytes(decoded.to_bytes())
    assert again.per_rank[STEP_TIME_TAG][9][0].tolist() == steps[:-1].tolist()
    assert again.per_rank[STEP_TIME_TAG][8][1].tolist() == [0.8] * 300


def _fingerprints(ranks: range, values: Any) -> JobPartial:
    """A subtree's fingerprints at steps 11-310, each rank's own message merged in."""
    steps = np.arange(11, 311, dtype=np.int64)
    merged = JobPartial()
    for rank in ranks:
        own = JobPartial.of_rank(rank, {FINGERPRINT_TAG: (steps, np.array(values(rank)))})
        merged.merge(JobPartial.from_bytes(own.to_bytes()))
    return merged


def test_ranks_that_share_their_fingerprint_send_it_once() -> None:
    # Data parallel: every rank holds the same parameters, so the same fingerprint at every
    # step; the steps and the values travel once (a 16,384-rank job's fingerprints are not
    # 16,384 copies of one series at rank 0), and every rank decodes to them.
    same = _fingerprints(range(1, 9), lambda rank: np.arange(300.0) % 7)
    data = same.to_bytes()
    header, (ints, floats, _) = read_archive(data)
    assert [entry[2:] for entry in header["per_rank"]] == [[300, "same_values"]]
    whole = sum(count for _, count in header["tags"])
    assert (len(ints), len(floats)) == (7 * whole + 300, 4 * whole + 300)
    decoded = JobPartial.from_bytes(data)
    pairs = decoded.per_rank[FINGERPRINT_TAG]
    assert sorted(pairs) == list(range(1, 9))
    assert len({(id(steps), id(values)) for steps, values in pairs.values()}) == 1
    assert pairs[5][0].tolist() == list(range(11, 311))
    assert pairs[5][1].tolist() == (np.arange(300.0) % 7).tolist()
    # One rank's fingerprint differs at one step: every rank's values travel.
    one_off = _fingerprints(
        range(1, 9), lambda rank: np.where(np.arange(300) == 40, rank == 4, 0.0) + 1.0
    )
    header, _ = read_archive(one_off.to_bytes())
    assert [entry[2:] for entry in header["per_rank"]] == [[300]]
    decoded = JobPartial.from_bytes(one_off.to_bytes())
    assert decoded.per_rank[FINGERPRINT_TAG][4][1][40] == 2.0
    assert decoded.per_rank[FINGERPRINT_TAG][3][1][40] == 1.0


def test_shared_points_stay_shared_through_merges_and_cuts() -> None:
    first = JobPartial.from_bytes(_fingerprints(range(1, 9), lambda rank: [1.0] * 300).to_bytes())
    later = _fingerprints(range(1, 9), lambda rank: [2.0] * 300)
    for rank in range(1, 9):  # the same ranks' next interval (steps 311-610)
        steps, values = later.per_rank[FINGERPRINT_TAG][rank]
        later.per_rank[FINGERPRINT_TAG][rank] = (steps + 300, values)
    first.merge(JobPartial.from_bytes(later.to_bytes()))
    pairs = first.per_rank[FINGERPRINT_TAG]
    assert len({(id(steps), id(values)) for steps, values in pairs.values()}) == 1
    assert pairs[3][0].tolist() == list(range(11, 611))
    assert pairs[3][1].tolist() == [1.0] * 300 + [2.0] * 300
    upto, after = first.split(400)
    for part, want_steps, want_values in (
        (upto, range(11, 401), [1.0] * 300 + [2.0] * 90),
        (after, range(401, 611), [2.0] * 210),
    ):
        pairs = part.per_rank[FINGERPRINT_TAG]
        assert sorted(pairs) == list(range(1, 9))
        assert len({(id(s), id(v)) for s, v in pairs.values()}) == 1
        assert (pairs[8][0].tolist(), pairs[8][1].tolist()) == (list(want_steps), want_values)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        (lambda tag, ranks: [tag, ranks, 300, "other"], "marked 'other', not 'same_values'"),
        (lambda tag, ranks: [tag, ranks, [300] * len(ranks), "same_values"], "one length only"),
        (lambda tag, ranks: [tag, ranks], "must be \\[tag, ranks, lengths\\]"),
    ],
)
def test_a_forged_shared_values_entry_is_refused(entry: Any, match: str) -> None:
    header, arrays = read_archive(_fingerprints(range(1, 4), lambda rank: [1.0] * 300).to_bytes())
    [(tag, ranks, _, _)] = header["per_rank"]
    header["per_rank"] = [entry(tag, ranks)]
    with pytest.raises(PartialFormatError, match=match):
        JobPartial.from_bytes(write_archive(header, arrays))


@pytest.mark.parametrize(
    ("forge", "match"),
    [
        # The per-rank entry's ranks, read at once where they are plain ints in range.
        (lambda header: header["per_rank"][0][1].__setitem__(1, True), "a rank must be an int"),
        (lambda header: header["per_rank"][0][1].__setitem__(2, 2**62), "got 4611686018427387904"),
        (lambda header: header["per_rank"][0][1].__setitem__(0, -2), "a rank must be an int"),
        (lambda header: header["per_rank"][0][1].__setitem__(0, "1"), "got '1'"),
        # Each rank's last step: [rank, step] pairs.
        (lambda header: header["last_steps"][1].__setitem__(1, 2.5), "a step must be an int"),
        (lambda header: header["last_steps"][2].__setitem__(0, False), "a rank must be an int"),
        (lambda header: header["last_steps"].append([4]), "malformed"),
        (lambda header: header["last_steps"].append([4, 5, 6]), "malformed"),
        (lambda header: header.__setitem__("last_steps", None), "malformed"),
        (lambda header: header.__setitem__("last_steps", ["ab"]), "must be an int, got '[ab]'"),
    ],
)
def test_a_rank_or_step_that_is_no_int_in_range_is_refused_wherever_the_header_names_it(
    forge: Any, match: str
) -> None:
    header, arrays = read_archive(_fingerprints(range(1, 4), lambda rank: [1.0] * 300).to_bytes())
    assert [rank for rank, _ in header["last_steps"]] == [1, 2, 3]
    forge(header)
    with pytest.raises(PartialFormatError, match=match):
        JobPartial.from_bytes(write_archive(header, arrays))


def test_timings_that_are_float32_travel_and_are_held_as_float32() -> None:
    # A rank reads its timings from its summary files, whose scalars are float32: they
    # travel in the float32 block, half the bytes, and decode to the same numbers.
    steps = np.arange(1, 301, dtype=np.int64)
    rng = np.random.default_rng(5)
    times = rng.lognormal(-4, 0.1, (8, 300)).astype(np.float32).astype(np.float64)
    merged = JobPartial()
    for rank in range(8):
        points = {STEP_TIME_TAG: (steps, times[rank]), "loss": (steps, times[rank] * 2)}
        merged.merge(JobPartial.from_bytes(JobPartial.of_rank(rank, points).to_bytes()))
    data = merged.to_bytes()
    header, (ints, floats, narrow) = read_archive(data)
    assert [entry[2:] for entry in header["per_rank"]] == [[300, "float32"]]
    whole = sum(count for _, count in header["tags"])  # the step time's and loss's statistics
    assert (len(ints), len(floats), len(narrow)) == (7 * whole + 300, 4 * whole, 8 * 300)
    decoded = JobPartial.from_bytes(data).per_rank[STEP_TIME_TAG]
    for rank in range(8):
        assert decoded[rank][1].dtype == np.float32
        assert decoded[rank][1].tolist() == times[rank].tolist()
    # The same ranks' next round merged in before a write (several rounds an interval):
    # appended as they came, still float32.
    held = JobPartial.from_bytes(data)
    later = JobPartial.from_bytes(data)
    for rank, (rank_steps, values) in later.per_rank[STEP_TIME_TAG].items():
        later.per_rank[STEP_TIME_TAG][rank] = (rank_steps + 300, values)
    held.merge(later)
    both = held.per_rank[STEP_TIME_TAG][5]
    assert both[1].dtype == np.float32
    assert both[0].tolist() == list(range(1, 601))
    assert both[1].tolist() == times[5].tolist() * 2
    # One value a float32 does not hold: the timing goes as float64, exactly.
    merged.per_rank[STEP_TIME_TAG][3] = (steps, times[3] + 1e-12)
    header, (_, _, narrow) = read_archive(merged.to_bytes())
    assert [entry[2:] for entry in header["per_rank"]] == [[300]] and len(narrow) == 0
    again = JobPartial.from_bytes(merged.to_bytes()).per_rank[STEP_TIME_TAG]
    assert again[3][1].dtype == np.float64 and again[3][1].tolist() == (times[3] + 1e-12).tolist()


def test_a_gradient_probes_norms_and_peaks_that_are_float32_travel_as_float32() -> None:
    # A DDP probe's 2 tags a bucket outnumber the timings: read from the summary files,
    # their values are float32 numbers, and travel as the timings' do.
    steps = np.arange(1, 101, dtype=np.int64)
    rng = np.random.default_rng(6)
    norms = np.exp(rng.normal(0, 0.05, (4, 100))).astype(np.float32).astype(np.float64)
    norm_tag, peak_tag = f"{GRADIENT_NORM_TAG_PREFIX}0", f"{GRADIENT_PEAK_TAG_PREFIX}0"
    merged = JobPartial()
    for rank in range(4):
        points = {norm_tag: (steps, norms[rank]), peak_tag: (steps, norms[rank] / 8)}
        merged.merge(JobPartial.from_bytes(JobPartial.of_rank(rank, points).to_bytes()))
    header, (_, _, narrow) = read_archive(merged.to_bytes())
    assert sorted(entry[0] for entry in header["per_rank"] if entry[3:] == ["float32"]) == [
        norm_tag,
        peak_tag,
    ]
    assert len(narrow) == 2 * 4 * 100
    decoded = JobPartial.from_bytes(merged.to_bytes()).per_rank
    for rank in range(4):
        assert decoded[norm_tag][rank][1].dtype == np.float32
        assert decoded[norm_tag][rank][1].tolist() == norms[rank].tolist()
        assert decoded[peak_tag][rank][1].tolist() == (norms[rank] / 8).tolist()


def test_only_a_timing_or_a_gradient_tag_travels_as_float32() -> None:
    own = JobPartial.of_rank(1, {FINGERPRINT_TAG: [(1, 1.0), (2, 2.0)]})
    header, arrays = read_archive(own.to_bytes())
    [entry] = header["per_rank"]
    assert len(entry) == 3  # the fingerprint's values are read as float64
    header["per_rank"] = [[*entry, "float32"]]
    narrow = arrays[1][-2:].astype(np.float32)
    forged = write_archive(header, [arrays[0], arrays[1][:-2], narrow])
    with pytest.raises(
        PartialFormatError,
        match="only a timing's or a gradient tag's values travel as float32, not "
        "'rankscribe/param_fingerprint''s",
    ):
        JobPartial.from_bytes(forged)


def _message_with_steps_out_of_order(kind: str) -> bytes:
    own = JobPartial.of_rank(1, {"loss": [(1, 1.0), (2, 2.0)], STEP_TIME_TAG: [(1, 0.1), (2, 0.2)]})
    if kind == "tags":
        own.merge(JobPartial.of_rank(2, {"loss": [(1, 3.0)]}))  # loss travels whole
    header, (ints, floats, narrow) = read_archive(own.to_bytes())
    # The int array: the whole tags' columns (steps first), then the one-rank tags' steps
    # (loss, step time), then the per-rank steps (step time).
    first = {"tags": 0, "one_rank": 0, "per_rank": 4}[kind]
    ints[first + 1] = 1  # steps 1, 1
    return write_archive(header, [ints, floats, narrow])


@pytest.mark.parametrize(
    ("kind", "tag"),
    [("tags", "loss"), ("one_rank", "loss"), ("per_rank", STEP_TIME_TAG)],
)
def test_steps_out_of_order_are_refused_naming_the_tag(kind: str, tag: str) -> None:
    with pytest.raises(PartialFormatError, match="not ascending") as caught:
        JobPartial.from_bytes(_message_with_steps_out_of_order(kind))
    assert repr(tag) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_header_that_names_other_arrays_than_the_message_holds_is_refused() -> None:
    data = JobPartial.of_rank(0, {"a": [(1, 1.0), (2, 2.0)]}).to_bytes()
    header, arrays = read_archive(data)
    header["one_rank"][0][2] = 3
    forged = write_archive(header, arrays)
    with pytest.raises(PartialFormatError, match="the header names arrays of"):
        JobPartial.from_bytes(forged)


@pytest.mark.parametrize(
    "steps_of",
    [
        lambda tag: np.arange(1, 6),  # every tag at the same steps (computed together)
        lambda tag: np.array([3, 1, 2, 2, 5]),  # unsorted, a repeated step: the last value wins
        lambda tag: np.arange(1, 6) * (2 if tag == "b" else 1),  # tags at other steps
    ],
)
def test_a_ranks_arrays_give_what_its_points_give(steps_of: object) -> None:
    rng = np.random.default_rng(3)
    arrays = {}
    for tag in ("a", "b", "loss/auto", STEP_TIME_TAG):
        values = rng.normal(size=5)
        values[4] = math.nan if tag == "loss/auto" else values[4]
        arrays[tag] = (steps_of(tag), values)  # type: ignore[operator]
    from_arrays = JobPartial.of_rank(2, arrays)
    from_points = JobPartial.of_rank(
        2, {tag: list(zip(s.tolist(), v.tolist(), strict=True)) for tag, (s, v) in arrays.items()}
    )
    assert sorted(from_arrays.tags) == sorted(from_points.tags)
    for tag, want in from_points.tags.items():
        for column in _COLUMNS:
            np.testing.assert_array_equal(
                getattr(from_arrays.tags[tag], column), getattr(want, column)
            )
    assert from_arrays.nonfinite_loss == from_points.nonfinite_loss == {2: 5}
    got_steps, got_values = from_arrays.per_rank[STEP_TIME_TAG][2]
    want_steps, want_values = from_points.per_rank[STEP_TIME_TAG][2]
    assert got_steps.tolist() == want_steps.tolist()
    assert got_values.tolist() == want_values.tolist()


def test_a_ranks_partial_holds_what_tag_statistics_of_rank_gives() -> None:
    """The tags built together equal the one-tag builder, inf and NaN included."""
    steps = np.arange(1, 7)
    values = {
        "a": np.array([1.0, math.inf, -math.inf, math.nan, -0.0, 2.5]),
        "b": np.array([3.0, 2.0, 1.0, 0.0, -1.0, -2.0]),
    }
    partial = JobPartial.of_rank(9, {tag: (steps, column) for tag, column in values.items()})
    for tag, column in values.items():
        want = TagStatistics.of_rank(9, steps, column)
        for name in _COLUMNS:
            np.testing.assert_array_equal(
                getattr(partial.tags[tag], name), getattr(want, name), err_msg=f"{tag} {name}"
            )
