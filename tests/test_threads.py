"""Keys spread over threads (``threads=``): the output is the same for any thread count (rows,
order, match ids, row positions), a failing batch leaves every shard as it was, Ctrl-C stops
all shards, snapshots move between thread counts, and the figures are summed over shards."""
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, last
from colcep.engine import shards as shd
from colcep.engine import matcher as cm
from colcep.tools.examples import BENCHMARK_PATTERNS
from colcep.tools.ticks import make_ticks
from conformance import case_pattern, case_table, compiles, feed
from interrupts import assert_ctrl_c_stops_cleanly
from randcase import cases

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)

RISE = (cc.Pattern.begin("a").where(col("price") > 10)
        .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
        .followed_by("c").where(col("price") < last("price", of="b"))
        .within(100))


@pytest.fixture
def always_parallel(monkeypatch):
    """Every batch runs its shards on the thread pool, in kernel calls of a few rows."""
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 7)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)


def _keyed(case, n_keys):
    """The case's table with a key column ``k`` of ``n_keys`` values (first seen in a mixed order)."""
    tbl = case_table(case)
    k = (np.arange(tbl.num_rows) * 7 + 3) % n_keys
    return tbl.append_column("k", pa.array([f"key{x}" for x in k]))


def _run(tbl, pattern, sizes, threads, **kw):
    m = cc.Matcher(pattern, key="k", time="ts", threads=threads, **kw)
    out = feed(m, tbl, sizes)
    return out, m.pop_late()


# ----------------------------------------------------------------------------- same output
@SETTINGS
@given(cases(max_events=25), st.lists(st.integers(0, 9), max_size=5), st.booleans(), st.integers(1, 6))
def test_any_thread_count_gives_the_same_output(always_parallel, case, sizes, timeouts, n_keys):
    """Random patterns (every skip strategy, windows, negations, Kleene) over random streams in
    random batches: 2 and 3 threads give exactly the one-thread table."""
    assume(compiles(case))
    tbl, pattern = _keyed(case, n_keys), case_pattern(case)
    one, _ = _run(tbl, pattern, sizes, 1, timeouts=timeouts)
    for threads in (2, 3):
        got, _ = _run(tbl, pattern, sizes, threads, timeouts=timeouts)
        assert got.equals(one)


@SETTINGS
@given(cases(max_events=25), st.lists(st.integers(0, 9), max_size=5), st.integers(0, 4), st.integers(1, 6),
       st.randoms(use_true_random=False))
def test_event_time_gives_the_same_output(always_parallel, case, sizes, delay, n_keys, rnd):
    """Out-of-order rows under out_of_orderness: the watermark is one for all shards, late rows
    and timed-out matches at watermarks come out the same."""
    assume(compiles(case))
    tbl = _keyed(case, n_keys)
    order = list(range(tbl.num_rows))
    for i in range(len(order) - 1):  # local disorder
        if rnd.random() < 0.4:
            order[i], order[i + 1] = order[i + 1], order[i]
    tbl = tbl.take(pa.array(order, pa.int64()))
    pattern = case_pattern(case)
    one, late1 = _run(tbl, pattern, sizes, 1, timeouts=True, out_of_orderness=delay)
    for threads in (2, 3):
        got, late = _run(tbl, pattern, sizes, threads, timeouts=True, out_of_orderness=delay)
        assert got.equals(one)
        assert (late is None and late1 is None) or late.equals(late1)


@pytest.mark.parametrize("name", list(BENCHMARK_PATTERNS))
def test_benchmark_patterns_on_many_keys(always_parallel, monkeypatch, name):
    """The benchmark patterns over ticks of 40 symbols in three batches, all columns and timed-out
    matches out, in kernel calls of the usual size."""
    monkeypatch.setattr(cm, "CHUNK_ROWS", 1 << 10)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 64)
    tbl = make_ticks(12_000, 40, 3).rename_columns(["id", "k", "ts", "price", "volume"])
    pattern = BENCHMARK_PATTERNS[name]
    one, _ = _run(tbl, pattern, [5000, 4000], 1, timeouts=True)
    assert one.num_rows > 0
    for threads in (2, 3, 5):
        assert _run(tbl, pattern, [5000, 4000], threads, timeouts=True)[0].equals(one)


def test_match_spreads_over_threads_with_the_same_output(monkeypatch):
    """colcep.match: threads=None (all cores) and explicit counts give the one-thread table, also
    for an unsorted table (row positions refer to the input as given)."""
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 1000)
    tbl = make_ticks(6000, 30, 5)
    shuffled = tbl.take(pa.array(np.random.default_rng(0).permutation(tbl.num_rows)))
    for data in (tbl, shuffled):
        one = cc.match(data, RISE, key="name", threads=1)
        assert one.num_rows > 0
        for threads in (None, 2, 4):
            assert cc.match(data, RISE, key="name", threads=threads).equals(one)
    with pytest.raises(cc.InputError, match="threads must be a positive integer"):
        cc.match(tbl, RISE, key="name", threads=0)


