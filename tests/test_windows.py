"""Window assigners and windowed aggregation against a plain-Python transcription of Flink's
assigners (TimeWindow, Tumbling/SlidingEventTimeWindows, mergeWindows, countWindow)."""
from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colcep.errors import InputError
from colcep.kernels import windows as kwin
from colcep.windows import (Count, Global, Session, Sliding, Tumbling, WindowAggregator, WindowSpecError, aggregate,
                            assign, ohlc)

SETTINGS = settings(max_examples=150, deadline=None)


# ------------------------------------------------------------------ Flink, transcribed
def java_rem(a: int, b: int) -> int:
    """Java's ``%`` on longs: truncated division, the sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
    """TimeWindow.getWindowStartWithOffset (Flink 1.17+)."""
    remainder = java_rem(timestamp - offset, window_size)
    if remainder < 0:
        return timestamp - (remainder + window_size)
    return timestamp - remainder


def flink_tumbling(ts: int, size: int, offset: int) -> list[tuple[int, int]]:
    """TumblingEventTimeWindows.assignWindows with the offset reduced as ``offset % size``."""
    start = get_window_start_with_offset(ts, java_rem(offset, size), size)
    return [(start, start + size)]


def flink_sliding(ts: int, size: int, slide: int, offset: int) -> list[tuple[int, int]]:
    """SlidingEventTimeWindows.of(size, slide, offset) (offset % slide) and assignWindows."""
    windows = []
    last_start = get_window_start_with_offset(ts, java_rem(offset, slide), slide)
    start = last_start
    while start > ts - size:
        windows.append((start, start + size))
        start -= slide
    return windows


def intersects(a, b) -> bool:
    return a[0] <= b[1] and a[1] >= b[0]


def cover(a, b):
    return (min(a[0], b[0]), max(a[1], b[1]))


def flink_merge(windows: list[tuple[int, int]]) -> list[tuple[tuple[int, int], list[int]]]:
    """TimeWindow.mergeWindows: sort by start (stable), fold with intersects / cover.
    Returns (merged window, indices of the windows it covers)."""
    order = sorted(range(len(windows)), key=lambda i: windows[i][0])
    merged, cur = [], None
    for i in order:
        cand = windows[i]
        if cur is None:
            cur = [cand, [i]]
        elif intersects(cur[0], cand):
            cur = [cover(cur[0], cand), cur[1] + [i]]
        else:
            merged.append(cur)
            cur = [cand, [i]]
    if cur is not None:
        merged.append(cur)
    return [(tuple(w), members) for w, members in merged]


def flink_count_windows(n: int, size: int, slide: int | None, partial: bool) -> list[list[int]]:
    """countWindow(size) = GlobalWindows + PurgingTrigger(CountTrigger(size));
    countWindow(size, slide) = GlobalWindows + CountEvictor(size) + CountTrigger(slide).
    Simulated row by row; returns the row indices of each firing."""
    purging = slide is None
    every = size if purging else slide
    state, count, fired = [], 0, []
    for i in range(n):
        state.append(i)
        count += 1
        if count >= every:  # CountTrigger.onElement
            count = 0
            if not purging:  # CountEvictor.evictBefore keeps the last `size`
                state = state[-size:]
            fired.append(list(state))
            if purging:
                state = []
    if partial and count > 0:
        if not purging:
            state = state[-size:]
        if state:
            fired.append(list(state))
    return fired


def reference_windows(rows: list[dict], window, key: str | None) -> list[tuple]:
    """Per input row: the list of (window id tuple) it belongs to, by Flink's rules.
    Window ids are (key, start, end) for time windows and (key, firing) for count / global."""
    by_key = defaultdict(list)
    for i, r in enumerate(rows):
        by_key[r[key] if key else None].append(i)
    out = [[] for _ in rows]
    for k, idx in by_key.items():
        if isinstance(window, Tumbling):
            for i in idx:
                out[i] = [(k, *w) for w in flink_tumbling(rows[i]["ts"], window.size, window.offset)]
        elif isinstance(window, Sliding):
            for i in idx:
                ws = flink_sliding(rows[i]["ts"], window.size, window.slide, window.offset)
                out[i] = [(k, *w) for w in sorted(ws)]
        elif isinstance(window, Session):
            wins = [(rows[i]["ts"], rows[i]["ts"] + (window.gap if window.gap is not None
                                                      else rows[i][window.gap_column])) for i in idx]
            for w, members in flink_merge(wins):
                for m in members:
                    out[idx[m]] = [(k, *w)]
        elif isinstance(window, Count):
            for f, members in enumerate(flink_count_windows(len(idx), window.size, window.slide, window.partial)):
                for m in members:
                    out[idx[m]].append((k, f))
        else:
            for i in idx:
                out[i] = [(k, 0)]
    return out


def reference_aggregate(rows: list[dict], window, key: str | None, col: str = "p") -> dict:
    """(window id) -> dict of count / sum / min / max / first / last / mean over non-null ``col``,
    first / last in time order (ties: input order; count windows: input order)."""
    wins = reference_windows(rows, window, key)
    members = defaultdict(list)
    for i, ws in enumerate(wins):
        for w in ws:
            members[w].append(i)
    out = {}
    for w, idx in members.items():
        if not isinstance(window, Count):
            idx = sorted(idx, key=lambda i: (rows[i]["ts"], i))
        vals = [rows[i][col] for i in idx if rows[i][col] is not None]
        out[w] = {"n": len(idx), "count": len(vals), "sum": sum(vals) if vals else 0,
                  "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                  "first": vals[0] if vals else None, "last": vals[-1] if vals else None,
                  "mean": sum(vals) / len(vals) if vals else None}
    return out


AGGS = {"n": "count", "count": ("p", "count"), "sum": ("p", "sum"), "min": ("p", "min"), "max": ("p", "max"),
        "first": ("p", "first"), "last": ("p", "last"), "mean": ("p", "mean")}


def table_of(rows: list[dict]) -> pa.Table:
    return pa.table({"k": pa.array([r["k"] for r in rows], pa.string()),
                     "ts": pa.array([r["ts"] for r in rows], pa.int64()),
                     "p": pa.array([r["p"] for r in rows], pa.int64()),
                     "g": pa.array([r["g"] for r in rows], pa.int64())})


def window_ids(out: pa.Table, window, key: str | None) -> list[tuple]:
    d = out.to_pydict()
    ks = d[key] if key else [None] * out.num_rows
    if "window_id" in d:
        return list(zip(ks, d["window_id"]))
    return list(zip(ks, d["window_start"], d["window_end"]))


# ------------------------------------------------------------------ strategies
row = st.fixed_dictionaries({"k": st.sampled_from(["a", "b", "c"]), "ts": st.integers(-60, 200),
                             "p": st.one_of(st.none(), st.integers(-50, 50)), "g": st.integers(1, 12)})
rows_st = st.lists(row, max_size=60)
time_windows = st.one_of(
    st.builds(Tumbling, st.integers(1, 25), st.integers(-60, 60)),
    st.builds(Sliding, st.integers(1, 25), st.integers(1, 25), st.integers(-60, 60)),
    st.builds(Session, st.integers(1, 15)),
    st.just(Session.dynamic("g")))
count_windows = st.one_of(st.builds(Count, st.integers(1, 6), st.none(), st.booleans()),
                          st.builds(Count, st.integers(1, 6), st.integers(1, 6), st.booleans()),
                          st.just(Global()))
any_window = st.one_of(time_windows, count_windows)
keys = st.sampled_from(["k", None])


# ------------------------------------------------------------------ assignment rule
@given(st.integers(-10**15, 10**15), st.integers(1, 10**6), st.integers(-3 * 10**6, 3 * 10**6))
@SETTINGS
def test_window_start_is_flinks(ts, size, offset):
    off = offset % size
    assert kwin.window_start(ts, off, size) == get_window_start_with_offset(ts, java_rem(offset, size), size)
    if ts - off + size >= 0:  # the older formula, as quoted in the seed
        assert kwin.window_start(ts, off, size) == ts - (ts - off + size) % size


@pytest.mark.parametrize("offset,expected", [
    (0, [(0, 3), (0, 3), (0, 3), (3, 6), (3, 6), (3, 6), (6, 9)]),
    (1, [(-2, 1), (1, 4), (1, 4), (1, 4), (4, 7), (4, 7), (4, 7)]),
    (4, [(-2, 1), (1, 4), (1, 4), (1, 4), (4, 7), (4, 7), (4, 7)]),
])
def test_seed_examples_size_3(offset, expected):
    """Seed 003: size 3 gives [0,3) [3,6) ...; offset 1 gives [1,4) [4,7) ...; offset 4 is
    offset 4 mod 3 = 1, the same grid ([4,7) ...)."""
    t = pa.table({"ts": pa.array(range(7), pa.int64())})
    out = assign(t, Tumbling(3, offset))
    assert list(zip(out["window_start"].to_pylist(), out["window_end"].to_pylist())) == expected


def test_seed_timestamp_example():
    """Seed: 1461756862000 with 3 s tumbling windows starts at a multiple of 3000."""
    t = pa.table({"ts": pa.array([1461756862000], pa.int64())})
    out = assign(t, Tumbling("3s"))
    assert out["window_start"].to_pylist() == [1461756861000]
    assert out["window_end"].to_pylist() == [1461756864000]


def test_negative_offset_for_local_days():
    """Flink's example: days in UTC+8 are Time.days(1) with offset Time.hours(-8)."""
    t = pa.table({"ts": pa.array([dt.datetime(2024, 3, 1, 17, 0), dt.datetime(2024, 3, 1, 15, 59)],
                                 pa.timestamp("ms"))})
    out = assign(t, Tumbling("1d", "-8h"), time="ts")
    assert out["window_start"].type == pa.timestamp("ms")
    assert out["window_start"].to_pylist() == [dt.datetime(2024, 3, 1, 16, 0), dt.datetime(2024, 2, 29, 16, 0)]


