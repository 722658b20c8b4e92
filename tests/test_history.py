"""History in conditions: ``prev`` and ``rolling`` over the key's preceding rows (computed per
key, carried across batches and snapshots), and aggregates over expressions."""
import functools
import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, last
from colcep.engine import history as H
from colcep.expr import prev, rolling
from spark_settings import BATCH_ROWS

sql_cep = functools.partial(cc.sql, semantics="cep")  # colcep.sql's CEP-style mode (the default is "standard")

# ----------------------------------------------------------------------------- the reference


def ref_history(node, keys, ts, x):
    """A history node's value at every row, by brute force per key in plain Python (sums left to
    right from 0.0: the kernel's own order for windows within two blocks of 32 rows; longer ones
    it sums through block sums, which agrees to rounding, see ``assert_ref``)."""
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


def assert_ref(got, node, keys, ts, x):
    """``got`` is the brute-force value: exactly, except sums and means over long windows (the
    kernel adds precomputed block sums there), to 1e-12 relative."""
    want = ref_history(node, list(keys), list(ts), list(x))
    if node.op == "roll" and node.args[0] in ("sum", "mean"):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9, err_msg=repr(node))
    else:
        np.testing.assert_array_equal(got, want, err_msg=repr(node))


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
         rolling("x", "max", rows=1), rolling("x", "mean", within=dt.timedelta(milliseconds=15)),
         rolling("x", "sum", rows=100), rolling("x", "mean", within=200, include_current=True),
         rolling("x", "min", within=300), rolling("x", "max", rows=70, within=150),
         rolling("x", "count", within=250)]     # long windows: whole blocks of 32 rows inside


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
        assert_ref(got[i], e, codes.tolist(), ts.tolist(), x.tolist())


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 300), keys=st.integers(1, 3),
       cuts=st.lists(st.integers(0, 300), max_size=6))
def test_any_split_gives_the_one_batch_result(seed, n, keys, cuts):
    codes, ts, x = _data(n, keys, seed, step=3)
    cuts = sorted(c for c in set(cuts) if c <= n)
    whole = _advance_in_pieces(NODES, codes, ts, x, [])
    split = _advance_in_pieces(NODES, codes, ts, x, cuts)
    np.testing.assert_array_equal(split, whole)
    for i, e in enumerate(NODES):
        assert_ref(whole[i], e, codes.tolist(), ts.tolist(), x.tolist())


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
    assert h.ts.shape[0] == 5 and list(h.vals[0]) == [95, 96, 97, 98, 99] and list(h.count) == [100]
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


# ----------------------------------------------------------------------------- in the Matcher
def _ticks(n=600, keys=4, seed=3, null_frac=0.1, min_step=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, keys, n)
    price = np.round(10 + np.cumsum(rng.normal(0, 0.3, n)), 2)
    price[rng.random(n) < null_frac] = np.nan
    return pa.table({"sym": pa.array([f"S{c}" for c in codes]),
                     "ts": pa.array(np.cumsum(rng.integers(min_step, 30, n)), pa.int64()),
                     "price": pa.array(price, mask=np.isnan(price) & (rng.random(n) < 0.5)),  # nulls and NaN
                     "volume": pa.array(rng.integers(1, 1000, n).astype(np.float64))})


def _with_reference(tbl, nodes, column="price"):
    """The table with each node's brute-force value as a column ``ref<i>``."""
    keys = tbl.column("sym").to_pylist()
    ts = tbl.column("ts").to_pylist()
    x = [math.nan if v is None else v for v in tbl.column(column).to_pylist()]
    for i, e in enumerate(nodes):
        tbl = tbl.append_column(f"ref{i}", pa.array(ref_history(e, keys, ts, x)))
    return tbl


def _feed(m, tbl, cuts):
    parts, lo = [], 0
    for hi in list(cuts) + [tbl.num_rows]:
        parts.append(m.process(tbl.slice(lo, hi - lo)))
        lo = hi
    parts.append(m.close())
    return pa.concat_tables(parts)


