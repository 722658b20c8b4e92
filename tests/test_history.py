"""History in conditions: ``prev`` and ``rolling`` over the key's preceding rows (computed per
key, carried across batches and snapshots), and aggregates over expressions."""
import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, last
from colcep import history as H
from colcep.expr import prev, rolling

# ----------------------------------------------------------------------------- the reference


def ref_history(node, keys, ts, x):
    """A history node's value at every row, by brute force per key in plain Python (sums left to
    right from 0.0, as documented; not Python's compensated ``sum``)."""
    n = len(keys)
    out = [math.nan] * n
    rows_of: dict = {}
    for i in range(n):
        rows_of.setdefault(keys[i], []).append(i)
    for idx in rows_of.values():
        for p, i in enumerate(idx):
            if node.op == "prev":
                k = node.args[1]
                out[i] = x[idx[p - k]] if p - k >= 0 else math.nan
                continue
            func, _, rows, within, cur = node.args
            hi = p if cur else p - 1
            lo = 0 if rows is None else max(0, hi - rows + 1)
            win = None if within is None else within_units(within)
            vals = [x[idx[j]] for j in range(lo, hi + 1)
                    if win is None or ts[i] - ts[idx[j]] < win]
            vals = [v for v in vals if not math.isnan(v)]
            s = 0.0
            for v in vals:
                s += v
            out[i] = {"sum": s, "count": float(len(vals)),
                      "mean": s / len(vals) if vals else math.nan,
                      "min": min(vals) if vals else math.nan,
                      "max": max(vals) if vals else math.nan}[func]
    return np.array(out, np.float64)


def within_units(w):  # the tests' time column is in ms
    if isinstance(w, int):
        return w
    if isinstance(w, dt.timedelta):
        return int(w.total_seconds() * 1000)
    digits = "".join(c for c in w if c.isdigit())
    return {"ms": 1, "s": 1000, "min": 60000}[w[len(digits):]] * int(digits)


NODES = [prev("x"), prev("x", 3), rolling("x", "sum", rows=3), rolling("x", "mean", rows=20),
         rolling("x", "mean", rows=2, include_current=True), rolling("x", "min", within=10),
         rolling("x", "max", within="7ms", include_current=True), rolling("x", "count", rows=4, within=6),
         rolling("x", "sum", within=1), rolling("x", "count", within=1, include_current=True),
         rolling("x", "max", rows=1), rolling("x", "mean", within=dt.timedelta(milliseconds=15))]


def _data(n, keys, seed, null_frac=0.2, step=4):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, keys, n)
    ts = np.cumsum(rng.integers(0, step, n)).astype(np.int64)        # ties: step 0
    x = np.round(rng.normal(10, 3, n), 2)
    x[rng.random(n) < null_frac] = np.nan
    return codes, ts, x


def _advance_in_pieces(nodes, codes, ts, x, cuts):
    p = H.plan(nodes)
    hist, parts, lo = None, [], 0
    n_keys = int(codes.max()) + 1 if len(codes) else 0
    for hi in list(cuts) + [len(codes)]:
        seen = int(codes[:hi].max()) + 1 if hi else 0     # keys appear as the stream reaches them
        hist, cols = H.advance(hist, p, {"x": x[lo:hi]}, codes[lo:hi], ts[lo:hi], max(seen, 0), "ms", {})
        parts.append(np.stack([cols[("history",) + e.key()] for e in nodes]) if nodes else None)
        lo = hi
    assert n_keys >= 0
    return np.concatenate(parts, axis=1)


# ----------------------------------------------------------------------------- the computation
def test_history_columns_equal_brute_force_per_key():
    codes, ts, x = _data(400, 5, 1)
    got = _advance_in_pieces(NODES, codes, ts, x, [])
    for i, e in enumerate(NODES):
        np.testing.assert_array_equal(got[i], ref_history(e, codes.tolist(), ts.tolist(), x.tolist()), err_msg=repr(e))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 120), keys=st.integers(1, 4),
       cuts=st.lists(st.integers(0, 120), max_size=6))