@given(rows_st, any_window, keys)
@SETTINGS
def test_assign_matches_flink(rows, window, key):
    out = assign(table_of(rows), window, key=key)
    ref = reference_windows(rows, window, key)
    expected_ids = [w for ws in ref for w in ws]
    expected_rows = [i for i, ws in enumerate(ref) for _ in ws]
    assert window_ids(out, window, key) == expected_ids
    assert out["ts"].to_pylist() == [rows[i]["ts"] for i in expected_rows]
    assert out["p"].to_pylist() == [rows[i]["p"] for i in expected_rows]


@given(rows_st, any_window, keys)
@SETTINGS
def test_aggregate_matches_flink(rows, window, key):
    out = aggregate(table_of(rows), window, AGGS, key=key)
    ref = reference_aggregate(rows, window, key)
    ids = window_ids(out, window, key)
    assert sorted(ids, key=repr) == sorted(ref, key=repr)
    assert len(set(ids)) == len(ids)
    d = out.to_pydict()
    for j, w in enumerate(ids):
        for name in ("n", "count", "sum", "min", "max", "first", "last"):
            assert d[name][j] == ref[w][name], (w, name)
        if ref[w]["mean"] is None:
            assert d["mean"][j] is None
        else:
            assert math.isclose(d["mean"][j], ref[w]["mean"])
    # windows come per key (first seen), then in start / firing order
    if key is not None and ids:
        first_seen = list(dict.fromkeys(r["k"] for r in rows))
        assert [first_seen.index(i[0]) for i in ids] == sorted(first_seen.index(i[0]) for i in ids)