def _rise(a_cond, b_cond):
    return (cc.Pattern.begin("a").where(a_cond)
            .followed_by("b").where(b_cond).one_or_more()
            .followed_by("c").where(col("price") < last("price", of="b"))
            .within(300).skip(cc.SkipPastLastEvent()))


HIST = [rolling("price", "mean", rows=5), rolling("price", "max", within=100, include_current=True),
        prev("price", 2)]


def _pattern_pair():
    """The same pattern twice: over history nodes, and over their brute-force columns."""
    h = _rise((col("price") > HIST[0]) & (HIST[1] - col("price") < 0.5),
              (col("price") > last("price", of=["a", "b"])) & (HIST[2] < col("price")))
    r = _rise((col("price") > col("ref0")) & (col("ref1") - col("price") < 0.5),
              (col("price") > last("price", of=["a", "b"])) & (col("ref2") < col("price")))
    return h, r


@pytest.mark.parametrize("cuts", [[], [1, 2, 3, 50, 51, 300], list(range(7, 600, 7))])
def test_matcher_history_equals_precomputed_columns_under_any_split(cuts):
    tbl = _with_reference(_ticks(), HIST)
    h, r = _pattern_pair()
    cols = ["ts", "price"]
    expected = cc.match(tbl, r, key="sym", columns=cols)
    assert expected.num_rows > 20
    got = _feed(cc.Matcher(h, key="sym", columns=cols), tbl, cuts)
    assert got.equals(expected)


def test_snapshot_restore_at_every_boundary_carries_the_history():
    tbl = _with_reference(_ticks(250), HIST)
    h, r = _pattern_pair()
    expected = cc.match(tbl, r, key="sym", columns=["price"], timeouts=True)
    prog = cc.compile(h)
    m = cc.Matcher(prog, key="sym", columns=["price"], timeouts=True)
    parts = []
    for i in range(tbl.num_rows):
        parts.append(m.process(tbl.slice(i, 1)))
        m = cc.Matcher.restore(prog, m.snapshot())
    parts.append(m.close())
    got = pa.concat_tables(parts)
    assert expected.num_rows > 10 and got.equals(expected)


def test_snapshot_of_some_keys_carries_their_history_only():
    tbl = _ticks(300)
    p = cc.Pattern.begin("a").where(col("price") > rolling("price", "mean", rows=3) + 0.2)
    m = cc.Matcher(p, key="sym", columns=["price"])
    m.process(tbl.slice(0, 200))
    part = cc.Matcher.restore(p, m.snapshot(keys=["S1"]))
    hist = part._state.history
    assert hist.ptr.tolist() == [0, 3] and hist.ts.shape == (3,)
    rest = tbl.slice(200).filter(pa.compute.equal(tbl.slice(200).column("sym"), "S1"))
    whole = m.process(rest)
    assert part.process(rest).equals(whole)


def test_a_failed_batch_leaves_the_history_as_it_was():
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") >= prev("price")).one_or_more().allow_combinations()
         .followed_by("c").where(col("price") < rolling("price", "min", rows=3)))
    tbl = pa.table({"ts": pa.array(range(14), pa.int64()), "price": pa.array([1.0] * 10 + [-1.0] * 4)})
    m = cc.Matcher(p, time="ts", columns=[], max_partial_matches=20, timeouts=True)
    out1 = m.process(tbl.slice(0, 3))
    before, snap = m._state.history, m.snapshot()
    with pytest.raises(cc.CapacityError):
        m.process(tbl.slice(3))
    assert m._state.history is before and m.snapshot() == snap
    m.max_partial_matches = 10**6
    rest = pa.concat_tables([m.process(tbl.slice(3)), m.close()])
    want = cc.Matcher(p, time="ts", columns=[], timeouts=True)
    expected = pa.concat_tables([want.process(tbl), want.close()])
    assert pa.concat_tables([out1, rest]).equals(expected) and expected.num_rows > 0