def test_any_split_gives_the_one_batch_result(seed, n, keys, cuts):
    codes, ts, x = _data(n, keys, seed, step=3)
    cuts = sorted(c for c in set(cuts) if c <= n)
    whole = _advance_in_pieces(NODES, codes, ts, x, [])
    split = _advance_in_pieces(NODES, codes, ts, x, cuts)
    np.testing.assert_array_equal(split, whole)
    for i, e in enumerate(NODES):
        np.testing.assert_array_equal(whole[i], ref_history(e, codes.tolist(), ts.tolist(), x.tolist()))


def test_first_rows_of_a_key_have_null_history_and_empty_sums_are_zero():
    codes = np.array([0, 1, 0, 1, 0])
    ts = np.array([1, 1, 2, 2, 3])
    x = np.array([1.0, 10.0, 2.0, np.nan, 4.0])
    nodes = [prev("x"), prev("x", 2), rolling("x", "mean", rows=5), rolling("x", "sum", rows=5),
             rolling("x", "count", rows=5), rolling("x", "min", rows=5, include_current=True)]
    got = _advance_in_pieces(nodes, codes, ts, x, [1, 2])
    nan = np.nan
    np.testing.assert_array_equal(got[0], [nan, nan, 1.0, 10.0, 2.0])
    np.testing.assert_array_equal(got[1], [nan, nan, nan, nan, 1.0])
    np.testing.assert_array_equal(got[2], [nan, nan, 1.0, 10.0, 1.5])
    np.testing.assert_array_equal(got[3], [0.0, 0.0, 1.0, 10.0, 3.0])
    np.testing.assert_array_equal(got[4], [0.0, 0.0, 1.0, 1.0, 2.0])
    np.testing.assert_array_equal(got[5], [1.0, 10.0, 1.0, 10.0, 1.0])   # the null row: the history's min


def test_time_windows_with_ties():
    """``within=w``: the earlier rows with ``t - w < time <= t``; a tie that came earlier is in,
    one that comes later is not (it has not happened yet), the row itself only with include_current."""
    codes = np.zeros(6, np.int64)
    ts = np.array([0, 5, 5, 5, 10, 15])
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    nodes = [rolling("x", "sum", within=5), rolling("x", "sum", within=5, include_current=True),
             rolling("x", "count", within=1), rolling("x", "sum", within=6)]
    got = _advance_in_pieces(nodes, codes, ts, x, [2, 3])
    np.testing.assert_array_equal(got[0], [0, 0, 2, 5, 0, 0])       # t=5: the t=0 row is 5 back: out
    np.testing.assert_array_equal(got[1], [1, 2, 5, 9, 5, 6])
    np.testing.assert_array_equal(got[2], [0, 0, 1, 2, 0, 0])
    np.testing.assert_array_equal(got[3], [0, 1, 3, 6, 9, 5])


def test_carried_rows_are_only_what_a_later_row_can_reach():
    codes = np.zeros(100, np.int64)
    ts = np.arange(100, dtype=np.int64) * 10
    x = np.arange(100, dtype=np.float64)
    p = H.plan([prev("x", 3), rolling("x", "mean", rows=5)])
    h, _ = H.advance(None, p, {"x": x}, codes, ts, 1, "ms", {})
    assert h.ts.shape[0] == 5 and list(h.vals[0]) == [95, 96, 97, 98, 99]
    p = H.plan([rolling("x", "mean", within=25, include_current=True)])
    h, _ = H.advance(None, p, {"x": x}, codes, ts, 1, "ms", {})
    assert list(h.ts) == [970, 980, 990]    # a later row at t >= 990 reaches back to > t - 25
    p = H.plan([rolling("x", "mean", rows=2, include_current=True), rolling("x", "sum", rows=50, within=15)])
    h, _ = H.advance(None, p, {"x": x}, codes, ts, 1, "ms", {})
    assert list(h.ts) == [980, 990]


def test_int64_extremes_in_time_windows():
    i64 = np.iinfo(np.int64)
    codes = np.zeros(4, np.int64)
    ts = np.array([i64.min, i64.min + 1, i64.max - 1, i64.max], np.int64)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    got = _advance_in_pieces([rolling("x", "sum", within=2)], codes, ts, x, [2])
    np.testing.assert_array_equal(got[0], [0, 1, 0, 3])
