"""The scan summary counted as the output goes by (``colcep.tools.summary``), against counts made
over the whole table with Arrow's distinct counts."""
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colcep as cc
from colcep.tools.examples import BENCHMARK_PATTERNS, get_example
from colcep.tools import summary
from colcep.tools.summary import Summary, summarize
from colcep.tools.ticks import make_ticks


def reference(m: pa.Table, key: str, top: int, time: str) -> dict:
    """The counts over the whole table: distinct match ids, groups by stage and key."""
    out: dict = {}
    if "timed_out" in m.column_names:
        to = m.filter(pc.field("timed_out"))
        m = m.filter(~pc.field("timed_out"))
    else:
        to = None
    out["matches"] = len(set(m.column("match_id").to_pylist()))
    out["matched_events"] = m.num_rows
    if to is not None:
        out["timed_out"] = len(set(to.column("match_id").to_pylist()))
    d = m.to_pydict()
    out["events_per_stage"] = dict(Counter(d["stage"]))
    out["matches_per_stage"] = dict(Counter(s for s, _ in {(s, i) for s, i in zip(d["stage"], d["match_id"])}))
    per_key = Counter(k for k, _ in {(k, i) for k, i in zip(d[key], d["match_id"])})
    if per_key:
        ranked = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0]))
        out["keys_with_matches"] = len(ranked)
        out["top_keys"] = {str(k): v for k, v in ranked[:top]}
    if d[time]:
        out["time_span"] = [min(d[time]), max(d[time])]
    return out


@pytest.mark.parametrize("batch", [1, 7, 1000, 10**9])
@pytest.mark.parametrize("strings", [False, True], ids=["dictionary", "strings"])
def test_summary_in_batches_equals_the_whole_table(batch, strings, monkeypatch):
    t = make_ticks(20_000, 30, 6)
    out = cc.match(t, get_example("paper_query3").pattern, key="name", time="ts", columns=["ts"], timeouts=True)
    if strings:  # (a table from elsewhere: the stage as plain strings)
        out = out.set_column(out.schema.get_field_index("stage"), "stage", out.column("stage").cast(pa.string()))
    want = reference(out, "name", 5, "ts")
    assert want["matches"] > 50 and want["timed_out"] > 10
    monkeypatch.setattr(summary._KeyCounts, "_MERGE_ROWS", 5)  # the per-key counts summed often
    s = Summary("name", 5, "ts")
    for i in range(0, out.num_rows, batch):
        s.add(out.slice(i, batch))
    got = s.result()
    assert got == want and list(got) == list(want)
    assert summarize(out, "name", 5, "ts") == want


def test_summary_of_several_patterns():
    t = make_ticks(20_000, 30, 6)
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "p3": BENCHMARK_PATTERNS["P3"], "p5": BENCHMARK_PATTERNS["P5"]}
    out = cc.match_many(t, pats, key="name", time="ts", columns=["ts"])
    s = Summary("name", 4, "ts", named=True)
    for b in out.to_batches(max_chunksize=333):
        s.add(b)
    got = s.result()
    per = {n: reference(out.filter(pc.equal(out.column("pattern"), n)).drop_columns(["pattern"]), "name", 4, "ts")
           for n in pats}
    assert got["patterns"] == {n: {"matches": p["matches"], "matched_events": p["matched_events"]}
                               for n, p in per.items() if p["matched_events"]}
    assert got["matches"] == sum(p["matches"] for p in per.values()) > 100
    assert got["matched_events"] == out.num_rows
    # matches per key over all patterns: (pattern, match id) pairs
    d = out.to_pydict()
    per_key = Counter(k for k, _, _ in {(k, p, i) for k, p, i in zip(d["name"], d["pattern"], d["match_id"])})
    ranked = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0]))
    assert got["keys_with_matches"] == len(ranked) and got["top_keys"] == dict(ranked[:4])
    assert got["time_span"] == [min(d["ts"]), max(d["ts"])]
    assert got["events_per_stage"] == {} and got["matches_per_stage"] == {}


def test_summary_of_nothing():
    empty = cc.match(make_ticks(10, 2, 1), BENCHMARK_PATTERNS["P1"], key="name", time="ts", columns=["ts"])
    assert empty.num_rows == 0
    assert summarize(empty, "name", time="ts") == {"matches": 0, "matched_events": 0, "events_per_stage": {},
                                                   "matches_per_stage": {}}
    assert Summary("name").result()["matches"] == 0