def test_restore_refuses_a_history_that_does_not_fit():
    p = cc.Pattern.begin("a").where(col("price") > prev("price"))
    m = cc.Matcher(p, key="sym")
    m.process(_ticks(50))
    data = m.snapshot()
    other = cc.Pattern.begin("a").where(col("price") > prev("price", 2))
    with pytest.raises(cc.SnapshotError):
        cc.Matcher.restore(other, data)            # another program: the fingerprint differs
    assert cc.Matcher.restore(p, data)._state.history.ts.shape[0] == 4


def test_price_above_the_mean_of_the_previous_20_ticks_vs_pandas():
    pd = pytest.importorskip("pandas")
    tbl = _ticks(2000, keys=5, null_frac=0)
    p = cc.Pattern.begin("up").where(col("price") > rolling("price", "mean", rows=20))
    out = cc.match(tbl, p, key="sym", columns=["price"])
    df = tbl.to_pandas()
    mean20 = df.groupby("sym")["price"].transform(lambda s: s.shift(1).rolling(20, min_periods=1).mean())
    want = np.flatnonzero((df["price"] > mean20).to_numpy())
    np.testing.assert_array_equal(np.sort(out.column("row").to_numpy()), want)


def test_volume_3x_the_mean_of_the_last_minute_on_a_timestamp_column():
    pd = pytest.importorskip("pandas")
    tbl = _ticks(1500, keys=3, null_frac=0)
    tbl = tbl.set_column(1, "ts", tbl.column("ts").cast(pa.timestamp("ms")))
    p = cc.Pattern.begin("spike").where(col("volume") > 1.5 * rolling("volume", "mean", within="1s"))
    out = cc.match(tbl, p, key="sym", columns=[])
    df = tbl.to_pandas().set_index("ts")
    rows = []
    for _, g in df.assign(i=np.arange(len(df))).groupby("sym"):
        s, c = g["volume"].rolling("1s").sum(), g["volume"].rolling("1s").count()
        mean_before = (s - g["volume"]) / (c - 1)       # the window without the current row
        rows += g["i"][(g["volume"] > 1.5 * mean_before) & (c > 1)].tolist()
    np.testing.assert_array_equal(np.sort(out.column("row").to_numpy()), np.sort(rows))


def test_event_time_history_follows_time_order():
    tbl = _with_reference(_ticks(400, null_frac=0, min_step=1), HIST)   # no ties: (time, arrival) = input order
    h, r = _pattern_pair()
    expected = cc.match(tbl, r, key="sym", columns=["ts"])
    rng = np.random.default_rng(5)
    ts = tbl.column("ts").to_numpy()
    jitter = np.argsort(ts + rng.integers(0, 20, len(ts)), kind="stable")   # out of order by < 20
    shuffled = tbl.take(pa.array(jitter))
    m = cc.Matcher(h, key="sym", columns=["ts"], out_of_orderness=40)
    got = _feed(m, shuffled, [100, 250])
    key = lambda t: sorted(zip(t.column("sym").to_pylist(), t.column("ts").to_pylist(), t.column("stage").to_pylist()))
    assert key(got) == key(expected) and expected.num_rows > 0


def test_prev_of_a_string_column():
    tbl = pa.table({"k": ["x"] * 6, "ts": list(range(6)), "side": ["buy", "sell", "buy", "buy", None, "sell"]})
    p = cc.Pattern.begin("a").where((col("side") == "sell") & (prev("side") == "buy"))
    out = cc.match(tbl, p, key="k", columns=[])
    assert out.column("row").to_pylist() == [1]          # row 5's previous side is null


def test_prev_of_a_condition_is_a_number():
    tbl = pa.table({"ts": list(range(5)), "x": [1.0, 5.0, 2.0, 6.0, 7.0]})
    p = cc.Pattern.begin("a").where((prev(col("x") > 3) == 1) & (col("x") > 3))     # two high values in a row
    assert cc.match(tbl, p, columns=[]).column("row").to_pylist() == [4]
    with pytest.raises(cc.PatternError, match="must be boolean"):
        cc.match(tbl, cc.Pattern.begin("a").where(prev(col("x") > 3)))
    assert cc.match(tbl, cc.Pattern.begin("a").where(prev("x").is_null()), columns=[]).column("row").to_pylist() == [0]


