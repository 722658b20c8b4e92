"""The Matcher as a stateful operator: compiled programs, snapshots, failure semantics,
values at the edges, and the bound on what the state holds."""
import datetime as dt
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, last
from colcep.engine.codec import FORMAT, MAGIC
from colcep.kernels.compact import compact_buffer
from conformance import CORPUS, case_pattern, feed, load_cases, snapshot_every_boundary
from interrupts import assert_ctrl_c_stops_cleanly
from randcase import cases

CASES = load_cases([CORPUS])
I64 = np.iinfo(np.int64)

RISE = (cc.Pattern.begin("a").where(col("price") > 10)
        .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
        .followed_by("c").where(col("price") < last("price", of="b"))
        .within(100))


def _ticks(n=400, keys=3, seed=1, t0=0):
    rng = np.random.default_rng(seed)
    return pa.table({"sym": pa.array([f"k{i}" for i in rng.integers(0, keys, n)]),
                     "ts": pa.array(t0 + np.cumsum(rng.integers(0, 5, n)), pa.int64()),
                     "price": pa.array(np.round(rng.normal(12, 3, n), 1))})


# ----------------------------------------------------------------------------- the program
def test_compiled_program_is_picklable_and_fingerprinted():
    prog = cc.compile(RISE)
    again = pickle.loads(pickle.dumps(prog))
    assert again.fingerprint == prog.fingerprint == cc.compile(RISE).fingerprint
    assert cc.compile(prog) is prog
    assert cc.compile(RISE.within(101)).fingerprint != prog.fingerprint
    assert cc.compile(RISE.skip(cc.SkipPastLastEvent())).fingerprint != prog.fingerprint
    tbl = _ticks()
    a = cc.match(tbl, RISE, key="sym")
    b = cc.match(tbl, again, key="sym")
    assert a.equals(b) and a.num_rows > 0


# ----------------------------------------------------------------------------- snapshots
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_snapshot_restore_at_every_boundary_equals_uninterrupted(case):
    expected, got = snapshot_every_boundary(case, case.get("expected_timeouts") is not None)
    assert got.equals(expected)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases(max_events=14))  # (allow_combinations without merging is 2^events: keep it small)
def test_snapshot_restore_on_random_patterns(case):
    try:
        cc.compile(case_pattern(case))
    except cc.PatternError:
        assume(False)
    expected, got = snapshot_every_boundary(case, True)
    assert got.equals(expected)


