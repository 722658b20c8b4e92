"""colcep on Spark Structured Streaming (``colcep.spark.match_stream``).

The first tests drive the per-key step (``colcep.spark.stream.step``) without Spark, through a
small model of Spark's micro-batch loop (watermark = max event time of the earlier batches -
delay, event-time timeouts of keys without rows, a last no-data batch), and compare with the
in-process batch matcher over the same rows minus the late ones: micro-batch splits, rows out
of order within the watermark delay, late rows, quiet keys whose windows expire, capacity
bounds. The ``spark`` test runs real queries on a file source fed one file per micro-batch, in
a child process (``python tests/test_spark_stream.py job ...``) that is killed mid-batch and
restarted from the checkpoint at several points, and checks that the sink holds exactly the
output of an uninterrupted run and the matches of ``colcep.spark.match`` over the same rows.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import colcep
from colcep import CapacityError, col, last
from colcep.tools.examples import get_example
from colcep.spark.stream import KeyState, step, stream_spec, timer_ms
from colcep.tools.ticks import make_ticks
from spark_settings import JAVA_OPTIONS

BASE_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds
DELAY_US = 5_000_000             # the watermark delay of these tests: 5 s
SENTINEL = "ZZZZ"                # a key whose one far-future row moves the watermark past everything


def ticks_us(n: int, symbols: int, seed: int, spread: int = 30, base: int = BASE_US) -> pa.Table:
    """Generated ticks with ``ts`` in microseconds from ``base`` (2026-01-01), ``spread`` x slower
    than make_ticks' (so that 30 s windows expire within the stream)."""
    t = make_ticks(n, symbols, seed)
    ts = pc.add(pc.multiply(t.column("ts"), 1000 * spread), base)
    return t.set_column(t.schema.get_field_index("ts"), "ts", ts)