@given(st.lists(st.integers(-100, 100), max_size=40), st.integers(1, 20), st.integers(1, 20),
       st.integers(-30, 30))
@SETTINGS
def test_sliding_kernel_row_local(ts, size, slide, offset):
    rows, starts = kwin.sliding_assign(np.array(ts, np.int64), size, slide, offset % slide)
    expected = [(i, s) for i, t in enumerate(ts) for s, _ in sorted(flink_sliding(t, size, slide, offset))]
    assert list(zip(rows.tolist(), starts.tolist())) == expected
    for t in ts:
        assert kwin.n_windows(t, size, slide, offset % slide) == len(flink_sliding(t, size, slide, offset))


def test_sliding_not_divisible_and_gaps():
    t = pa.table({"ts": pa.array([0, 1, 2, 3, 4, 5, 6], pa.int64())})
    out = assign(t, Sliding(5, 3))  # rows in 1 or 2 windows
    assert window_ids(out, None, None) == [
        (None, -3, 2), (None, 0, 5), (None, -3, 2), (None, 0, 5), (None, 0, 5), (None, 0, 5), (None, 3, 8),
        (None, 0, 5), (None, 3, 8), (None, 3, 8), (None, 3, 8), (None, 6, 11)]
    gaps = assign(t, Sliding(2, 5))  # slide > size: ts 2, 3, 4 fall between windows
    assert gaps["ts"].to_pylist() == [0, 1, 5, 6]