def test_history_inside_an_aggregate_and_in_the_window_of_a_stage():
    tbl = _with_reference(_ticks(500, null_frac=0), HIST)
    h = _rise(col("price") > 0, (col("price") > last("price", of=["a", "b"])) &
              (cc.avg(HIST[0], of="b").is_null() | (cc.avg(HIST[0], of="b") < col("price"))))
    r = _rise(col("price") > 0, (col("price") > last("price", of=["a", "b"])) &
              (cc.avg("ref0", of="b").is_null() | (cc.avg("ref0", of="b") < col("price"))))
    assert cc.match(tbl, h, key="sym", columns=[]).equals(cc.match(tbl, r, key="sym", columns=[]))


# ----------------------------------------------------------------------------- aggregates over expressions
def test_aggregate_over_an_expression_vs_hand_computation():
    tbl = pa.table({"ts": [0, 1, 2, 3, 4], "price": [10.0, 11.0, 12.0, 9.0, 13.0],
                    "volume": [1.0, 2.0, 3.0, 4.0, 100.0]})
    vwap = cc.sum(col("price") * col("volume"), of="b") / cc.sum("volume", of="b")
    p = (cc.Pattern.begin("b").where(col("price") > 0).times(4).consecutive()
         .next("c").where(col("price") > vwap))
    out = cc.match(tbl, p, columns=["price"])
    # b = rows 0-3: (10 + 22 + 36 + 36) / 10 = 10.4 < 13
    assert out.column("row").to_pylist() == [0, 1, 2, 3, 4]
    q = (cc.Pattern.begin("b").where(col("price") > 0).times(4).consecutive()
         .next("c").where(col("price") > 1.25 * vwap))     # 13 <= 1.25 * 10.4 = 13: no match
    assert cc.match(tbl, q).num_rows == 0
    # max / first / last / count over expressions
    for agg, want in ((cc.max(col("price") - col("volume"), of="b"), 9.0), (cc.min(col("price") * 2, of="b"), 18.0),
                      (cc.first(col("price") + col("volume"), of="b"), 11.0),
                      (cc.last(col("price") / col("volume"), of="b"), 2.25),
                      (cc.avg(col("price") * col("volume"), of="b"), 26.0)):
        hit = (cc.Pattern.begin("b").where(col("price") > 0).times(4).consecutive()
               .next("c").where(agg == want))
        assert cc.match(tbl, hit).num_rows == 5, agg
        miss = (cc.Pattern.begin("b").where(col("price") > 0).times(4).consecutive()
                .next("c").where(agg == want + 0.5))
        assert cc.match(tbl, miss).num_rows == 0, agg


def test_aggregate_expression_errors():
    with pytest.raises(TypeError):
        cc.sum(last("price", of="a"), of="b")
    with pytest.raises(TypeError):
        rolling(prev("price"), "mean", rows=3)
    with pytest.raises(TypeError):
        rolling("price", "median", rows=3)
    with pytest.raises(TypeError):
        rolling("price", "mean")
    with pytest.raises(TypeError):
        prev("price", 0)
    p = cc.Pattern.begin("a").where(cc.sum(col("name") * 2, of="a") > 1)
    with pytest.raises(cc.PatternError, match="stage 'a'"):
        cc.match(pa.table({"ts": [1], "name": ["x"]}), p)
    assert repr(cc.sum(col("price") * col("volume"), of="b")) == "sum((col('price') * col('volume')), of='b')"
    assert cc.sum(col("price"), of="b").key() == cc.sum("price", of="b").key()


def test_history_and_expressions_round_trip_through_json():
    p = (cc.Pattern.begin("a").where(col("price") > rolling("price", "mean", rows=20))
         .followed_by("b").where((col("volume") > 3 * rolling(col("volume"), "mean", within="1min",
                                                                include_current=True))
                                 & (prev("price", 2) < cc.sum(col("price") * col("volume"), of="a"))))
    q = cc.Pattern.from_json(p.to_json())
    assert q.to_json() == p.to_json()
    assert cc.compile(q).fingerprint == cc.compile(p).fingerprint
    with pytest.raises(cc.PatternJSONError, match=r"stages\[0\]\.where\.cmp\[2\]\.k"):
        cc.Pattern.from_json({"stages": [{"name": "a", "connect": "begin",
                                          "where": {"cmp": [{"field": "x"}, ">", {"prev": "x", "k": 0}]}}]})


