"""Merging of equivalent runs (SASE+ 4.2.2): runs in the same state with the same relevant part
of V continue as one run whose buffer node joins their paths: runs of one start under a window,
runs of any start without one.

Merging is on with no skip strategy and no timed-out output (``timeouts=True`` turns it off,
which gives the unmerged engine to compare with)."""
from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import colcep as cc
from colcep import col, count, first, last
from colcep.engine.compiler import compile_pattern
from reference import run_reference

# Kleene stages whose later conditions never read the Kleene stage's own values: every branch
# of a start agrees on what matters, so all of them merge.
MERGING = {
    "any": cc.Pattern.begin("a").where(col("volume") > 5).followed_by_any("b").where(col("price") > 3)
    .one_or_more().followed_by("c").where(col("price") < first("price", of="a")),
    "combinations": cc.Pattern.begin("a").where(col("volume") > 5).followed_by("b").where(col("price") > 3)
    .one_or_more().allow_combinations().followed_by("c").where(col("price") < last("price", of="a")).within(12),
    "count": cc.Pattern.begin("a").where(col("volume") > 5).followed_by_any("b").where(col("price") > 3)
    .one_or_more().followed_by_any("c").where(col("price") < count(of="a", field="price") + 2.0),
    "across": cc.Pattern.begin("a").where(col("volume") > 5).followed_by("b").where(col("price") > 3)
    .one_or_more().followed_by("c").where(col("price") < 3),
    "optional": cc.Pattern.begin("a").where(col("volume") > 4).followed_by_any("b").where(col("price") > 5)
    .optional().followed_by_any("c").where(col("price") > last("price", of="a")).within(8),
}


def _stream(prices, volumes, keys):
    n = len(prices)
    return pa.table({"name": [("x", "y")[k] for k in keys[:n]], "ts": np.arange(n, dtype=np.int64),
                     "price": np.array(prices, float), "volume": np.array(volumes, float)})


def _run(pattern, tbl, timeouts=False, batch=None):
    m = cc.Matcher(pattern, key="name", time="ts", columns=[], timeouts=timeouts, max_partial_matches=10**6)
    step = batch or max(1, tbl.num_rows)
    parts, most = [], 0
    for lo in range(0, tbl.num_rows, step):
        parts.append(m.process(tbl.slice(lo, step)))
        most = max(most, m.live_partial_matches)
    out = pa.concat_tables(parts + [m.close()])
    if timeouts:
        out = out.filter(pa.compute.invert(out.column("timed_out"))).drop_columns(["timed_out", "timeout_ts"])
    return out, most


def _matches(out):
    d = out.to_pydict()
    by_id: dict = {}
    for i in range(out.num_rows):
        by_id.setdefault(d["match_id"][i], []).append((d["stage"][i], d["row"][i]))
    return list(by_id.values())


streams = st.integers(4, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 9), min_size=n, max_size=n), st.lists(st.integers(1, 9), min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n)))


@settings(max_examples=150, deadline=None, database=None)
@given(st.sampled_from(sorted(MERGING)), streams, st.integers(1, 9))
def test_merged_engine_equals_reference_and_unmerged_order(name, data, batch):
    tbl = _stream(*data)
    pattern = MERGING[name]
    merged, _ = _run(pattern, tbl, batch=batch)
    unmerged, _ = _run(pattern, tbl, timeouts=True)
    # the same matches in the same order as without merging (ids are renumbered the same way)
    assert _matches(merged) == _matches(unmerged)
    events = [dict(name=n, ts=t, price=p, volume=v, __ts=t) for n, t, p, v in
              zip(*(tbl.column(c).to_pylist() for c in ("name", "ts", "price", "volume")))]
    window = pattern.window or 0
    ref, _ = run_reference(compile_pattern(pattern), events, "name", int(window), False)
    ref_canon = Counter(tuple(sorted((s, p) for s, ps in m.items() for p in ps)) for m in ref)
    assert Counter(tuple(sorted(m)) for m in _matches(merged)) == ref_canon


def test_merging_keeps_one_run_per_start_and_state():
    # after each big trade every tick above 3 is a b: unmerged, the branches of a start double
    # with each such tick (allow_combinations); merged, a start keeps one run per state
    n = 60
    prices = [7.0 if i % 15 else 2.0 for i in range(n)]
    volumes = [9.0 if i % 15 == 1 else 1.0 for i in range(n)]
    tbl = _stream(prices, volumes, [0] * n)
    pattern = (cc.Pattern.begin("a").where(col("volume") > 5).followed_by_any("b").where(col("price") > 3)
               .one_or_more().allow_combinations()
               .followed_by("c").where(col("price") < first("price", of="a")).within(15))
    merged, most_merged = _run(pattern, tbl, batch=1)
    unmerged, most_unmerged = _run(pattern, tbl, timeouts=True, batch=1)
    assert _matches(merged) == _matches(unmerged)
    assert len(_matches(merged)) == 3 * (2**13 - 1)  # each of 3 a's: every non-empty subset of its 13 b's
    assert most_merged <= 4  # one run per state a start can be in: b's three states and c
    assert most_unmerged > 1000


def test_no_merging_with_a_skip_strategy():
    # a skip strategy prunes by each match's own events, so equivalent runs stay apart; the
    # results are still the reference's
    pattern = MERGING["any"].skip(cc.SkipPastLastEvent())
    tbl = _stream([4, 5, 6, 7, 1, 8, 9, 2], [9, 1, 9, 1, 1, 1, 1, 1], [0] * 8)
    out, _ = _run(pattern, tbl)
    events = [dict(name="x", ts=t, price=float(p), volume=float(v), __ts=t)
              for t, (p, v) in enumerate(zip([4, 5, 6, 7, 1, 8, 9, 2], [9, 1, 9, 1, 1, 1, 1, 1]))]
    ref, _ = run_reference(compile_pattern(pattern), events, "name", 0, False)
    assert Counter(tuple(sorted(m)) for m in _matches(out)) == \
        Counter(tuple(sorted((s, p) for s, ps in m.items() for p in ps)) for m in ref)


def test_runs_of_different_starts_merge_without_a_window():
    """Without a window, every start's Kleene run in the same state agrees on what matters:
    they merge into one run, so the state stays a few runs and a buffer linear in the stream
    (it was one run per start and a buffer quadratic in the stream)."""
    n = 3_000
    tbl = _stream([5] * n, [9] * n, [0] * n)
    any_b = (cc.Pattern.begin("a").where(col("volume") > 5).followed_by_any("b").where(col("price") > 3)
             .one_or_more().followed_by("c").where(col("price") < 3))
    for pattern in (MERGING["across"], any_b):
        m = cc.Matcher(pattern, key="name", time="ts", columns=[])
        assert m.process(tbl).num_rows == 0  # no c yet: nothing completes
        assert m.live_partial_matches <= 4
        assert m.buffer_nodes <= 6 * n  # (unmerged: n^2 / 2)
    small = _stream([5] * 12 + [1], [9] * 13, [0] * 13)
    merged, most = _run(MERGING["across"], small)
    unmerged, most_unmerged = _run(MERGING["across"], small, timeouts=True)
    assert _matches(merged) == _matches(unmerged) and len(_matches(merged)) > 11