# ------------------------------------------------------------------ sessions
def test_session_chain_of_touching_windows_merges():
    t = pa.table({"ts": pa.array([0, 2, 4, 6, 9], pa.int64())})
    out = aggregate(t, Session(2), {"n": "count"})
    assert out.to_pydict() == {"window_start": [0, 9], "window_end": [8, 11], "n": [4, 1]}


def test_dynamic_session_cover_absorbs_later_windows():
    t = pa.table({"ts": pa.array([0, 3, 9, 10, 12], pa.int64()), "g": pa.array([10, 1, 1, 1, 1], pa.int64())})
    out = aggregate(t, Session.dynamic("g"), {"n": "count"})
    # [0,10) covers [3,4) and [9,10); [10,11) touches its end; [12,13) stands apart
    assert out.to_pydict() == {"window_start": [0, 12], "window_end": [11, 13], "n": [4, 1]}


def test_session_out_of_order_input_is_sorted_first():
    t = pa.table({"k": ["x", "x", "x"], "ts": pa.array([10, 0, 5], pa.int64())})
    out = assign(t, Session(5), key="k")
    assert out["window_start"].to_pylist() == [0, 0, 0]
    assert out["window_end"].to_pylist() == [15, 15, 15]


def test_dynamic_gap_must_be_positive():
    t = pa.table({"ts": pa.array([0, 1, 2, 3], pa.int64()), "g": pa.array([5, 5, 5, 0], pa.int64())})
    with pytest.raises(InputError, match=r"'g' at row 3 is 0.*0 < gap"):
        aggregate(t, Session.dynamic("g"), {"n": "count"})
    t2 = pa.table({"ts": pa.array([0, 1], pa.int64()), "g": pa.array([5, None], pa.int64())})
    with pytest.raises(InputError, match=r"'g' has a null at row 1"):
        assign(t2, Session.dynamic("g"))


def test_duration_gap_column():
    t = pa.table({"ts": pa.array([0, 1500, 5000], pa.timestamp("ms")),
                  "g": pa.array([2, 2, 2], pa.duration("s"))})
    out = aggregate(t, Session.dynamic("g"), {"n": "count"})
    assert out["n"].to_pylist() == [2, 1]
    assert out["window_end"].cast(pa.int64()).to_pylist() == [3500, 7000]


# ------------------------------------------------------------------ count windows
def test_count_windows_tumbling_and_sliding():
    t = pa.table({"ts": pa.array(range(7), pa.int64()), "p": pa.array(range(7), pa.int64())})
    tum = aggregate(t, Count(3), {"first": ("p", "first"), "last": ("p", "last")})
    assert tum.to_pydict() == {"window_id": [0, 1], "first": [0, 3], "last": [2, 5]}  # row 6 never fires
    part = aggregate(t, Count(3, partial=True), {"first": ("p", "first"), "n": "count"})
    assert part.to_pydict() == {"window_id": [0, 1, 2], "first": [0, 3, 6], "n": [3, 3, 1]}
    sl = aggregate(t, Count(4, 2), {"first": ("p", "first"), "n": "count"})
    assert sl.to_pydict() == {"window_id": [0, 1, 2], "first": [0, 0, 2], "n": [2, 4, 4]}  # evictor keeps 4