# ----------------------------------------------------------------------------- SQL
def test_sql_prev_is_history_so_compiled_queries_run_on_streams():
    from colcep.lang.sql import compile_query
    tbl = _ticks(800, null_frac=0, min_step=1)
    q = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts
             MEASURES FIRST(UP.ts) AS t0, LAST(UP.ts) AS t1, PREV(UP.price, 2) AS before
             ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
             PATTERN (UP{3,} DOWN)
             DEFINE UP AS UP.price > PREV(UP.price) AND (LAST(UP.price, 2) IS NULL OR UP.price > LAST(UP.price, 2))
                          AND SUM(UP.price * UP.volume) > 0,
                    DOWN AS DOWN.price < PREV(DOWN.price, 2))"""
    want = sql_cep(q, t=tbl)
    assert want.num_rows > 5
    p = compile_query(q, tbl.column_names)
    assert "__colcep" not in p.to_json()          # no helper columns: the input's own are enough
    got = _feed(cc.Matcher(p, key="sym", columns=["ts"]), tbl, list(range(13, 800, 13)))
    ups = got.filter(pa.compute.equal(got.column("stage"), "UP"))
    firsts = ups.group_by("match_id").aggregate([("ts", "min"), ("ts", "max")]).sort_by("ts_min")
    w = want.sort_by("t0")
    assert firsts.column("ts_min").to_pylist() == w.column("t0").to_pylist()
    assert firsts.column("ts_max").to_pylist() == w.column("t1").to_pylist()


# ----------------------------------------------------------------------------- on Spark
TICK_HISTORY = (cc.Pattern.begin("spike")
                .where((col("price") > rolling("price", "mean", rows=20))
                       & (col("volume") > 2 * rolling("volume", "mean", within="2s")))
                .next("fall").where(col("price") < prev("price")).times(2).consecutive()
                .within("10s"))


def _canon(t):
    d = t.select(["match_id", "name", "stage", "row"]).to_pydict()
    m: dict = {}
    for i in range(t.num_rows):
        m.setdefault(d["match_id"][i], [d["name"][i]]).append((d["stage"][i], d["row"][i]))
    return sorted(tuple(v) for v in m.values())


def test_keyed_stream_one_spark_task_equals_in_process():
    import pyarrow.compute as pc
    from colcep.spark import KeyedStream, arrow_spec
    from colcep.tools.ticks import make_ticks
    ticks = make_ticks(20000, 7, 3)
    want = cc.match(ticks, TICK_HISTORY, key="name", time="ts", columns=["price"])
    assert want.num_rows > 50
    srt = ticks.take(pc.sort_indices(ticks, sort_keys=[("name", "ascending"), ("ts", "ascending"),
                                                       ("id", "ascending")]))
    for batch in (97, 5000):
        ks = KeyedStream(arrow_spec(srt.schema, TICK_HISTORY, "name", "ts", ["price"], seq="id"))
        outs = []
        for off in range(0, srt.num_rows, batch):
            outs += ks.feed(srt.slice(off, batch).combine_chunks().to_batches()[0])
        outs += ks.finish()
        assert _canon(pa.concat_tables(outs)) == _canon(want)


@pytest.mark.spark
def test_spark_equals_in_process(spark):
    from colcep.spark import match
    from colcep.tools.ticks import make_ticks
    ticks = make_ticks(20000, 7, 3)
    want = cc.match(ticks, TICK_HISTORY, key="name", time="ts", columns=["price"])
    spark.conf.set(BATCH_ROWS, "999")  # a key's history carried across Arrow batches (put back after the test)
    got = match(spark.createDataFrame(ticks), TICK_HISTORY, key="name", time="ts", columns=["price"], seq="id",
                num_partitions=3).toArrow()
    assert _canon(got) == _canon(want) and want.num_rows > 50
