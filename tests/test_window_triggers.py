"""Window triggers and evictors: Flink 2.3's firings on the corpus (whole, streamed in random
batches with per-row watermarks, one row per batch with per-batch watermarks), the public API
(aggregate, ohlc, WindowAggregator), the rules Flink refuses, and the kernels' helpers."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import flinkwin as fw
from colcep import triggers as tr
from colcep.errors import InputError, WindowSpecError
from colcep.kernels import triggers as kt
from colcep.windows import Count, Global, Session, Sliding, Tumbling, WindowAggregator, aggregate, ohlc

CASES = fw.load()
RUN = [c for c in CASES if "error" not in c["expected"]]
REFUSED = [c for c in CASES if "error" in c["expected"] and "abs(offset)" not in c["expected"]["error"]]
# Flink 2.3 refuses |offset| >= size (tumbling) or slide (sliding); colcep takes the offset modulo
# the size or slide, the same grid (a documented extension: docs/guide/windows.md, "The rules (Flink
# sources, transcribed)")
WIDE_OFFSETS = [c for c in CASES if "abs(offset)" in c["expected"].get("error", "")]


def test_corpus_covers_every_feature():
    kinds = set()

    def walk(t):
        if t is None:
            return
        kinds.add("trigger:" + t["kind"])
        for x in ([t["of"]] if t["kind"] == "purging" else t.get("of", [])):
            walk(x)

    for c in RUN:
        walk(c["trigger"])
        kinds.add("window:" + c["window"]["kind"])
        if c["evictor"]:
            kinds.add(f"evictor:{c['evictor']['kind']}:{'after' if c['evictor']['after'] else 'before'}")
        if c["expected"]["late"]:
            kinds.add("late rows")
        if any(f[4] == "late" for f in c["expected"]["firings"]):
            kinds.add("late firings")
    want = {f"trigger:{k}" for k in ("event_time", "count", "continuous", "delta", "purging", "any")} | \
        {f"window:{k}" for k in ("tumbling", "sliding", "session", "global")} | \
        {f"evictor:{k}:{w}" for k in ("count", "time", "delta") for w in ("before", "after")} | \
        {"late rows", "late firings"}
    assert want <= kinds, want - kinds
    assert len(RUN) >= 200 and len(REFUSED) >= 3


@pytest.mark.parametrize("case", RUN, ids=[c["name"] for c in RUN])
def test_flink_firings_whole(case):
    assert fw.firings(case, [list(range(len(case["rows"])))]) == fw.flink_firings(case)


@pytest.mark.parametrize("case", RUN, ids=[c["name"] for c in RUN])
def test_flink_firings_streamed(case):
    """Per-row watermarks over random batches, and per-batch watermarks over one-row batches:
    the state carried between calls (rows renumbered as windows let them go) changes nothing."""
    n = len(case["rows"])
    rng = np.random.default_rng(abs(hash(case["name"])) % 2**32)
    want = fw.flink_firings(case)
    assert fw.firings(case, fw.random_batches(n, rng), "row") == want
    assert fw.firings(case, [[i] for i in range(n)], "batch") == want


@pytest.mark.parametrize("case", REFUSED, ids=[c["name"] for c in REFUSED])
def test_flink_refusals(case):
    with pytest.raises(WindowSpecError):
        fw.firings(case, [list(range(len(case["rows"])))])


@pytest.mark.parametrize("case", WIDE_OFFSETS, ids=[c["name"] for c in WIDE_OFFSETS])
def test_offsets_flink_refuses_are_taken_modulo(case):
    w = case["window"]
    reduced = dict(case, window=dict(w, offset=w["offset"] % (w["size"] if w["kind"] == "tumbling" else w["slide"])))
    rows = [list(range(len(case["rows"])))]
    assert fw.firings(case, rows) == fw.firings(reduced, rows)
    assert abs(reduced["window"]["offset"]) < abs(w["offset"])


# ------------------------------------------------------------------ the public API
TICKS = pa.table({"name": ["a", "a", "b", "a", "a", "b", "a"], "ts": [1, 3, 4, 12, 2, 25, 30],
                  "price": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], "volume": [10, 20, 30, 40, 50, 60, 70]})


def test_aggregate_without_trigger_is_unchanged():
    out = aggregate(TICKS, Tumbling(10), {"n": "count"}, key="name")
    assert out.column_names == ["name", "window_start", "window_end", "n"]


def test_allowed_lateness_fires_late_rows_once_more():
    out = aggregate(TICKS, Tumbling(10), {"n": "count", "s": ("price", "sum")}, key="name", allowed_lateness=20)
    assert out.column_names == ["name", "window_start", "window_end", "firing", "kind", "n", "s"]
    a0 = out.filter(pa.compute.and_(pa.compute.equal(out["name"], "a"), pa.compute.equal(out["window_start"], 0)))
    assert a0.select(["firing", "kind", "n", "s"]).to_pylist() == [
        {"firing": 0, "kind": "on_time", "n": 2, "s": 3.0}, {"firing": 1, "kind": "late", "n": 3, "s": 8.0}]
    # without lateness the row at ts 2 arrives behind the watermark (11) and is dropped
    strict = aggregate(TICKS, Tumbling(10), {"n": "count"}, key="name", trigger=tr.EventTime())
    assert strict.column("n").to_pylist() == [2, 1, 1, 1, 1]


def test_continuous_vwap_updates_every_interval():
    ticks = pa.table({"name": ["x"] * 6, "ts": [0, 10_000, 65_000, 130_000, 3_599_000, 3_700_000],
                      "price": [10.0, 11.0, 12.0, 13.0, 14.0, 15.0], "volume": [1, 1, 2, 2, 4, 1]})
    ticks = ticks.append_column("pv", pa.compute.multiply(ticks["price"], ticks["volume"].cast(pa.float64())))
    out = aggregate(ticks, Tumbling("1h"), {"pv": ("pv", "sum"), "v": ("volume", "sum")}, key="name",
                    trigger=tr.ContinuousEventTime("1min"))
    hour0 = out.filter(pa.compute.equal(out["window_start"], 0)).to_pylist()
    # a firing at each minute the watermark passes (1 after the tick at 65 s is in, 2, then 3..59 on the
    # jump to 3,599 s, each with what the window holds then), on time when it passes the hour
    assert [r["kind"] for r in hour0] == ["early"] * 59 + ["on_time"]
    assert [r["v"] for r in hour0[:3]] == [4, 6, 10] and hour0[-1]["v"] == 10
    assert [r["firing"] for r in hour0] == list(range(60))


def test_ohlc_bars_of_n_ticks_or_the_window():
    bars = ohlc(TICKS, Tumbling(100), key="name", trigger=tr.Purging(tr.Count(2) | tr.EventTime()))
    a = bars.filter(pa.compute.equal(bars["name"], "a")).to_pylist()
    assert [(r["open"], r["close"], r["count"], r["kind"]) for r in a] == [
        (1.0, 2.0, 2, "early"), (5.0, 4.0, 2, "early"), (7.0, 7.0, 1, "on_time")]


def test_evictors_keep_what_flink_keeps():
    last2 = aggregate(TICKS, Global(), {"n": "count", "first": ("price", "first")}, key="name",
                      trigger=tr.Count(3), evictor=tr.CountEvictor(2))
    assert last2.to_pylist() == [{"name": "a", "window_id": 0, "firing": 0, "kind": "early", "n": 2, "first": 2.0}]
    recent = aggregate(TICKS, Tumbling(100), {"n": "count"}, key="name", evictor=tr.TimeEvictor(10))
    assert recent.column("n").to_pylist() == [1, 1]  # a: ts 30 only (> 30 - 10); b: ts 25
    near = aggregate(TICKS, Tumbling(100), {"n": "count"}, key="name", evictor=tr.DeltaEvictor(3.0, "price"))
    assert near.column("n").to_pylist() == [2, 1]  # a: 5.0 and 7.0 (|x - 7| < 3); b: 6.0 (|3 - 6| = 3 goes)


def test_window_aggregator_streams_firings_and_late_rows():
    agg = WindowAggregator(Tumbling(10), {"n": "count"}, key="name", trigger=tr.ContinuousEventTime(5),
                           allowed_lateness=5)
    first = agg.process(TICKS.slice(0, 4))
    assert agg.watermark == 11 and first.column("kind").to_pylist() == ["early", "on_time", "early", "on_time"]
    late = agg.process(TICKS.slice(4, 1))  # ts 2 at watermark 11: within the lateness of [0, 10)
    assert late.to_pylist() == [{"name": "a", "window_start": 0, "window_end": 10, "firing": 2, "kind": "late",
                                 "n": 3}]
    agg.process(pa.table({"name": ["a"], "ts": [40], "price": [1.0], "volume": [1]}))
    agg.process(TICKS.slice(4, 1))  # now behind the window's cleanup: the side output
    assert agg.late_rows == 1 and agg.pop_late().column("ts").to_pylist() == [2]
    assert agg.close().num_rows > 0


def test_timestamp_time_column_and_durations():
    t = TICKS.set_column(1, "ts", pa.array(np.array([1, 3, 4, 12, 2, 25, 30]) * 60_000, pa.timestamp("ms")))
    out = aggregate(t, Tumbling("10min"), {"n": "count"}, key="name", trigger=tr.ContinuousEventTime("5min"),
                    allowed_lateness="10min", out_of_orderness="1min")
    assert out.schema.field("window_start").type == pa.timestamp("ms")
    assert set(out.column("kind").to_pylist()) == {"early", "on_time", "late"}


@pytest.mark.parametrize("call, rule", [
    (lambda: aggregate(TICKS, Tumbling(10), {"n": "count"}, key="name", allowed_lateness=-1), "lateness cannot be negative"),
    (lambda: tr.ContinuousEventTime(-5), "must be > 0"),
    (lambda: tr.ContinuousEventTime("0s"), "must be > 0"),
    (lambda: tr.Count(0), "positive int"),
    (lambda: tr.CountEvictor(-1), ">= 0"),
    (lambda: tr.TimeEvictor("-1s"), ">= 0"),
    (lambda: tr.Delta(float("nan"), "price"), "must be a number"),
    (lambda: tr.Purging("x"), "needs a trigger"),
    (lambda: aggregate(TICKS, Session(5), {"n": "count"}, key="name", trigger=tr.Delta(1.0, "price")),
     "cannot be used with a trigger that does not support merging"),
    (lambda: aggregate(TICKS, Session(5), {"n": "count"}, key="name", trigger=tr.Count(2) | tr.Delta(1.0, "price")),
     "does not support merging"),
    (lambda: aggregate(TICKS, Global(), {"n": "count"}, key="name", trigger=tr.EventTime()), "Global windows have none"),
    (lambda: aggregate(TICKS, Global(), {"n": "count"}, key="name", evictor=tr.CountEvictor(1)), "need one"),
    (lambda: aggregate(TICKS, Count(2), {"n": "count"}, key="name", trigger=tr.Count(3)), "use Global()"),
    (lambda: aggregate(TICKS, Tumbling(10), {"kind": "count"}, key="name", trigger=tr.EventTime()), "clashes"),
    (lambda: aggregate(TICKS, Tumbling(10), {"n": "count"}, key="name", order="ts"), "order= applies"),
    (lambda: WindowAggregator(Tumbling(10), {"n": "count"}, watermarks="event"), "'batch' or 'row'"),
])
def test_invalid_specifications_name_the_rule(call, rule):
    with pytest.raises(WindowSpecError, match=rule):
        call()


def test_delta_on_a_column_that_is_not_numeric():
    t = TICKS.append_column("side", pa.array(["b", "s", "b", "s", "b", "s", "b"]))
    with pytest.raises(InputError, match="'side' has type string; a delta needs a numeric column"):
        aggregate(t, Global(), {"n": "count"}, key="name", trigger=tr.Delta(1.0, "side"))
    with pytest.raises(InputError, match="'missing' is missing"):
        aggregate(t, Tumbling(10), {"n": "count"}, key="name", evictor=tr.DeltaEvictor(1.0, "missing"))


def test_a_failed_batch_leaves_the_state_as_it_was():
    agg = WindowAggregator(Tumbling(10), {"n": "count"}, key="name", trigger=tr.Count(2))
    agg.process(TICKS.slice(0, 1))
    bad = pa.table({"name": ["a", None], "ts": [5, 6], "price": [1.0, 1.0], "volume": [1, 1]})
    with pytest.raises(InputError, match="null"):
        agg.process(bad)
    out = agg.process(TICKS.slice(1, 1))  # the second row of [0, 10) for a: Count(2) fires with 2 rows
    assert out.column("n").to_pylist() == [2]


def test_null_and_nan_deltas_never_fire():
    t = pa.table({"name": ["a"] * 4, "ts": [1, 2, 3, 4], "price": [1.0, None, float("nan"), 9.0]})
    out = aggregate(t, Global(), {"n": "count"}, key="name", trigger=tr.Delta(2.0, "price"))
    assert out.column("n").to_pylist() == [4]  # 1 -> null / NaN: no; 1 -> 9: fires


def test_many_keys_and_int64_edges():
    rng = np.random.default_rng(3)
    n = 20_000
    ts = np.sort(rng.integers(0, 10**5, n))  # 20 keys, ~10 rows of each per window
    t = pa.table({"name": rng.integers(0, 20, n), "ts": ts, "price": rng.random(n)})
    out = aggregate(t, Sliding(1000, 250), {"n": "count"}, key="name", trigger=tr.ContinuousEventTime(100),
                    evictor=tr.CountEvictor(5))
    assert out.num_rows > n and max(out.column("n").to_pylist()) == 5
    edge = pa.table({"name": ["a", "a"], "ts": [np.iinfo(np.int64).min + 10**6, np.iinfo(np.int64).max - 10**6]})
    res = aggregate(edge, Tumbling(1000), {"n": "count"}, key="name", allowed_lateness=5)
    assert res.column("n").to_pylist() == [1, 1]


# ------------------------------------------------------------------ kernel helpers vs plain Python
def _java_hash_bucket(start: int, end: int, cap: int) -> int:
    m = (1 << 64) - 1
    x = (start + end) & m
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & m  # MathUtils.longToIntWithBitMixing (javap, Flink 2.3)
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & m
    x = x ^ (x >> 31)
    h = x & 0xFFFFFFFF  # (int) cast, as 32 unsigned bits
    return (h ^ (h >> 16)) & (cap - 1)


def test_hash_order_is_java_hashset_order():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        s = np.sort(rng.integers(-10**12, 10**12, n))
        e = s + rng.integers(1, 10**6, n)
        cap = 16
        while n > cap * 3 // 4:
            cap *= 2
        want = sorted(range(n), key=lambda i: (_java_hash_bucket(int(s[i]), int(e[i]), cap), i))
        assert kt._hash_order(s, e).tolist() == want


def test_time_sorted_segments_is_a_stable_sort_per_segment():
    rng = np.random.default_rng(6)
    ts = rng.integers(0, 5, 200)
    lo = np.array([0, 10, 10, 50, 120])
    hi = np.array([10, 10, 50, 120, 200])
    perm = kt.time_sorted_segments(ts, lo, hi)
    for a, b in zip(lo, hi):
        assert perm[a:b].tolist() == sorted(range(a, b), key=lambda i: (ts[i], i))


def test_java_remainder():
    for a in (-7, -4, -1, 0, 3, 4, 9):
        assert kt.java_rem(a, 4) == int(np.fmod(a, 4))


def test_continuous_on_a_global_window_ends_with_the_input():
    """Flink's ContinuousEventTimeTrigger on GlobalWindows fires once per interval up to
    Long.MAX_VALUE at the final watermark (it never ends); colcep fires the due timer, then once on
    time (the window's end timer, Long.MAX_VALUE, which Flink would reach after 2^63 / 10 firings)."""
    t = pa.table({"name": ["a"] * 3, "ts": [0, 5, 12], "price": [1.0, 2.0, 3.0]})
    out = aggregate(t, Global(), {"n": "count"}, key="name", trigger=tr.ContinuousEventTime(10))
    assert out.select(["firing", "kind", "n"]).to_pylist() == [
        {"firing": 0, "kind": "early", "n": 3},   # the timer at 10, when the watermark reached 11
        {"firing": 1, "kind": "early", "n": 3},   # the timer at 20, at the end of input
        {"firing": 2, "kind": "on_time", "n": 3}]


def test_one_compiled_signature_whatever_the_input():
    """Chunked, sliced, read-only, timestamp, dynamic-gap and streamed inputs: each trigger kernel
    keeps one compiled signature (a new layout never waits for a compile)."""
    from numba.core.registry import CPUDispatcher

    n = 3000
    rng = np.random.default_rng(9)
    t = pa.table({"name": rng.integers(0, 7, n), "ts": np.sort(rng.integers(0, 10**5, n)), "price": rng.random(n),
                  "gap": rng.integers(1, 500, n)})
    ro = np.sort(rng.integers(0, 10**5, n))
    ro.setflags(write=False)
    variants = [t, pa.concat_tables([t.slice(0, 100), t.slice(100)]), t.slice(7, 500), t.set_column(1, "ts", pa.array(ro)),
                t.set_column(1, "ts", t.column("ts").cast(pa.timestamp("ms"))), t.to_pandas()]
    for data in variants:
        aggregate(data, Sliding(1000, 300), {"n": "count"}, key="name", trigger=tr.ContinuousEventTime(100),
                  evictor=tr.TimeEvictor(400))
        aggregate(data, Session.dynamic("gap"), {"n": "count"}, key="name", trigger=tr.Count(3), allowed_lateness=5)
        aggregate(data, Global(), {"n": "count"}, trigger=tr.Delta(0.5, "price"), evictor=tr.DeltaEvictor(0.2, "price"))
    agg = WindowAggregator(Tumbling(1000), {"n": "count"}, key="name", trigger=tr.EventTime(), allowed_lateness=10)
    for b in t.to_batches(max_chunksize=700):
        agg.process(b)
    agg.close()
    for name in ("step", "new_state", "live_rows", "renumber_rows", "time_sorted_segments"):
        f = getattr(kt, name)  # the entry points Python calls (helpers compile inside them)
        assert isinstance(f, CPUDispatcher) and len(f.signatures) == 1, (name, f.signatures)


def test_a_snapshot_restores_only_under_its_program():
    from colcep.errors import SnapshotError
    from colcep.windows.aggregator import _firing_program
    from colcep.windows.firings import FiringState

    count5 = _firing_program(Tumbling(10), tr.Count(5), None, None, "ms")
    fs = FiringState(count5)
    t = TICKS.select(["name", "ts", "price"])
    fs.step(t, t.column("ts").to_numpy(), np.array([0, 0, 1, 0, 0, 1, 0]), 2, np.full(7, -2**63), 5,
            np.array([0], np.int64))
    again = FiringState.restore(count5, fs.snapshot())
    assert again.snapshot() == fs.snapshot() and again.held_rows == fs.held_rows > 0
    other = _firing_program(Tumbling(10), tr.ContinuousEventTime(2) | tr.ContinuousEventTime(3), None, None, "ms")
    with pytest.raises(SnapshotError, match="another window, trigger"):
        FiringState.restore(other, fs.snapshot())
    with pytest.raises(SnapshotError, match="another"):
        FiringState.restore(_firing_program(Tumbling(10), tr.Count(5), None, 3, "ms"), fs.snapshot())


def test_a_bad_first_batch_binds_nothing():
    agg = WindowAggregator(Global(), {"n": "count"}, key="name", trigger=tr.Delta(1.0, "price"))
    with pytest.raises(InputError, match="'price' is missing"):
        agg.process(TICKS.select(["name", "ts"]))
    with pytest.raises(InputError, match="watermark must be an int"):
        agg.process(TICKS, watermark="soon")
    out = agg.process(TICKS)  # a: 1 -> 4 fires (3 rows), 4 -> 7 fires (5 rows); b: 3 -> 6 fires (2 rows)
    assert out.column("n").to_pylist() == [3, 5, 2] and agg.close().num_rows == 0


def test_order_column_in_process_and_int64_limits():
    shuffled = TICKS.take(pa.array([6, 0, 5, 1, 4, 2, 3])).append_column("seq", pa.array([6, 0, 5, 1, 4, 2, 3]))
    kw = dict(key="name", trigger=tr.Count(2), allowed_lateness=100)
    assert aggregate(shuffled, Tumbling(10), {"n": "count"}, order="seq", **kw) == \
        aggregate(TICKS, Tumbling(10), {"n": "count"}, **kw)
    with pytest.raises(InputError, match="order column 'nope' is missing"):
        aggregate(TICKS, Tumbling(10), {"n": "count"}, order="nope", **kw)
    with pytest.raises(WindowSpecError, match="does not fit in 64 bits"):
        aggregate(TICKS, Tumbling(10), {"n": "count"}, key="name", allowed_lateness=2**63)
    with pytest.raises(WindowSpecError, match="does not fit in 64 bits"):
        aggregate(TICKS, Global(), {"n": "count"}, key="name", trigger=tr.Count(2**63))
    with pytest.raises(WindowSpecError, match="applies to windows that fire by trigger"):
        WindowAggregator(Tumbling(10), {"n": "count"}, watermarks="row")