# ------------------------------------------------------------------ edge cases
@pytest.mark.parametrize("window", [Tumbling(5), Sliding(5, 2), Session(3), Session.dynamic("g"), Count(2),
                                    Count(3, 1, True), Global()])
def test_empty_input(window):
    t = table_of([])
    a = assign(t, window, key="k")
    assert a.num_rows == 0
    out = aggregate(t, window, AGGS, key="k")
    assert out.num_rows == 0
    assert out.schema.field("min").type == pa.int64() and out.schema.field("mean").type == pa.float64()
    non_empty = aggregate(table_of([{"k": "a", "ts": 1, "p": 2, "g": 1}] * 2), window, AGGS, key="k")
    assert out.schema == non_empty.schema


@pytest.mark.parametrize("window", [Tumbling(5), Sliding(5, 2), Session(3), Count(1), Global()])
def test_one_row(window):
    t = table_of([{"k": "a", "ts": 7, "p": 4, "g": 1}])
    out = aggregate(t, window, AGGS, key="k")
    assert out.num_rows >= 1
    assert set(out["first"].to_pylist()) == {4} and set(out["n"].to_pylist()) == {1}


def test_all_rows_in_one_window():
    rows = [{"k": "a", "ts": t, "p": t * 10, "g": 1} for t in range(100, 160)]
    out = ohlc(table_of(rows), Tumbling(1000), key="k", price="p", volume="g")
    assert out.to_pydict() == {"k": ["a"], "window_start": [0], "window_end": [1000], "open": [1000],
                               "high": [1590], "low": [1000], "close": [1590], "volume": [60], "count": [60]}


def test_ohlc_types_and_nan():
    t = pa.table({"ts": pa.array([0, 10, 20, 30], pa.timestamp("ms", tz="UTC")),
                  "price": pa.array([1.5, float("nan"), 0.5, 2.5]), "volume": pa.array([1, 2, 3, 4], pa.int32())})
    bars = ohlc(t, "1min")
    assert bars.schema.field("window_start").type == pa.timestamp("ms", tz="UTC")
    assert bars.schema.field("volume").type == pa.int64()
    assert bars.to_pydict()["low"] == [0.5] and bars.to_pydict()["high"] == [2.5]  # NaN never beats a number


def test_first_last_follow_time_not_input_order():
    t = pa.table({"ts": pa.array([5, 1, 3], pa.int64()), "p": pa.array([50, 10, 30], pa.int64())})
    out = aggregate(t, Tumbling(10), {"o": ("p", "first"), "c": ("p", "last")})
    assert out.to_pydict()["o"] == [10] and out.to_pydict()["c"] == [50]


# ------------------------------------------------------------------ errors
def test_spec_errors():
    with pytest.raises(WindowSpecError, match="size must be > 0"):
        Tumbling(0)
    with pytest.raises(WindowSpecError, match="slide must be > 0"):
        Sliding(10, -1)
    with pytest.raises(WindowSpecError, match="exactly one"):
        Session()
    with pytest.raises(WindowSpecError, match="positive int"):
        Count(0)
    with pytest.raises(WindowSpecError, match="invalid Tumbling size"):
        Tumbling("ten minutes")
    with pytest.raises(WindowSpecError, match="whole number"):
        assign(pa.table({"ts": pa.array([1], pa.timestamp("s"))}), Tumbling("1500ms"))
    with pytest.raises(WindowSpecError, match="unknown function 'median'"):
        aggregate(table_of([]), Tumbling(1), {"m": ("p", "median")})


