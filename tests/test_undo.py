"""Undoing a failed call without copying the state (issue 22 part 2): a call changes the shared
buffer in place and is undone by ``kernels.buffer.undo_call``; every batch here first fails
*after* its kernel calls ran (the output step raises), so the undo has the most to take back
(frees, reused slots, JOINs, grown arrays), then runs for real: the state after the failure
is the one before it, and the output is an uninterrupted run's."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, first, last
from colcep.engine import matcher as cm
from colcep.engine import shards as shd
from colcep.kernels import buffer as kb
from colcep.engine import program as cprog
from colcep.kernels import park as kp
from colcep.tools.ticks import make_ticks
from conformance import case_pattern, case_table, compiles, feed
from randcase import cases

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)


class Boom(Exception):
    pass


def _fail_then_feed(m: cc.Matcher, tbl: pa.Table, sizes) -> pa.Table:
    """``feed``, each call tried first with its output step failing (after the kernels ran)."""
    parts, start = [], 0
    bounds = list(sizes) + [tbl.num_rows]
    output = m._output

    def boom(*a, **kw):
        raise Boom

    for size in bounds:
        batch = tbl.slice(start, size)
        start += batch.num_rows
        before = m.snapshot()
        nodes, runs, held = m.buffer_nodes, m.live_partial_matches, m._state.nbytes()
        if batch.num_rows == 0:  # no kernel runs for an empty batch (it only binds the schema): no step to fail
            parts.append(m.process(batch))
            continue
        m._output = boom
        with pytest.raises(Boom):
            m.process(batch)
        m._output = output
        assert m.snapshot() == before
        assert (m.buffer_nodes, m.live_partial_matches, m._state.nbytes()) == (nodes, runs, held)  # capacity too
        parts.append(m.process(batch))
    before = m.snapshot()
    m._output = boom
    with pytest.raises(Boom):
        m.close()
    m._output = output
    assert m.snapshot() == before
    parts.append(m.close())
    return pa.concat_tables(parts)


def _keyed(case, n_keys):
    tbl = case_table(case)
    k = (np.arange(tbl.num_rows) * 7 + 3) % n_keys
    return tbl.append_column("k", pa.array([f"key{x}" for x in k]))


@SETTINGS
@given(cases(max_events=25), st.lists(st.integers(0, 9), max_size=5), st.booleans(), st.integers(1, 4),
       st.sampled_from([1, 2]))
def test_a_call_failing_after_its_kernels_changes_nothing(monkeypatch, case, sizes, timeouts, n_keys, threads):
    assume(compiles(case))
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 5)  # several kernel calls a batch
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)
    tbl, pattern = _keyed(case, n_keys), case_pattern(case)
    want = feed(cc.Matcher(pattern, key="k", time="ts", timeouts=timeouts), tbl, sizes)
    m = cc.Matcher(pattern, key="k", time="ts", timeouts=timeouts, threads=threads)
    assert _fail_then_feed(m, tbl, sizes).equals(want)


@pytest.mark.parametrize("threads", [1, 2])
def test_merged_kleene_runs_undo_through_joins(monkeypatch, threads):
    """Merged runs (JOIN nodes) released and re-made across many batches, each failing once."""
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    p = (cc.Pattern.begin("a").where(col("price") > 0)
         .followed_by_any("b").where(col("price") > first("price", of="a")).one_or_more().allow_combinations()
         .followed_by("c").where(col("price") < first("price", of="a") * 0.97).within(40))
    rng = np.random.default_rng(5)
    n = 600
    tbl = pa.table({"k": pa.array([f"s{i}" for i in rng.integers(0, 3, n)]),
                    "ts": pa.array(np.arange(n), pa.int64()),
                    "price": pa.array(np.round(100 * np.exp(np.cumsum(rng.normal(0, 0.01, n))), 2))})
    sizes = [37] * 15
    want = feed(cc.Matcher(p, key="k", time="ts"), tbl, sizes)
    assert want.num_rows > 0
    got = _fail_then_feed(cc.Matcher(p, key="k", time="ts", threads=threads), tbl, sizes)
    assert got.equals(want)


def test_a_successful_call_copies_nothing_and_frees_into_the_free_list():
    """A call does not copy the buffer: the same arrays before and after (no growth), and the
    slots it freed are on the free list afterwards (none left in quarantine)."""
    p = (cc.Pattern.begin("a").where(col("v") > 0)
         .followed_by("b").where(col("v") > last("v", of="a") + 5).within(50))
    n = 2_000
    rng = np.random.default_rng(1)
    tbl = pa.table({"ts": pa.array(np.arange(n), pa.int64()), "v": pa.array(rng.integers(0, 10, n).astype(float))})
    m = cc.Matcher(p, time="ts", columns=[])
    m.process(tbl.slice(0, 1000))
    buf = m._state.buffer
    arrays = [id(a) for a in buf.arrays()]
    m.process(tbl.slice(1000, 500))
    buf = m._state.buffer
    assert [id(a) for a in buf.arrays()] == arrays
    meta = buf.meta
    assert meta[kb.META_CALL] == 0 and meta[kb.META_QCOUNT] == 0 and meta[kb.META_QHEAD] == -1
    assert kb.live_nodes(buf.ref, meta[0]) == m.buffer_nodes
    assert int((buf.ref[:meta[0]] < 0).sum()) == meta[kb.META_NFREE]



@pytest.mark.parametrize("threads", [1, 2])
def test_parked_runs_undo(monkeypatch, threads):
    """Runs parked across calls (kernels.park: keys of more than PARK_MIN live runs, woken,
    timed out and parked again over many batches), each batch failing once after its kernels
    ran: the park's quarantine and undo give back the runs parked before the call and drop the
    ones it parked; the output is an uninterrupted run's."""
    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    p = (cc.Pattern.begin("a").where(col("volume") > 300.0)
         .followed_by("b").where(col("price") > last("price", of="a") * 1.01).within(2000))
    tbl = make_ticks(3_000, 2, 11)  # ~1,400 matched rows; ~200 live runs on one key, parked
    sizes = [173] * 17
    want = feed(cc.Matcher(p, key="name", time="ts"), tbl, sizes)
    probe = cc.Matcher(p, key="name", time="ts", threads=threads)
    probe.process(tbl.slice(0, 1_000))
    assert max(int(x.park.arrays[kp.P_KL].max(initial=0)) for x in probe._state.parts()) >= cprog.PARK_MIN
    got = _fail_then_feed(cc.Matcher(p, key="name", time="ts", threads=threads), tbl, sizes)
    assert want.num_rows > 0 and got.equals(want)