def arrival(t: pa.Table, files: int, seed: int, late: int) -> list[pa.Table]:
    """Split ``t`` into ``files`` micro-batches in a shuffled arrival order: each row may
    arrive up to 3 s after rows with later times (within the 5 s delay), and ``late`` rows
    arrive one file after they would have (more than the delay behind)."""
    rng = np.random.default_rng(seed)
    ts = t.column("ts").to_numpy()
    key = ts + rng.integers(0, 3_000_000, len(ts))  # out of order within 3 s
    order = np.argsort(key, kind="stable")
    bounds = np.linspace(0, len(order), files + 1).astype(int)
    parts = [list(order[bounds[i]:bounds[i + 1]]) for i in range(files)]
    moved = 0
    for i in range(files - 2):
        if moved >= late:
            break
        # the first rows of batch i arrive two batches later: far behind the watermark then
        take = parts[i][:max(1, late // (files - 2))]
        parts[i] = parts[i][len(take):]
        parts[i + 2] = parts[i + 2] + take
        moved += len(take)
    return [t.take(pa.array(p, pa.int64())) for p in parts]


def sentinel_row(t: pa.Table) -> pa.Table:
    last = int(pc.max(t.column("ts")).as_py())
    row = {c: t.column(c)[:1].to_pylist() for c in t.column_names}
    row.update(id=[10**9], name=[SENTINEL], ts=[last + 3600 * 10**6])
    return pa.table(row, schema=t.schema)


def model(spec, batches: list[pa.Table], delay_us: int = DELAY_US, buckets: int = 0):
    """Spark's micro-batch loop for one stateful operator, with ``step`` per group (a key, or
    with ``buckets`` a bucket of keys, ``crc32(key) mod buckets``): each batch sees the watermark
    of the batches before it (max time - delay, in ms as Spark keeps it); groups with rows are
    called, then groups without rows whose event-time timeout (set in ms as match_stream sets it)
    the watermark has passed; a no-data batch runs when the last batch moved the watermark.
    Returns (output, states per group, calls per batch)."""
    states: dict = {}
    timers: dict = {}
    outs: list = []
    calls: list = []
    max_ms = None
    wm_ms = 0

    def timer(wake):  # as match_stream sets it, checked as Spark's setTimeoutTimestamp checks it
        if wake is None:
            return None
        ms = timer_ms(wake, wm_ms)
        assert ms > 0 and ms >= wm_ms
        return ms

    def run(batch):
        wm = wm_ms * 1000 if wm_ms > 0 else None
        by = {}
        if batch is not None:  # Spark's groupBy(key columns...): a null key is a group too
            vals = list(zip(*(batch.column(c).to_pylist() for c in spec.key_columns)))
            vals = [v[0] for v in vals] if len(spec.key_columns) == 1 else vals
            if buckets:
                vals = [zlib.crc32(repr(v).encode()) % buckets for v in vals]
            for k in dict.fromkeys(vals):
                by[k] = batch.filter(pa.array([v == k for v in vals]))
        n = 0
        for k in sorted(by, key=_null_last):
            out, states[k], wake = step(spec, by[k], states.get(k), wm)
            timers[k] = timer(wake)
            outs.append(out)
            n += 1
        for k in sorted(timers, key=_null_last):
            if k not in by and timers[k] is not None and timers[k] < wm_ms:
                out, states[k], wake = step(spec, None, states[k], wm)
                timers[k] = timer(wake)
                outs.append(out)
                n += 1
        calls.append(n)

    for b in batches:
        run(b)
        mx = int(pc.max(b.column(spec.time)).as_py()) // 1000  # (Spark's max skips null times)
        max_ms = mx if max_ms is None else max(max_ms, mx)
        new = max_ms - delay_us // 1000
        wm_ms = max(wm_ms, new)
    run(None)  # the no-data batch at the final watermark
    return pa.concat_tables(outs), states, calls


def _null_last(k):
    return (k is None, k)


def canon(t: pa.Table, key: str = "name") -> Counter:
    """Matches as a multiset of (key, timed_out, ((stage, row), ...)), independent of ids."""
    if "late" in t.column_names:
        t = t.filter(pc.invert(t.column("late")))
    if "rejected" in t.column_names:
        t = t.filter(pc.is_null(t.column("rejected")))
    d = t.to_pydict()
    m: dict = {}
    for i in range(t.num_rows):
        to = d["timed_out"][i] if "timed_out" in d else False
        m.setdefault((d[key][i], d["match_id"][i]), [(d[key][i], to), []])[1].append((d["stage"][i], d["row"][i]))
    return Counter((k, tuple(v)) for k, v in m.values())


def batch_matches(t: pa.Table, pattern, timeouts: bool) -> pa.Table:
    """The in-process batch result, ``row`` the tick's id."""
    out = colcep.match(t, pattern, key="name", time="ts", time_unit="us", timeouts=timeouts, columns=["id"])
    return out.set_column(out.schema.get_field_index("row"), "row", out.column("id"))


def late_ids(t: pa.Table) -> set:
    return set(t.filter(t.column("late")).column("row").to_pylist())


def without(t: pa.Table, ids: set) -> pa.Table:
    return t.filter(pc.invert(pc.is_in(t.column("id"), pa.array(sorted(ids), pa.int64()))))


def expected_late(batches: list[pa.Table], delay_us: int = DELAY_US) -> set:
    """Rows at or behind the watermark of their micro-batch (Spark's rule)."""
    out, max_ms, wm_ms = set(), None, 0
    for b in batches:
        ts = b.column("ts").to_numpy()
        if wm_ms > 0:
            out |= set(np.asarray(b.column("id"))[ts <= wm_ms * 1000].tolist())
        mx = int(ts.max()) // 1000
        max_ms = mx if max_ms is None else max(max_ms, mx)
        wm_ms = max(wm_ms, max_ms - delay_us // 1000)
    return out


# ============================================================================ the step, no Spark
CASES = [("paper_query3", ["price", "volume", "ts"]),       # Kleene plus, within 30 s, skip past last
         ("spike_no_recovery", ["price", "ts"]),            # trailing not_followed_by within 5 min
         ("three_rising", ["price"]),                       # no window
         ("gap_rise", ["price"])]                           # windows between consecutive events (3 s)
GAP_RISE = (colcep.Pattern.begin("a").where(col("volume") > 700)
            .followed_by("b").where(col("price") > last("price", of="a")).within("3s", between="previous_and_current")
            .followed_by("c").where(col("price") < last("price", of="b")).within("3s", between="previous_and_current")
            .within("30s"))


def case_pattern(name: str):
    return GAP_RISE if name == "gap_rise" else get_example(name).pattern


@pytest.mark.parametrize("name,columns", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("files", [1, 4, 11])
def test_stream_equals_batch_minus_late_rows(name, columns, files):
    pattern = case_pattern(name)
    t = ticks_us(3000, 8, 5)
    spec = stream_spec(t.schema, pattern, "name", "ts", columns, seq="id", timeouts=True)
    batches = arrival(t, files, seed=files, late=12 if files > 2 else 0)
    got, states, _ = model(spec, batches + [sentinel_row(t)])
    late = late_ids(got)
    assert late == expected_late(batches)
    assert (len(late) > 0) == (files > 2)
    want = batch_matches(without(t, late), pattern, timeouts=True)
    assert canon(got) == canon(want) and sum(canon(want).values()) > 5
    # late rows come out with their columns, once each
    lt = got.filter(got.column("late"))
    assert lt.num_rows == len(late) and lt.column("match_id").null_count == lt.num_rows
    # (key, match_id) identifies a match; ids count up per key from 0
    m = got.filter(pc.invert(got.column("late")))
    for k in set(m.column("name").to_pylist()):
        ids = sorted(set(m.filter(pc.equal(m.column("name"), k)).column("match_id").to_pylist()))
        assert ids == list(range(len(ids)))
    # the output columns are the input's values at those rows
    by_id = {i: j for j, i in enumerate(t.column("id").to_pylist())}
    idx = pa.array([by_id[r] for r in m.column("row").to_pylist()], pa.int64())
    assert m.column("price").to_pylist() == t.column("price").take(idx).to_pylist()
    if "ts" in columns:
        assert pc.cast(m.column("ts"), pa.int64()).to_pylist() == t.column("ts").take(idx).to_pylist()


@pytest.mark.parametrize("name,columns", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seq", ["id", None])
def test_buckets_of_keys_match_as_a_group_per_key(name, columns, seq):
    """State per bucket of keys (match_stream's default): each key's matches, time-outs and late
    rows are those of a group per key; (key, match_id) identifies a match; a replay of the same
    batches gives the same output to the row."""
    pattern = case_pattern(name)
    t = ticks_us(3000, 8, 5)
    spec = stream_spec(t.schema, pattern, "name", "ts", columns, seq=seq, timeouts=True)
    batches = arrival(t, 4, seed=4, late=12) + [sentinel_row(t)]
    per_key, _, _ = model(spec, batches)
    bucketed, states, calls = model(spec, batches, buckets=3)
    assert len(states) <= 3 and max(calls) <= 3
    if seq is not None:
        assert canon(bucketed) == canon(per_key) and sum(canon(per_key).values()) > 5
        assert late_ids(bucketed) == late_ids(per_key) == expected_late(batches[:-1])
    else:  # a row's number counts within its group: the matches' keys, kinds and stages agree
        def stages(c: Counter) -> Counter:
            out: Counter = Counter()
            for (k, ev), n in c.items():
                out[(k, tuple(s for s, _ in ev))] += n
            return out
        assert stages(canon(bucketed)) == stages(canon(per_key)) and sum(canon(per_key).values()) > 5
    assert bucketed.filter(bucketed.column("late")).num_rows == per_key.filter(per_key.column("late")).num_rows > 0
    m = bucketed.filter(pc.is_valid(bucketed.column("match_id")))
    pairs = Counter(zip(m.column("name").to_pylist(), m.column("match_id").to_pylist(), m.column("stage").to_pylist(),
                        m.column("row").to_pylist()))
    assert max(pairs.values()) == 1  # no event twice in one (key, match_id)
    # a replay gets the rows of each micro-batch in another order (Spark's shuffle does not keep it)
    rng = np.random.default_rng(1)
    again, _, _ = model(spec, [b.take(pa.array(rng.permutation(b.num_rows))) for b in batches], buckets=3)
    assert again.equals(bucketed)


def test_buckets_replay_equal_with_a_seq_per_key():
    """seq numbers each key's rows (as a per-symbol sequence does): rows of a bucket's keys share
    (time, seq), and the order they are matched in, so their match ids, is the same on a replay
    that gets them in another order."""
    pattern = get_example("paper_query3").pattern
    t = ticks_us(3000, 8, 5)
    names = t.column("name").to_numpy(zero_copy_only=False)
    n = np.zeros(len(names), np.int64)
    for k in set(names):
        n[names == k] = np.arange(np.count_nonzero(names == k))
    t = t.append_column("n", pa.array(n)).set_column(2, "ts", pc.multiply(pc.divide(t.column("ts"), 10**7), 10**7))
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price"], seq="n", timeouts=True)
    batches = arrival(t, 4, seed=4, late=0) + [sentinel_row(t)]
    first, _, _ = model(spec, batches, buckets=2)
    rng = np.random.default_rng(2)
    for _ in range(3):
        again, _, _ = model(spec, [b.take(pa.array(rng.permutation(b.num_rows))) for b in batches], buckets=2)
        assert again.equals(first)
    assert first.num_rows > 20


def test_history_is_state_a_key_keeps():
    """prev() reaches the key's row of an earlier micro-batch even when the key holds no partial
    match in between (its Matcher is not idle while it carries rows prev reaches): the batch
    path's matches, whether the key has a group of its own or shares a bucket."""
    p = (colcep.Pattern.begin("a").where(col("price") > colcep.prev("price") + 5)
         .followed_by("b").where(col("price") > 1000).within("1h"))
    t = pa.table({"id": pa.array(range(5), pa.int64()), "name": ["A", "A", "B", "A", "A"],
                  "ts": pa.array([BASE_US + i * 10**6 for i in range(5)], pa.int64()),
                  "price": [100.0, 90.0, 50.0, 96.0, 1500.0], "volume": [1.0] * 5})
    want = batch_matches(t, p, timeouts=False)
    assert want.column("row").to_pylist() == [3, 4]  # a = 96 (> 90 + 5), b = 1500
    spec = stream_spec(t.schema, p, "name", "ts", ["price"], seq="id")
    # A's first rows are matched (and its Matcher holds no partial match) before 96 arrives
    batches = [t.slice(0, 2), t.slice(2, 1), t.slice(3, 1), t.slice(4, 1), sentinel_row(t)]
    for buckets in (0, 1):
        got, _, _ = model(spec, batches, delay_us=0, buckets=buckets)
        assert canon(got) == canon(want), buckets


def test_stream_composite_key():
    """key=["name", "venue"]: one state per (name, venue), the batch path's matches."""
    pattern = get_example("paper_query3").pattern
    t = ticks_us(2000, 5, 6)
    t = t.append_column("venue", pa.array(t.column("id").to_numpy() % 2))
    spec = stream_spec(t.schema, pattern, ["name", "venue"], "ts", ["price"], seq="id", timeouts=True)
    assert spec.out_schema.names[:4] == ["match_id", "name", "venue", "stage"]
    batches = arrival(t, 4, seed=3, late=6)
    got, states, _ = model(spec, batches + [sentinel_row(t)])
    late = late_ids(got)
    assert late == expected_late(batches) and late
    assert set(states) == set(zip(t.column("name").to_pylist(), t.column("venue").to_pylist())) | {(SENTINEL, 0)}
    want = colcep.match(without(t, late), pattern, key=["name", "venue"], time="ts", time_unit="us", timeouts=True,
                        columns=["id"])
    want = want.set_column(want.schema.get_field_index("row"), "row", want.column("id"))

    def joined(x):
        return x.append_column("k", pc.binary_join_element_wise(x.column("name"), pc.cast(x.column("venue"),
                                                                                          pa.string()), "|"))
    assert canon(joined(got), "k") == canon(joined(want), "k") and sum(canon(want).values()) > 5


@pytest.mark.parametrize("name,window_s,spread", [("paper_query3", 30, 30), ("spike_no_recovery", 300, 200)])
@pytest.mark.parametrize("buckets", [0, 2])
def test_quiet_keys_time_out_at_the_watermark(name, window_s, spread, buckets):
    """Keys that stop sending rows: their open partial matches time out, and a trailing
    not_followed_by emits, on the event-time timer alone (no later row of theirs), whether a quiet
    key has a group of its own or shares a bucket with busy keys."""
    t = ticks_us(4000, 6, 9, spread=spread)
    names = t.column("name").to_numpy(zero_copy_only=False)
    ts = t.column("ts").to_numpy()
    cut = BASE_US + (int(ts.max()) - BASE_US) // 3
    quiet = {"S0000", "S0001", "S0002"}
    keep = ~(np.isin(names, list(quiet)) & (ts > cut))  # three keys go quiet after a third of the stream
    t, ts = t.filter(pa.array(keep)), ts[keep]
    # each quiet key's last row is a 1 % spike that nothing follows (a trailing not_followed_by)
    price = t.column("price").to_numpy().copy()
    names = t.column("name").to_numpy(zero_copy_only=False)
    for k in quiet:
        rows = np.flatnonzero(names == k)
        price[rows[-1]] = price[rows[-2]] * 1.01
    t = t.set_column(t.schema.get_field_index("price"), "price", pa.array(price))
    pattern = case_pattern(name)
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price"], seq="id", timeouts=True)
    got, states, calls = model(spec, arrival(t, 6, seed=3, late=0), buckets=buckets)  # the others move the watermark
    want = batch_matches(t, pattern, timeouts=True)
    # a quiet key's matches whose window ended by the final watermark are out, no others
    wm_final = int(ts.max()) // 1000 * 1000 - DELAY_US
    start = dict(zip(t.column("id").to_pylist(), ts.tolist()))
    gq = Counter({m: c for m, c in canon(got).items() if m[0][0] in quiet})
    due = Counter({m: c for m, c in canon(want).items()
                   if m[0][0] in quiet and start[m[1][0][1]] + window_s * 10**6 <= wm_final})
    assert gq == due
    assert sum(due.values()) >= 3
    assert any(to for (_, to), _ in due)  # timed-out partial matches
    if name == "spike_no_recovery":  # and the spikes with no recovery, released by the window's end alone
        assert sum(1 for (k, to), ev in due if not to and [s for s, _ in ev] == ["base", "spike"]) == len(quiet)
    if not buckets:  # once their windows are over the quiet keys hold no partial match, only their id counters
        for k in quiet:
            assert states[k].snapshot is None and states[k].pending is None
    assert calls[-1] > 0  # the last, no-data batch called groups on their timers


def test_state_collapses_when_a_key_holds_nothing_and_ids_continue():
    pattern = get_example("paper_query3").pattern
    t = ticks_us(3000, 4, 2)
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price"], seq="id", timeouts=True)
    got, states, _ = model(spec, arrival(t, 5, 1, 0) + [sentinel_row(t)])
    for k, s in states.items():
        if k != SENTINEL:
            assert s.snapshot is None and s.id_base == len(canon(got.filter(pc.equal(got.column("name"), k))))
    # a key that comes back after its state collapsed continues its ids
    again = t.filter(pc.equal(t.column("name"), "S0001")).slice(0, 400)
    again = again.set_column(2, "ts", pc.add(again.column("ts"), 10**10))
    again = again.set_column(0, "id", pc.add(again.column("id"), 10**8))
    out, s1, _ = step(spec, again, states["S0001"], None)
    assert out.num_rows == 0 and s1.pending is not None  # the rows wait for the watermark
    out2, s2, _ = step(spec, None, s1, BASE_US + 10**12)
    ids = pa.concat_tables([out, out2]).column("match_id").to_pylist()
    assert ids and min(ids) == states["S0001"].id_base and s2.pending is None


def test_replaying_a_batch_gives_the_same_output():
    """What a restart does: the same batch on the same stored state, rows in another order."""
    pattern = get_example("paper_query3").pattern
    t = ticks_us(2000, 1, 4)
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price"], seq="id", timeouts=True)
    a, b = t.slice(0, 1200), t.slice(1200)
    o1, s1, w1 = step(spec, a, None, None)
    wm = int(pc.max(a.column("ts")).as_py()) - DELAY_US
    o2, s2, w2 = step(spec, b, s1, wm)
    o2r, s2r, w2r = step(spec, b.take(pa.array(np.random.default_rng(0).permutation(b.num_rows))), s1, wm)
    assert o2.equals(o2r) and s2 == s2r and w2 == w2r


def test_capacity_bounds_per_key():
    """A key over a bound fails its call with CapacityError naming the key and the figures;
    the bounds are per key (each key's Matcher and stored state)."""
    p = (colcep.Pattern.begin("a").where(col("price") > 0).followed_by_any("b").where(col("price") > 0)
         .within("1h"))
    t = ticks_us(400, 2, 1)
    one = t.filter(pc.equal(t.column("name"), "S0000"))
    wm = int(pc.max(one.column("ts")).as_py())
    spec = stream_spec(t.schema, p, "name", "ts", ["price"], seq="id", max_partial_matches=50)
    _, s, _ = step(spec, one, None, None)  # the rows wait for the watermark: nothing matched yet
    with pytest.raises(CapacityError, match=r"key 'S0000' holds \d+ live partial matches, over the bound "
                                            r"max_partial_matches=50"):
        step(spec, None, s, wm)
    ok = stream_spec(t.schema, p, "name", "ts", ["price"], seq="id", max_partial_matches=10_000)
    _, s2, _ = step(ok, one.slice(0, 40), None, None)
    _, s2, _ = step(ok, None, s2, wm)  # 40 rows: under the bound
    assert s2.snapshot is not None
    # max_state_bytes bounds what the key's Matcher allocates (here the kernel's work arrays first) ...
    small = stream_spec(t.schema, p, "name", "ts", ["price"], seq="id", max_state_bytes=20_000)
    _, s3, _ = step(small, one.slice(0, 150), None, None)
    with pytest.raises(CapacityError, match=r"key 'S0000' .* max_state_bytes=20,000"):
        step(small, None, s3, wm)
    # ... and the stored state, rows waiting for the watermark included
    with pytest.raises(CapacityError, match=r"key 'S0000': its state is [\d,]+ bytes \(0 live partial matches, "
                                            r"150 rows waiting for the watermark\), over the bound "
                                            r"max_state_bytes=2,000"):
        step(stream_spec(t.schema, p, "name", "ts", ["price"], seq="id", max_state_bytes=2_000), one.slice(0, 150),
             None, None)


def test_capacity_error_of_a_bucket_names_its_keys():
    p = (colcep.Pattern.begin("a").where(col("price") > 0).followed_by_any("b").where(col("price") > 0)
         .within("1h"))
    t = ticks_us(400, 7, 1)
    spec = stream_spec(t.schema, p, "name", "ts", ["price"], seq="id", max_state_bytes=2_000)
    with pytest.raises(CapacityError, match=r"the bucket of keys 'S000\d', 'S000\d', 'S000\d', 'S000\d', 'S000\d' "
                                            r"and 2 more: its state is [\d,]+ bytes \(0 live partial matches, 400 rows "
                                            r"waiting for the watermark\), .* spread the keys over more buckets"):
        step(spec, t, None, None)


def test_a_restart_with_other_buckets_fails_at_once():
    from colcep.spark.stream import check_buckets

    check_buckets(8, 8)
    check_buckets(0, 0)
    with pytest.raises(colcep.InputError, match=r"checkpoint holds state kept in 8 buckets of keys, but match_stream "
                                                r"now groups the keys in 16 buckets of keys; restart it with "
                                                r"match_stream\(\.\.\., buckets=8\)"):
        check_buckets(8, 16)
    with pytest.raises(colcep.InputError, match=r"kept in a group per key \(buckets=0\), .* buckets=0\)"):
        check_buckets(0, 8)


def test_buckets_argument():
    from colcep.spark.stream import BUCKETS_PER_PARTITION, _n_buckets

    class Conf:
        def get(self, name, default=None):
            return {"spark.sql.shuffle.partitions": "6"}.get(name, default)

    class Spark:
        conf = Conf()

    assert _n_buckets(Spark(), None) == 6 * BUCKETS_PER_PARTITION
    assert _n_buckets(Spark(), 0) == 0 and _n_buckets(Spark(), 5) == 5 and _n_buckets(Spark(), np.int64(3)) == 3
    for bad in (-1, 2.5, True, "8"):
        with pytest.raises(colcep.InputError, match=r"buckets must be a whole number >= 0 \(0: a group per key\)"):
            _n_buckets(Spark(), bad)


def test_stream_spec_errors():
    t = ticks_us(10, 1, 1)
    pattern = get_example("paper_query3").pattern
    with pytest.raises(colcep.InputError, match="needs a key"):
        stream_spec(t.schema, pattern, None, "ts")
    with pytest.raises(colcep.InputError, match="'late' clashes"):
        stream_spec(t.append_column("late", pa.array([True] * 10)).schema, pattern, "name", "ts")


def with_bad_rows(batches: list[pa.Table], per_batch: int = 1) -> tuple[list[pa.Table], Counter]:
    """Copies of rows of each batch spoiled in each way (a null key, a null time, a null seq, a
    null key and time), inserted among the batch's rows; each copy's price marks it. Returns the
    batches and the multiset of (reason, row, price) they must come out flagged with."""
    out, want, mark = [], Counter(), 10**6
    spoils = [({"name": None}, "key column 'name' is null"), ({"ts": None}, "time column 'ts' is null"),
              ({"id": None}, "seq column 'id' is null"), ({"name": None, "ts": None}, "key column 'name' is null")]
    for i, b in enumerate(batches):
        rows = b.to_pylist()
        for j in range(per_batch):
            for spoil, reason in spoils:
                r = dict(rows[(7 * i + 3 * j + len(rows) // 2) % len(rows)], price=float(mark), id=10**8 + mark)
                r.update(spoil)
                rows.insert(mark % len(rows), r)
                want[(reason, r["id"], r["price"])] += 1
                mark += 1
        out.append(pa.Table.from_pylist(rows, schema=b.schema))
    return out, want


def rejected_rows(t: pa.Table) -> Counter:
    bad = t.filter(pc.is_valid(t.column("rejected")))
    assert bad.column("match_id").null_count == bad.num_rows and not any(bad.column("late").to_pylist())
    return Counter(zip(bad.column("rejected").to_pylist(), bad.column("row").to_pylist(),
                       bad.column("price").to_pylist()))


def test_timer_is_positive_and_not_behind_the_watermark():
    """Spark takes an event-time timeout > 0 and >= its watermark, and calls the key once the
    watermark is past it: a deadline at or before 1970 is clamped to 1 ms."""
    assert timer_ms(0, 0) == 1 and timer_ms(-90 * 10**6, 0) == 1 and timer_ms(-2**62, 0) == 1
    assert timer_ms(2001, 0) == 2          # called at watermark >= 3 ms: past 2.001 ms
    assert timer_ms(2000, 0) == 1          # called at watermark >= 2 ms
    assert timer_ms(BASE_US, 5) == BASE_US // 1000 - 1
    assert timer_ms(2001, 50) == 50        # never behind the watermark


def test_rows_from_pandas_as_table_from_pandas_gives_them():
    """A key's rows come from Spark as pandas and are converted column by column: the table is
    the one ``pa.Table.from_pandas`` gives (nulls of every kind, NaN as null, an integer column
    with nulls that pandas holds as floats, strings, timestamps with a zone, booleans), extra
    columns (Spark's watermark column) left out."""
    import pandas as pd

    from colcep.spark.stream import _from_pandas

    pdf = pd.DataFrame({
        "name": ["a", None, "c", "a"],
        "ts": np.array([1, 2, 3, 2**62], np.int64),
        "price": [1.5, np.nan, float("inf"), -0.0],
        "id": [1.0, np.nan, 3.0, 4.0],  # Spark's long column with a null, as pandas holds it
        "flag": [True, None, False, True],
        "at": pd.to_datetime([0, 10**15, None, -(10**15)], unit="us", utc=True),
        "__colcep_wm": pd.Timestamp("2261-12-31"),
    })
    schema = pa.schema([("name", pa.string()), ("ts", pa.int64()), ("price", pa.float64()), ("id", pa.int64()),
                        ("flag", pa.bool_()), ("at", pa.timestamp("us", tz="UTC"))])
    want = pa.Table.from_pandas(pdf[schema.names], schema=schema, preserve_index=False)
    got = _from_pandas(pdf, schema)
    assert got.equals(want) and got.schema == schema
    assert got.column("price").null_count == 1 and got.column("id").to_pylist() == [1, None, 3, 4]


@pytest.mark.parametrize("base", [-30_000, -90 * 10**6], ids=["1970", "before-1970"])  # (first tick: 0, -90 s)
@pytest.mark.parametrize("bad", [False, True], ids=["clean", "bad-rows"])
def test_stream_near_1970_and_bad_rows(base, bad):
    """Event times from 1970-01-01T00:00:00 (and from 90 s before it), with and without bad rows of each
    kind: the bad rows come out flagged with their reason, seq and columns; every other row is
    matched as if they were not there, and late rows are Spark's."""
    pattern = get_example("paper_query3").pattern
    t = ticks_us(3000, 8, 5, base=base)
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price", "volume", "ts"], seq="id", timeouts=True)
    batches = arrival(t, 6, seed=4, late=12)
    fed, want_bad = with_bad_rows(batches) if bad else (batches, Counter())
    got, states, _ = model(spec, fed + [sentinel_row(t)])
    assert rejected_rows(got) == want_bad
    late = late_ids(got)
    assert late == expected_late(batches) and late
    want = batch_matches(without(t, late), pattern, timeouts=True)
    assert canon(got) == canon(want) and sum(canon(want).values()) > 5
    if bad:  # the null key's group leaves the empty state, which match_stream does not store
        assert states[None] == KeyState()
        # a rejected row's columns are its own
        r = got.filter(pc.is_valid(got.column("rejected")))
        assert sorted(r.column("ts").is_null().to_pylist()).count(True) == 2 * len(batches)


def test_bad_rows_fail_names_the_row():
    t = ticks_us(40, 2, 1)
    spec = stream_spec(t.schema, get_example("paper_query3").pattern, "name", "ts", ["price"], seq="id",
                       bad_rows="fail")
    (b,), _ = with_bad_rows([t])
    with pytest.raises(colcep.InputError, match=r"key column 'name' is null in the row id=101000000 "
                                                r"\{'name': None, 'ts': \d+, 'id': 101000000, "):
        step(spec, b.filter(pc.is_null(b.column("name"))), None, None)
    with pytest.raises(colcep.InputError, match=r"time column 'ts' is null in the row id=101000001 "):
        step(spec, b.filter(pc.is_null(b.column("ts"))), None, None)
    with pytest.raises(colcep.InputError, match=r"bad_rows must be one of \('flag', 'fail'\), got 'skip'"):
        stream_spec(t.schema, get_example("paper_query3").pattern, "name", "ts", bad_rows="skip")
    # NaN keys cannot come: a floating-point key column is refused before the query starts
    with pytest.raises(colcep.InputError, match="key column 'price' must be a string, integer or boolean"):
        stream_spec(t.schema, get_example("paper_query3").pattern, "price", "ts")


# ============================================================================ on Spark
SCHEMA_DDL = "id long, name string, ts timestamp, price double, volume double"
PATTERN = "paper_query3"
COLUMNS = ["price", "volume", "ts"]


def write_files(folder: Path, batches: list[pa.Table]) -> None:
    """One Parquet file per micro-batch, with increasing modification times (the order the
    file source takes them in)."""
    folder.mkdir(parents=True)
    for i, b in enumerate(batches):
        ts = pc.cast(b.column("ts"), pa.timestamp("us", tz="UTC"))
        p = folder / f"part-{i:03d}.parquet"
        pq.write_table(b.set_column(2, "ts", ts), p)
        os.utime(p, (1_700_000_000 + i, 1_700_000_000 + i))


def sink_table(out: Path) -> pa.Table:
    """The rows a file sink committed (its _spark_metadata log), ignoring files of batches that
    were written but not committed."""
    log = out / "_spark_metadata"
    entries = sorted((p for p in log.iterdir() if p.name.split(".")[0].isdigit() and not p.name.endswith(".crc")),
                     key=lambda p: int(p.name.split(".")[0]))
    last_compact = max([i for i, p in enumerate(entries) if p.name.endswith(".compact")], default=0)
    files: dict = {}
    for p in entries[last_compact:]:
        lines = p.read_text().splitlines()[1:]
        for ln in lines:
            e = json.loads(ln)
            if e.get("action", "add") == "add":
                files[e["path"]] = True
            else:
                files.pop(e["path"], None)
    tables = [pq.read_table(f.replace("file://", "")) for f in sorted(files)]
    return pa.concat_tables(tables) if tables else pa.table({})


def run_job(tmp: Path, name: str, kill: str | None = None, timeout: int = 900, buckets: int | None = None) -> int:
    """The job below in a child process; ``buckets``: match_stream's (None: its default)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    if buckets is not None:
        env["COLCEP_TEST_BUCKETS"] = str(buckets)
    args = [sys.executable, __file__, "job", str(tmp / "in"), str(tmp / name)]
    if kill:
        args.append(kill)
    r = subprocess.run(args, env=env, start_new_session=True, capture_output=True, text=True, timeout=timeout)
    if r.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"job {name} {kill} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return r.returncode


def rows_multiset(t: pa.Table) -> Counter:
    d = t.select(sorted(t.column_names)).to_pylist()
    return Counter(tuple(sorted(r.items())) for r in d)


@pytest.mark.spark
def test_spark_stream_exactly_once_and_equal_to_batch(tmp_path):
    t = ticks_us(2400, 6, 21)
    batches = arrival(t, 4, seed=2, late=10)
    write_files(tmp_path / "in", batches + [sentinel_row(t)])
    # an uninterrupted run (it also runs colcep.spark.match over the same rows)
    assert run_job(tmp_path, "clean") == 0
    clean = sink_table(tmp_path / "clean" / "out")
    # killed mid-batch: in the stateful stage of batch 1 (after some keys' state was written),
    # before the shuffle of batch 2, in the stateful stage of batch 3 (late rows in it); each
    # time restarted from the checkpoint
    for kill in ("post:1", "pre:2", "post:3"):
        assert run_job(tmp_path, "killed", kill) == -signal.SIGKILL
    assert run_job(tmp_path, "killed") == 0
    killed = sink_table(tmp_path / "killed" / "out")
    assert clean.num_rows > 50
    assert rows_multiset(killed) == rows_multiset(clean)
    # the same matches as colcep.spark.match over the rows that were not late
    late = late_ids(clean)
    assert late == expected_late(batches) and len(late) > 0
    batch = pq.read_table(tmp_path / "clean" / "batch.parquet")
    assert canon(clean) == canon(batch) and sum(canon(batch).values()) > 10
    assert Counter(r for (k, to), _ in canon(clean) for r in [to])[True] > 0  # time-outs came out
    report = json.loads((tmp_path / "clean" / "report.json").read_text())
    # 7 keys in 8 buckets (2 shuffle partitions): a group per bucket that holds a key
    assert report["groups"] == report["buckets_with_keys"] <= 7 and report["bytes_per_group"] > 0


@pytest.mark.spark
def test_spark_stream_near_1970_with_bad_rows(tmp_path):
    """A real query over ticks from 90 s before 1970 (Spark's watermark starts at 0 and the
    first event-time timers fall at or before it), with bad rows of each kind in every file, a
    group per key (buckets=0): the query runs through, the bad rows come out flagged, the rest as
    colcep.spark.match gives them."""
    t = ticks_us(2400, 6, 21, base=-90 * 10**6)
    batches = arrival(t, 4, seed=2, late=10)
    fed, want_bad = with_bad_rows(batches)
    write_files(tmp_path / "in", fed + [sentinel_row(t)])
    assert run_job(tmp_path, "clean", buckets=0) == 0
    clean = sink_table(tmp_path / "clean" / "out")
    assert rejected_rows(clean) == want_bad
    report = json.loads((tmp_path / "clean" / "report.json").read_text())
    # a group per key: 6 and the sentinel (the null key's group keeps no state)
    assert report["groups"] == report["buckets_with_keys"] == 7
    late = late_ids(clean)
    assert late == expected_late(batches) and len(late) > 0
    batch = pq.read_table(tmp_path / "clean" / "batch.parquet")
    assert canon(clean) == canon(batch) and sum(canon(batch).values()) > 10
    matched = clean.filter(pc.is_valid(clean.column("match_id")))
    assert pc.min(pc.cast(matched.column("ts"), pa.int64())).as_py() < 0  # matched rows before 1970 came out


# ============================================================================ the job (child process)
def _job(src: str, work: str, kill: str | None) -> None:
    """A streaming query over ``src`` (one file per micro-batch) into ``work/out`` with its
    checkpoint in ``work/chk``; ``kill=where:batch`` kills this process group mid-batch."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from colcep.spark import local_session, match, match_stream, state_report

    os.environ["COLCEP_TEST_DRIVER_PGID"] = str(os.getpgid(0))
    spark = local_session(2, shuffle_partitions=2, java_options=JAVA_OPTIONS)
    where, at = (kill.split(":") if kill else (None, None))

    def killer(here: str):
        def fn(batches):
            ctx = TaskContext.get()
            hit = here == where and ctx.getLocalProperty("streaming.sql.batchId") == at and ctx.partitionId() == 0
            for b in batches:  # (after the first batch: the stateful stage has written some keys' state)
                if hit:
                    os.killpg(int(os.environ["COLCEP_TEST_DRIVER_PGID"]), signal.SIGKILL)
                yield b
            if hit:
                os.killpg(int(os.environ["COLCEP_TEST_DRIVER_PGID"]), signal.SIGKILL)
        return fn

    raw = spark.readStream.schema(SCHEMA_DDL).option("maxFilesPerTrigger", 1).parquet(src)
    raw = raw.mapInArrow(killer("pre"), raw.schema)
    ticks = raw.withWatermark("ts", "5 seconds")
    buckets = os.environ.get("COLCEP_TEST_BUCKETS")
    out = match_stream(ticks, get_example(PATTERN).pattern, key="name", time="ts", columns=COLUMNS, seq="id",
                       timeouts=True, buckets=None if buckets is None else int(buckets))
    out = out.mapInArrow(killer("post"), out.schema)
    q = (out.writeStream.format("parquet").option("checkpointLocation", f"{work}/chk").outputMode("append")
         .start(f"{work}/out"))
    final_wm = spark.read.schema(SCHEMA_DDL).parquet(src).agg(F.unix_millis(F.max("ts"))).collect()[0][0] - 5000
    while True:  # until the no-data batch at the final watermark has run
        q.processAllAvailable()
        p = q.lastProgress
        if p and p["numInputRows"] == 0 and p["eventTime"].get("watermark") and \
                _iso_ms(p["eventTime"]["watermark"]) >= final_wm:
            break
        q.awaitTermination(0.5)
    report = state_report(q)
    q.stop()
    if kill is None and not os.path.exists(f"{work}/batch.parquet"):
        sink = spark.read.parquet(f"{work}/out")
        late = [r[0] for r in sink.where("late").select("row").collect()]
        data = spark.read.schema(SCHEMA_DDL).parquet(src).where(  # (the rows a stream rejects: nulls)
            (F.col("name") != SENTINEL) & F.col("ts").isNotNull() & F.col("id").isNotNull())
        data = data.where(~F.col("id").isin(late)) if late else data
        batch = match(data.withColumn("ts", F.unix_micros("ts")), get_example(PATTERN).pattern, key="name",
                      time="ts", columns=["price"], seq="id", timeouts=True, time_unit="us")
        pq.write_table(batch.toArrow(), f"{work}/batch.parquet")
        n = int(buckets) if buckets is not None else 4 * int(spark.conf.get("spark.sql.shuffle.partitions"))
        keys = spark.read.schema(SCHEMA_DDL).parquet(src).where(F.col("name").isNotNull())
        report["buckets_with_keys"] = keys.select(F.pmod(F.hash("name"), F.lit(n)) if n else F.col("name")) \
            .distinct().count()
        Path(f"{work}/report.json").write_text(json.dumps(report))
    spark.stop()


def _iso_ms(s: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "job":
        _job(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