def test_input_errors_name_column_and_row():
    t = pa.table({"k": ["a", None], "ts": pa.array([1, 2], pa.int64())})
    with pytest.raises(InputError, match=r"key column 'k' has a null at row 1"):
        assign(t, Tumbling(5), key="k")
    t = pa.table({"ts": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(InputError, match=r"time column 'ts' has a null at row 1"):
        aggregate(t, Tumbling(5), {"n": "count"})
    with pytest.raises(InputError, match="time column 'time' is missing"):
        assign(t, Tumbling(5), time="time")
    with pytest.raises(InputError, match="integer or timestamp column, not double"):
        assign(pa.table({"ts": [1.5]}), Tumbling(5))
    with pytest.raises(InputError, match=r"'s'.*sum needs a numeric"):
        aggregate(pa.table({"ts": pa.array([1], pa.int64()), "s": ["x"]}), Tumbling(5), {"x": ("s", "sum")})


# ------------------------------------------------------------------ streaming
def _reference_stream(batches: list[list[dict]], delay: int) -> tuple[list[dict], list[dict]]:
    """Flink's WindowOperator with BoundedOutOfOrderness(delay), watermark emitted after each
    batch, allowed lateness 0: (accepted rows, late rows)."""
    wm, max_ts, ok, late = None, None, [], []
    for b in batches:
        for r in b:
            (late if wm is not None and r["ts"] <= wm else ok).append(r)
            max_ts = r["ts"] if max_ts is None else max(max_ts, r["ts"])
        if max_ts is not None:
            wm = max_ts - delay - 1 if wm is None else max(wm, max_ts - delay - 1)
    return ok, late


@given(st.lists(rows_st, max_size=5), st.one_of(time_windows, count_windows), st.integers(0, 30), keys)
@SETTINGS
def test_streaming_matches_batch_and_reports_late_rows(batches, window, delay, key):
    agg = WindowAggregator(window, AGGS, key=key, out_of_orderness=delay)
    parts, late = [], []
    for b in batches:
        parts.append(agg.process(table_of(b)))
        lt = agg.pop_late()
        if lt is not None:
            late += lt.to_pylist()
    parts.append(agg.close())
    got = pa.concat_tables([p for p in parts if p.num_columns]) if any(p.num_columns for p in parts) else None
    if window.time_based:
        ok, ref_late = _reference_stream(batches, delay)
    else:
        ok, ref_late = [r for b in batches for r in b], []
    assert late == ref_late and agg.late_rows == len(ref_late)
    expected = aggregate(table_of(ok), window, AGGS, key=key)
    if got is None:
        assert expected.num_rows == 0
        return
    cols = expected.column_names
    assert sorted(map(repr, got.select(cols).to_pylist())) == sorted(map(repr, expected.to_pylist()))


def test_streaming_fires_when_watermark_passes_window_end():
    agg = WindowAggregator(Tumbling(10), {"n": "count"}, out_of_orderness=2)
    t = lambda *ts: pa.table({"ts": pa.array(ts, pa.int64())})  # noqa: E731
    assert agg.process(t(1, 5, 9)).num_rows == 0
    assert agg.watermark == 6
    assert agg.process(t(11)).num_rows == 0       # watermark 8: [0,10) needs 9
    out = agg.process(t(12, 9))                   # 9 is on time (watermark 8); watermark 9 fires [0,10)
    assert out.to_pydict() == {"window_start": [0], "window_end": [10], "n": [4]}
    agg.process(t(4))                             # late: its window has fired
    assert agg.late_rows == 1 and agg.pop_late()["ts"].to_pylist() == [4]
    assert agg.close().to_pydict() == {"window_start": [10], "window_end": [20], "n": [2]}


def test_streaming_watermark_saturates_at_the_int64_minimum():
    """``max ts - out_of_orderness - 1`` below the int64 range: the watermark stays at its
    minimum (no row is late, nothing fires) instead of leaving the range."""
    lo = np.iinfo(np.int64).min
    agg = WindowAggregator(Sliding(10, 5), {"n": "count"}, out_of_orderness=10_000)
    t = lambda *ts: pa.table({"ts": pa.array(ts, pa.int64())})  # noqa: E731
    assert agg.process(t(lo + 1003, lo + 1007)).num_rows == 0
    assert agg.process(t(lo + 1001)).num_rows == 0 and agg.late_rows == 0
    assert agg.watermark is None
    out = agg.close()
    assert sum(out.column("n").to_pylist()) == 6  # three rows, each in two sliding windows