def test_small_tables_and_one_stream_use_one_thread(monkeypatch):
    tbl = make_ticks(500, 5, 1)
    calls = []
    orig = cc.Matcher.__init__

    def spy(self, *a, **kw):
        orig(self, *a, **kw)
        calls.append(self.threads)

    monkeypatch.setattr(cc.Matcher, "__init__", spy)
    cc.match(tbl, RISE, key="name", threads=4)  # below PARALLEL_MIN_ROWS
    assert calls == [1]
    assert cc.Matcher(RISE, key=None, threads=4).threads == 1  # one stream: nothing to spread
    assert cc.Matcher(RISE, key="name").threads == 1  # the streaming default
    assert cc.Matcher(RISE, key="name", threads=None).threads >= 1


# ----------------------------------------------------------------------------- failures
def _spiky(n_per_key=30):
    """Keys k0..k3 (shards 0, 1, 0, 1 with two threads); k3 opens a partial match at every row."""
    rows = []
    for i in range(n_per_key):
        for k in range(4):
            rows.append((f"k{k}", i, 11.0 + i if k == 3 else 11.0 + (i % 3)))
    return pa.table({"k": [r[0] for r in rows], "ts": pa.array([r[1] for r in rows], pa.int64()),
                     "price": [r[2] for r in rows]})


def test_a_failing_batch_leaves_every_shard_as_it_was(always_parallel):
    """A bound exceeded in one shard rolls back all shards (and the counters); the error names
    the key that exceeded it; the Matcher then continues as if the batch never came."""
    tbl = _spiky()
    first, bad = tbl.slice(0, 40), tbl.slice(40)
    m = cc.Matcher(RISE, key="k", time="ts", threads=2, max_partial_matches=60)
    ok = m.process(first)
    before = (m.snapshot(), m.live_partial_matches, m.buffer_nodes, m.matches_emitted, m.rows_received)
    with pytest.raises(cc.CapacityError, match="key 'k3' holds"):
        m.process(bad)
    assert (m.snapshot(), m.live_partial_matches, m.buffer_nodes, m.matches_emitted, m.rows_received) == before
    calm = bad.filter(pa.compute.not_equal(bad.column("k"), "k3"))
    ref = cc.Matcher(RISE, key="k", time="ts", threads=1, max_partial_matches=60)
    expected = pa.concat_tables([ref.process(first), ref.process(calm), ref.close()])
    assert pa.concat_tables([ok, m.process(calm), m.close()]).equals(expected)


def test_buffer_bound_counts_every_shard(always_parallel):
    """max_state_bytes bounds the state of all shards together: what the others hold is taken
    from a shard's share, so a key that alone would fit fails next to a full shard. (Merged
    Kleene runs without a window: a few runs a key over a buffer linear in its events.)"""
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > 0).one_or_more()
         .followed_by("c").where(col("price") < 0))

    def rising(k, n, t0=0):
        return pa.table({"k": [k] * n, "ts": pa.array(np.arange(t0, t0 + n), pa.int64()), "price": 11.0 + np.arange(n)})

    n = 3_000
    first = pa.concat_tables([rising("k0", n), rising("k1", 1)])  # k0: shard 0, k1: shard 1
    second = rising("k1", n, n)  # k1 grows as k0 did, while k0's runs stay alive

    def fits(tbl, threads, bound):
        try:
            m = cc.Matcher(p, key="k", time="ts", threads=threads, max_state_bytes=bound, columns=[])
            m.process(tbl)
            return m
        except cc.CapacityError:
            return None

    for threads in (1, 2):
        lo, hi = 1 << 12, 1 << 30  # the smallest bound (to 4 KiB) the first batch fits in
        while hi - lo > 1 << 12:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(first, threads, mid) else (mid, hi)
        m = fits(first, threads, hi)
        assert m.state_bytes <= hi
        assert fits(second, threads, hi) is not None  # alone: fits
        held, before = m.buffer_nodes, m.snapshot()
        with pytest.raises(cc.CapacityError, match="key 'k1' .*max_state_bytes"):
            m.process(second)
        assert m.buffer_nodes == held and m.snapshot() == before


def test_ctrl_c_stops_every_shard():
    assert_ctrl_c_stops_cleanly("""
        shards.PARALLEL_MIN_ROWS = 0
        tbl = ticks(2)
        m = cc.Matcher(p, key="k", time="ts", columns=[], threads=2)
        first, rest = tbl.slice(0, 2), tbl.slice(2)
    """)