def test_a_column_named_pattern_is_a_column_of_one_pattern_and_timeouts_count_zero():
    t = make_ticks(5000, 10, 2)
    t = t.append_column("pattern", pa.array([None if i % 3 else "u" for i in range(5000)], pa.string()))
    out = cc.match(t, get_example("paper_query3").pattern, key="name", time="ts", columns=["ts", "pattern"],
                   timeouts=True)
    assert summarize(out, "name", 5, "ts") == reference(out, "name", 5, "ts")
    empty = out.slice(0, 0)
    assert summarize(empty, "name")["timed_out"] == 0
    assert Summary("name", timeouts=True).result()["timed_out"] == 0


def test_unique_match_ids_across_patterns():
    from colcep.tools.summary import format_matches, unique_match_ids

    t = make_ticks(8000, 10, 2)
    out = cc.match_many(t, {"p1": BENCHMARK_PATTERNS["P1"], "p3": BENCHMARK_PATTERNS["P3"]}, key="name", time="ts",
                        columns=["price"])
    u = unique_match_ids(out)
    pairs = set(zip(out.column("pattern").to_pylist(), out.column("match_id").to_pylist()))
    assert len(set(u.column("match_id").to_pylist())) == len(pairs) > 20
    text = format_matches(out, "name", limit=len(pairs))
    assert text.count("\n") + 1 == len(pairs)  # one line a match, none mixing two patterns


def test_summary_of_several_patterns_whose_rows_come_in_several_runs():
    """A table holding each pattern's rows in several runs (two batches' output, one after the
    other, as a scan writes them): each pattern counted over all its runs, in order."""
    t = make_ticks(20_000, 30, 6)
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "p3": BENCHMARK_PATTERNS["P3"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=["ts"])
    out = pa.concat_tables([mm.process(t.slice(0, 9_000)), mm.process(t.slice(9_000)), mm.close()])
    names = np.array(out.column("pattern").to_pylist())
    assert np.count_nonzero(names[1:] != names[:-1]) >= 3  # p1, p3, p1, p3
    got = Summary("name", 4, "ts", named=True).add(out).result()
    per = {n: reference(out.filter(pc.equal(out.column("pattern"), n)).drop_columns(["pattern"]), "name", 4, "ts")
           for n in pats}
    assert got["patterns"] == {n: {"matches": p["matches"], "matched_events": p["matched_events"]}
                               for n, p in per.items()}
    assert all(p["matches"] > 10 for p in per.values())


def reference_histogram(values: list[int], bins: int) -> tuple[int, int, list[int]]:
    """The bins ``TimeHistogram`` must have: the least power-of-two width whose ``bins`` bins,
    aligned to it, cover the values; (width, origin, counts), in plain Python."""
    lo, hi = min(values), max(values)
    width = 1
    while hi - (lo // width) * width >= bins * width:
        width *= 2
    origin = (lo // width) * width
    counts = [0] * bins
    for v in values:
        counts[(v - origin) // width] += 1
    return width, origin, counts


@pytest.mark.parametrize("seed", range(6))
def test_time_histogram_is_exact_whatever_the_split(seed):
    """The matches-over-time counts of a scan's picture, in constant memory: any split of the
    times (widening as they come, the lowest arriving late) gives the bins of all of them at once,
    int64's extremes included."""
    rng = np.random.default_rng(seed)
    i64 = np.iinfo(np.int64)
    scale = [10, 10**6, 10**12, i64.max // 2][seed % 4]
    values = rng.integers(-scale if seed % 2 else 0, scale, 3000)
    if seed == 5:
        values[[7, 2000]] = [i64.min, i64.max]
    width, origin, counts = reference_histogram(values.tolist(), summary.TimeHistogram.BINS)
    h = summary.TimeHistogram()
    cuts = np.sort(rng.integers(0, len(values), 12))
    for part in np.split(values, cuts):
        h.add(part)
    assert (h.width, h.origin, h.lo, h.hi) == (width, origin, int(values.min()), int(values.max()))
    assert h.counts.tolist() == counts and h.total == len(values)
    bars, edges = h.bars(25)
    assert len(bars) == 25 and bars.sum() == len(values) and len(edges) == 26
    assert edges[0] <= values.min() and edges[-1] >= float(values.max()) and np.all(np.diff(edges) > 0)


def test_time_histogram_of_floats_and_nothing():
    h = summary.TimeHistogram()
    assert h.total == 0 and h.bars(3)[0].tolist() == [0, 0, 0]
    h.add(np.array([0.5, 1.9, -0.5, 7.0]))
    assert h.total == 4 and (h.lo, h.hi, h.width) == (-1, 7, 1)