def test_restore_in_another_process(tmp_path):
    tbl = _ticks(600)
    m = cc.Matcher(RISE, key="sym", time="ts", timeouts=True)
    first = m.process(tbl.slice(0, 300))
    (tmp_path / "snap").write_bytes(m.snapshot())
    feather.write_feather(tbl.slice(300), tmp_path / "rest.arrow")
    script = textwrap.dedent(f"""
        import pyarrow as pa
        import pyarrow.feather as feather
        import colcep as cc
        from colcep import col, last
        p = (cc.Pattern.begin("a").where(col("price") > 10)
             .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
             .followed_by("c").where(col("price") < last("price", of="b")).within(100))
        m = cc.Matcher.restore(p, open({str(tmp_path / 'snap')!r}, "rb").read())
        rest = feather.read_table({str(tmp_path / 'rest.arrow')!r})
        out = pa.concat_tables([m.process(rest), m.close()])
        feather.write_feather(out, {str(tmp_path / 'out.arrow')!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=600)
    got = pa.concat_tables([first, feather.read_table(tmp_path / "out.arrow")])
    whole = cc.Matcher(RISE, key="sym", time="ts", timeouts=True)
    expected = pa.concat_tables([whole.process(tbl), whole.close()])
    assert got.equals(expected)
    assert expected.num_rows > 0


def test_snapshot_size_tracks_live_state_not_stream_length():
    m = cc.Matcher(RISE, key="sym", time="ts", columns=["price"])
    sizes = []
    for i in range(30):
        m.process(_ticks(2_000, seed=i, t0=i * 10**6))
        sizes.append(len(m.snapshot()))
    assert max(sizes[10:]) < 3 * max(sizes[:10])  # flat, not growing with 60,000 rows


def test_snapshot_of_some_keys():
    tbl = _ticks(600)
    m = cc.Matcher(RISE, key="sym", time="ts")
    m.process(tbl.slice(0, 300))
    part = cc.Matcher.restore(RISE, m.snapshot(keys=["k1"]))
    rest = tbl.slice(300).filter(pc.equal(tbl.slice(300).column("sym"), "k1"))
    got = pa.concat_tables([part.process(rest), part.close()])
    full = pa.concat_tables([m.process(tbl.slice(300)), m.close()])
    want = full.filter(pc.equal(full.column("sym"), "k1"))
    assert got.num_rows > 0
    assert got.select(["sym", "stage", "price"]).equals(want.select(["sym", "stage", "price"]))


def test_restore_refuses_other_pattern_newer_format_and_corrupt_bytes():
    m = cc.Matcher(RISE, key="sym", time="ts")
    m.process(_ticks(200))
    snap = m.snapshot()
    with pytest.raises(cc.SnapshotError, match="different pattern"):
        cc.Matcher.restore(RISE.within(50), snap)
    bad = bytearray(snap)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(cc.SnapshotError, match="corrupt"):
        cc.Matcher.restore(RISE, bytes(bad))
    with pytest.raises(cc.SnapshotError, match="not a colcep snapshot"):
        cc.Matcher.restore(RISE, b"hello world" * 10)
    import hashlib
    import json
    import struct
    n = struct.unpack_from("<I", snap, len(MAGIC))[0]
    head = json.loads(snap[len(MAGIC) + 4:len(MAGIC) + 4 + n])
    head["format"] = FORMAT + 1
    new_head = json.dumps(head, sort_keys=True).encode()
    # same blob offsets: the blobs follow the header
    body = MAGIC + struct.pack("<I", len(new_head)) + new_head + snap[len(MAGIC) + 4 + n:-32]
    with pytest.raises(cc.SnapshotError, match="newer"):
        cc.Matcher.restore(RISE, body + hashlib.sha256(body).digest())


def test_compaction_keeps_exactly_what_is_reachable():
    """compact_buffer on a live state recounts the same references the kernel kept."""
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).one_or_more().allow_combinations()
         .followed_by("c").where(col("price") < 0))
    m = cc.Matcher(p, time="ts", columns=[])
    m.process(pa.table({"ts": pa.array(range(12), pa.int64()), "price": pa.array([1.0] * 12)}))
    st = m._state
    roots = np.concatenate([st.runs.node, st.held.node]).astype(np.int64)
    row, stage, parent, ref, new_roots = compact_buffer(st.buffer.row, st.buffer.stage, st.buffer.parent,
                                                        int(st.buffer.meta[0]), roots)
    assert row.shape[0] == st.buffer.live > 0  # every live node is reachable: nothing leaks
    live = st.buffer.ref[:int(st.buffer.meta[0])]
    assert sorted(ref.tolist()) == sorted(live[live >= 0].tolist())


# ----------------------------------------------------------------------------- failure semantics
def test_failed_batch_leaves_state_as_it_was():
    tbl = _ticks(600)
    ok = cc.Matcher(RISE, key="sym", time="ts")
    expected = feed(ok, tbl, [300])
    m = cc.Matcher(RISE, key="sym", time="ts")
    parts = [m.process(tbl.slice(0, 300))]
    before = m.snapshot()
    bad = tbl.slice(300).set_column(2, "price", pa.array(["x"] * 300))
    with pytest.raises(cc.InputError, match="'price' changed type"):
        m.process(bad)
    unsorted = tbl.slice(300).take(pa.array(np.arange(299, -1, -1)))
    with pytest.raises(cc.InputError, match="not in order"):
        m.process(unsorted)
    assert m.snapshot() == before
    parts += [m.process(tbl.slice(300)), m.close()]
    assert pa.concat_tables(parts).equals(expected)


def test_compatible_schema_drift_is_cast_exactly():
    tbl = _ticks(400)
    m = cc.Matcher(RISE, key="sym", time="ts")
    first = m.process(tbl.slice(0, 200))
    second = tbl.slice(200).set_column(2, "price", tbl.slice(200).column("price").cast(pa.float32()))
    second = second.select(["price", "ts", "sym"]).append_column("extra", pa.array(range(200)))
    out = pa.concat_tables([first, m.process(second), m.close()])
    assert out.schema == cc.Matcher(RISE, key="sym", time="ts").output_schema(tbl.schema)
    m2 = cc.Matcher(RISE, key="sym", time="ts", columns=[])
    m2.process(tbl.slice(0, 200))
    with pytest.raises(cc.InputError, match="time column 'ts' changed type"):
        m2.process(tbl.slice(200).set_column(1, "ts", tbl.slice(200).column("ts").cast(pa.timestamp("ms"))))


def test_capacity_error_leaves_state_and_close_still_emits():
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).one_or_more().allow_combinations()
         .followed_by("c").where(col("price") < 0))
    tbl = pa.table({"ts": pa.array(range(14), pa.int64()), "price": pa.array([1.0] * 10 + [-1.0] * 4)})
    m = cc.Matcher(p, time="ts", columns=[], max_partial_matches=20, timeouts=True)
    out1 = m.process(tbl.slice(0, 3))
    before = m.snapshot()
    with pytest.raises(cc.CapacityError, match="max_partial_matches=20"):
        m.process(tbl.slice(3))
    assert m.snapshot() == before
    m.max_partial_matches = 10**6
    rest = pa.concat_tables([m.process(tbl.slice(3)), m.close()])
    want = cc.Matcher(p, time="ts", columns=[], timeouts=True)
    assert pa.concat_tables([out1, rest]).equals(pa.concat_tables([want.process(tbl), want.close()]))


def test_state_bound_covers_the_buffer_of_merged_runs():
    """Without a window, merged Kleene runs (of any start) are a few runs over a buffer linear in
    the stream: the byte bound fires on the buffer. Under a window (one start each) the runs'
    work arrays come first: a quarter of the bound."""
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).one_or_more()
         .followed_by("c").where(col("price") < 0))
    tbl = pa.table({"ts": pa.array(range(40_000), pa.int64()), "price": pa.array([1.0] * 40_000)})
    m = cc.Matcher(p, time="ts", columns=[], max_state_bytes=1 << 20)
    with pytest.raises(cc.CapacityError, match="shared match buffer") as e:
        m.process(tbl)
    assert "max_state_bytes=1,048,576" in str(e.value)
    assert m.buffer_nodes == 0 and m.live_partial_matches == 0  # nothing applied
    m = cc.Matcher(p.within(10**6), time="ts", columns=[], max_state_bytes=1 << 20)
    with pytest.raises(cc.CapacityError, match="work arrays .* over a quarter of the bound max_state_bytes=1,048,576"):
        m.process(tbl)
    assert m.buffer_nodes == 0 and m.live_partial_matches == 0 and m.state_bytes < 64 << 10  # as before


# ----------------------------------------------------------------------------- values at the edges
@pytest.mark.parametrize("t0", [0, int(I64.max) - 10_000, int(I64.min), -(2**62) - 5, 2**62 - 100])
def test_any_int64_time_is_exact(t0):
    """Matches (and time-outs) do not depend on where on the int64 line the stream lies."""
    base = _ticks(300, keys=2, seed=3)
    ts0 = np.asarray(base.column("ts").to_numpy())
    shifted = base.set_column(1, "ts", pa.array(ts0 + t0, pa.int64()))
    a = cc.match(base, RISE, key="sym", timeouts=True)
    b = cc.match(shifted, RISE, key="sym", timeouts=True)
    assert a.num_rows > 0
    assert a.drop_columns(["ts", "timeout_ts"]).equals(b.drop_columns(["ts", "timeout_ts"]))
    ta, tb = a.column("timeout_ts").to_pylist(), b.column("timeout_ts").to_pylist()
    assert [x is None for x in ta] == [x is None for x in tb]
    assert all(y == min(x + t0, int(I64.max)) for x, y in zip(ta, tb) if x is not None)


def test_window_beyond_the_time_range_is_refused():
    tbl = pa.table({"ts": pa.array([0, 1], pa.timestamp("ns")), "price": [11.0, 12.0]})
    with pytest.raises(cc.PatternError, match="beyond the int64 range"):
        cc.match(tbl, RISE.within(dt.timedelta(days=400 * 365)), time="ts")


@pytest.mark.parametrize("name", ["stage", "row", "match_id"])
def test_output_names_never_collide(name):
    tbl = _ticks(50).append_column(name, pa.array(range(50)))
    with pytest.raises(cc.InputError, match=f"input column '{name}' collides"):
        cc.match(tbl, RISE, key="sym")
    out = cc.match(tbl, RISE, key="sym", columns=["price"])  # leaving it out works
    assert out.column_names.count(name) == 1
    with pytest.raises(cc.InputError, match="'timed_out' collides"):
        cc.Matcher(RISE, key="sym", columns=["timed_out"], timeouts=True)


def test_nan_is_null():
    """NaN in a numeric column is null: every comparison with it is false, aggregates skip it."""
    p = cc.Pattern.begin("a").where(col("x") > 0).next("b").where(~(col("x") > 0) & ~(col("x") <= 0))
    tbl = pa.table({"ts": pa.array([1, 2, 3, 4], pa.int64()), "x": [1.0, float("nan"), 2.0, None]})
    out = cc.match(tbl, p, time="ts")
    assert out.column("row").to_pylist() == [0, 1, 2, 3]
    s = cc.Pattern.begin("a").where(col("x") > 0).one_or_more().consecutive() \
        .next("b").where(col("x") > cc.sum("x", of="a"))
    t2 = pa.table({"ts": pa.array(range(4), pa.int64()), "x": [1.0, float("nan"), 1.0, 5.0]})
    # a run through the NaN row does not exist (NaN > 0 is false); sum skips nothing here
    assert cc.match(t2, s, time="ts").column("row").to_pylist() == [2, 3]


# ----------------------------------------------------------------------------- event time
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.integers(0, 2**31), st.integers(0, 8), st.lists(st.integers(1, 60), min_size=1, max_size=6))
def test_shuffle_within_the_bound_gives_the_sorted_matches(seed, delay, sizes):
    tbl = _ticks(150, seed=seed % 1000)
    ts = np.asarray(tbl.column("ts").to_numpy())
    rng = np.random.default_rng(seed)
    # arrival order: each row may arrive up to ``delay`` time units late
    arrival = np.argsort(ts + rng.integers(0, delay + 1, len(ts)), kind="stable")
    shuffled = tbl.take(pa.array(arrival))
    m = cc.Matcher(RISE, key="sym", time="ts", timeouts=True, out_of_orderness=delay)
    got = feed(m, shuffled, sizes)
    assert m.late_rows == 0 and m.pop_late() is None
    # the stream sorted by time (ties in arrival order, as Flink releases them): same matches,
    # rows as arrival positions
    want = cc.match(shuffled, RISE, key="sym", timeouts=True)
    assert _canon(got) == _canon(want)


def _canon(t):
    d = t.to_pydict()
    by = {}
    for i, mid in enumerate(d["match_id"]):
        by.setdefault(mid, []).append((d["stage"][i], d["row"][i], d.get("timed_out", [False] * len(d["row"]))[i]))
    return sorted(tuple(v) for v in by.values())


def test_late_rows_go_to_the_side_output():
    tbl = pa.table({"sym": ["a"] * 6, "ts": pa.array([10, 20, 5, 30, 19, 40], pa.int64()),
                    "price": [11.0, 12.0, 13.0, 9.0, 50.0, 1.0]})
    m = cc.Matcher(RISE, key="sym", time="ts", out_of_orderness=3)
    outs = [m.process(tbl.slice(i, 1)) for i in range(6)]
    # brute force: the watermark after row i is max(ts[:i+1]) - 3 - 1; a row is late when its
    # time is <= the watermark before it arrived
    wm, late = None, []
    for i, t in enumerate(tbl.column("ts").to_pylist()):
        if wm is not None and t <= wm:
            late.append(i)
        mx = max(tbl.column("ts").to_pylist()[:i + 1])
        wm = mx - 4 if wm is None else max(wm, mx - 4)
    assert late == [2, 4]
    got = m.pop_late()
    assert got.column("ts").to_pylist() == [5, 19] and m.late_rows == 2
    outs.append(m.close())
    out = pa.concat_tables(outs)
    assert set(out.column("row").to_pylist()) <= {0, 1, 3, 5}


def test_explicit_watermarks_release_rows_and_close_releases_the_rest():
    tbl = pa.table({"sym": ["a"] * 4, "ts": pa.array([3, 1, 2, 4], pa.int64()), "price": [12.0, 11.0, 13.0, 5.0]})
    m = cc.Matcher(RISE, key="sym", time="ts", out_of_orderness="watermarks")
    assert m.process(tbl).num_rows == 0 and m.watermark is None
    out = m.process(tbl.slice(0, 0), watermark=4)
    assert out.num_rows > 0 and m.watermark == 4
    assert _canon(pa.concat_tables([out, m.close()])) == _canon(cc.match(tbl, RISE, key="sym"))
    with pytest.raises(cc.InputError, match="needs event time"):
        cc.Matcher(RISE, key="sym", time="ts").process(tbl, watermark=3)


# ----------------------------------------------------------------------------- interrupts
def test_ctrl_c_stops_a_long_scan_and_leaves_the_matcher_usable():
    assert_ctrl_c_stops_cleanly("""
        tbl = ticks(1).drop(["k"])
        m = cc.Matcher(p, time="ts", columns=[])
        first, rest = tbl.slice(0, 1), tbl.slice(1)
    """)


def test_watermark_times_out_quiet_keys():
    """As Flink's CEP operator: the watermark advances every key's time, so a key that receives
    no more rows still emits its timed-out partial matches and its trailing not_followed_by
    matches once the watermark passes their window (not only at close())."""
    p = (cc.Pattern.begin("a").where(col("price") > 10)
         .followed_by("b").where(col("price") > 100).within(50))
    quiet = pa.table({"sym": ["q", "q"], "ts": pa.array([0, 10], pa.int64()), "price": [11.0, 12.0]})
    m = cc.Matcher(p, key="sym", time="ts", timeouts=True, out_of_orderness=0)
    assert m.process(quiet).num_rows == 0
    busy = pa.table({"sym": ["z"] * 2, "ts": pa.array([20, 55], pa.int64()), "price": [1.0] * 2})
    out = m.process(busy)  # watermark 54: the run started at 0 (window to 50) times out, not the one at 10
    assert out.column("timed_out").to_pylist() == [True] and out.column("row").to_pylist() == [0]
    assert out.column("timeout_ts").to_pylist() == [50]
    out = m.process(busy.slice(0, 0), watermark=60)  # an explicit watermark passes the second's window
    assert out.column("row").to_pylist() == [1] and out.column("timeout_ts").to_pylist() == [60]
    assert m.close().num_rows == 0

    absent = (cc.Pattern.begin("a").where(col("price") > 10)
              .not_followed_by("n").where(col("price") > 100).within(50))
    m = cc.Matcher(absent, key="sym", time="ts", out_of_orderness=0)
    assert m.process(quiet.slice(0, 1)).num_rows == 0
    got = m.process(busy)  # watermark 54 >= 0 + 50: q's window passed with no n, though q is quiet
    assert got.column("stage").to_pylist() == ["a"] and got.column("row").to_pylist() == [0]


def test_integer_times_that_look_like_another_unit_warn():
    """Integer time is read as milliseconds unless time_unit says otherwise: epoch seconds with a
    duration window (a window 1,000 times too wide) get a warning naming the likely unit."""
    import warnings
    p = RISE.within("10s")
    secs = pa.table({"sym": ["a"] * 3, "ts": pa.array([1_700_000_000, 1_700_000_001, 1_700_000_002], pa.int64()),
                     "price": [11.0, 12.0, 5.0]})
    with pytest.warns(cc.ColcepWarning, match=r"epoch seconds .* time_unit='s'"):
        cc.match(secs, p, key="sym")
    millis = secs.set_column(1, "ts", pa.array([1_700_000_000_000, 1_700_000_000_500, 1_700_000_001_000]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cc.match(secs, p, key="sym", time_unit="s").num_rows == 3  # explicit: no warning
        assert cc.match(millis, p, key="sym").num_rows == 3              # ms data: no warning
        cc.match(secs, RISE, key="sym")                                   # integer window: no warning


def test_snapshot_before_any_row_is_released():
    """Event time: a snapshot taken while every row still waits for the watermark restores, and
    snapshots again (the key's type comes from the bound schema)."""
    tbl = _ticks(50)
    m = cc.Matcher(RISE, key="sym", time="ts", out_of_orderness="watermarks")
    m.process(tbl)
    again = cc.Matcher.restore(RISE, cc.Matcher.restore(RISE, m.snapshot()).snapshot())
    out = pa.concat_tables([again.process(tbl.slice(0, 0), watermark=10**6), again.close()])
    want = pa.concat_tables([m.process(tbl.slice(0, 0), watermark=10**6), m.close()])
    assert out.equals(want) and out.num_rows > 0


def test_introspection_for_operators():
    """is_idle, next_deadline, matches_emitted, rows_received, keys: what a stateful operator
    (Spark streaming) needs to decide whether to keep a Matcher and when to wake it."""
    p = (cc.Pattern.begin("a").where((col("price") > 10) & (col("price") < 100))
         .followed_by("b").where(col("price") > 100).within(50))
    m = cc.Matcher(p, key="sym", time="ts")
    assert m.is_idle and m.next_deadline is None and m.keys == []
    m.process(pa.table({"sym": ["x", "y"], "ts": pa.array([5, 7], pa.int64()), "price": [11.0, 1.0]}))
    assert not m.is_idle and m.next_deadline == 55 and m.keys == ["x", "y"] and m.rows_received == 2
    m.process(pa.table({"sym": ["x"], "ts": pa.array([9], pa.int64()), "price": [200.0]}))
    assert m.matches_emitted == 1 and m.is_idle and m.next_deadline is None
    top = cc.Matcher(p, key="sym", time="ts")
    top.process(pa.table({"sym": ["x"], "ts": pa.array([I64.max - 3], pa.int64()), "price": [11.0]}))
    assert top.next_deadline == int(I64.max)  # saturates