# ----------------------------------------------------------------------------- snapshots
@pytest.mark.parametrize("before, after", [(1, 2), (2, 1), (2, 3), (3, 2)])
def test_snapshot_restores_into_any_thread_count(always_parallel, before, after):
    tbl = make_ticks(3000, 9, 2).rename_columns(["id", "k", "ts", "price", "volume"])
    pattern = BENCHMARK_PATTERNS["P4"]
    expected, _ = _run(tbl, pattern, [1000, 1000], 1, timeouts=True)
    m = cc.Matcher(pattern, key="k", time="ts", threads=before, timeouts=True)
    parts = [m.process(tbl.slice(0, 1000)), m.process(tbl.slice(1000, 1000))]
    data = m.snapshot()
    again = cc.Matcher.restore(pattern, data, threads=after)
    assert again.threads == after
    assert again.live_partial_matches == m.live_partial_matches > 0
    parts += [again.process(tbl.slice(2000)), again.close()]
    assert pa.concat_tables(parts).equals(expected)


def test_snapshot_of_some_keys_from_shards(always_parallel):
    tbl = _spiky(10)
    one = cc.Matcher(RISE, key="k", time="ts", threads=1)
    two = cc.Matcher(RISE, key="k", time="ts", threads=2)
    one.process(tbl), two.process(tbl)
    for keys in (["k3"], ["k1", "k2"], None):
        a = cc.Matcher.restore(RISE, one.snapshot(keys=keys))
        b = cc.Matcher.restore(RISE, two.snapshot(keys=keys))
        assert a.keys == b.keys and a.live_partial_matches == b.live_partial_matches
        assert a.close().equals(b.close())


# ----------------------------------------------------------------------------- figures
def test_figures_are_summed_over_shards(always_parallel):
    tbl = make_ticks(4000, 12, 4).rename_columns(["id", "k", "ts", "price", "volume"])
    figures, sizes = [], []
    for threads in (1, 2, 3):
        m = cc.Matcher(BENCHMARK_PATTERNS["P4"], key="k", time="ts", threads=threads, columns=[])
        m.process(tbl)
        figures.append((m.live_partial_matches, m.buffer_nodes, m.keys, m.is_idle, m.next_deadline,
                        m.matches_emitted, m.rows_received))
        live = sum(a.nbytes for q in m._state.parts() for x in (q.runs, q.held) for a in x.arrays())
        sizes.append(live + m.buffer_nodes * cm.NODE_BYTES)
        assert m.state_bytes >= sizes[-1]  # (at capacity: each shard's buffer and output arrays have their own)
        m.close()
        figures[-1] += (m.is_idle, m.live_partial_matches, m.buffer_nodes)
    assert figures[0][0] > 0 and figures[0][3] is False and figures[0][-3] is True
    assert figures[1] == figures[0] and figures[2] == figures[0]
    # the same runs, held matches and live nodes; each shard's per-key offsets start with one more 0
    assert [s - sizes[0] for s in sizes] == [0, 2 * 8, 2 * 2 * 8]


def test_one_compiled_signature_with_threads():
    """Shards call the kernels with the same types as one thread: no second compile."""
    script = """
import numpy as np, pyarrow as pa
import colcep as cc
from colcep import col, last
from colcep.engine import shards
from colcep.kernels import nfa, arrays
shards.PARALLEL_MIN_ROWS = 100
p = (cc.Pattern.begin("a").where(col("p") > 0.5).followed_by("b").where(col("p") > last("p", of="a"))
     .within(50))
n = 5000
rng = np.random.default_rng(1)
t = pa.table({"k": rng.integers(0, 7, n), "ts": np.arange(n), "p": rng.random(n)})
ro = np.arange(n); ro.setflags(write=False)
for data in (t, pa.concat_tables([t.slice(0, 1000), t.slice(1000)]), t.set_column(1, "ts", pa.array(ro))):
    for threads in (1, 2, 3):
        cc.match(data, p, key="k", time="ts", threads=threads)
cc.match(t, p.skip(cc.SkipPastLastEvent()), key="k", time="ts", timeouts=True, threads=2)
kernels = (nfa.run_batch, nfa._run_key, arrays.shard_rows, arrays.layout_shard, arrays.matches_in_emission_order,
           arrays.emission_order, arrays.merge_places, arrays.place_events)
print(*(len(f.signatures) for f in kernels))
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1"] * 8


def test_composite_keys_spread_over_threads(always_parallel):
    """A composite key (key=[...]) spreads its key tuples over threads like one key column."""
    tbl = make_ticks(3000, 12, 6)
    tbl = tbl.append_column("venue", pa.array(np.arange(tbl.num_rows) % 3))
    one = cc.match(tbl, RISE, key=["name", "venue"], threads=1)
    assert one.num_rows > 0 and one.column_names[1:3] == ["name", "venue"]
    for threads in (2, 3):
        assert cc.match(tbl, RISE, key=["name", "venue"], threads=threads).equals(one)
