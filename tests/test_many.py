"""Several patterns in one pass (``colcep.match_many``, ``colcep.ManyMatcher``): each pattern's
output is exactly its own Matcher's; a failed call leaves every pattern as it was."""
import json
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colcep as cc
from colcep.engine import many
from colcep import col, last
from colcep.engine.matcher import NAMES_TYPE
from colcep.errors import CapacityError, InputError
from colcep.tools.examples import BENCHMARK_PATTERNS, desk_patterns
from colcep.tools.ticks import make_ticks
from conformance import CORPUS, case_pattern, case_table, compiles, load_cases, run_table

CASES = [c for c in load_cases([CORPUS]) if compiles(c)]


def _groups() -> list[list[dict]]:
    """Conformance cases over the same events (and key, and timeouts asked or not), together."""
    by: dict = defaultdict(list)
    for c in CASES:
        by[json.dumps([c["events"], c["pattern"].get("key"), c.get("expected_timeouts") is not None],
                      sort_keys=True)].append(c)
    return list(by.values())


GROUPS = _groups()


def _of(out: pa.Table, name: str) -> pa.Table:
    return out.filter(pc.equal(out.column("pattern"), name)).drop_columns(["pattern"])


def test_groups_cover_the_corpus():
    assert sum(len(g) for g in GROUPS) == len(CASES) > 700
    assert max(len(g) for g in GROUPS) >= 8  # some groups hold many patterns over the same events


@pytest.mark.parametrize("group", GROUPS, ids=[g[0]["id"] + (f"+{len(g) - 1}" if len(g) > 1 else "") for g in GROUPS])
def test_conformance_cases_in_groups(group):
    """Each case's rows of one pass, whole and in 1-row batches, are exactly its own Matcher's
    table (which test_conformance checks against Flink): rows, order, match ids, columns."""
    timeouts = group[0].get("expected_timeouts") is not None
    table = case_table(group[0])
    pats = {c["id"]: case_pattern(c) for c in group}
    for step in (max(1, table.num_rows), 1):
        mm = cc.ManyMatcher(pats, key=group[0]["pattern"].get("key"), time="ts", timeouts=timeouts, columns=None)
        parts = [mm.process(table.slice(i, step)) for i in range(0, table.num_rows, step)]
        out = pa.concat_tables(parts + [mm.close()])
        for c in group:
            assert _of(out, c["id"]).equals(run_table(c, timeouts, columns=None)), c["id"]


def test_match_many_equals_match_per_pattern_with_threads_and_unsorted_input():
    t = make_ticks(80_000, 40, 3)  # above PARALLEL_MIN_ROWS: keys spread over two threads
    shuffled = t.take(pa.array(np.random.default_rng(1).permutation(t.num_rows)))
    pats = dict(BENCHMARK_PATTERNS)
    pats["P5_close"] = desk_patterns()["P5_v1500_l1.01_w60m"]
    for data in (t, shuffled):
        out = cc.match_many(data, pats, key="name", time="ts", threads=2, columns=["price"])
        assert out.column_names == ["pattern", "match_id", "name", "stage", "row", "price"]
        assert out.schema.field("name").type == pa.string()
        for name, p in pats.items():
            want = cc.match(data, p, key="name", time="ts", threads=2, columns=["price"])
            assert _of(out, name).equals(want), name
        assert set(out.column("pattern").to_pylist()) == set(pats)


def test_desk_patterns_are_twenty_distinct_signals():
    pats = desk_patterns()
    assert len(pats) == 20 and len({p.to_json() for p in pats.values()}) == 20
    assert sorted({n[:2] for n in pats}) == ["P1", "P2", "P3", "P4", "P5"]


def test_a_failed_call_leaves_every_pattern_as_it_was():
    t = make_ticks(6000, 5, 2)
    runaway = (cc.Pattern.begin("a").where(col("volume") > 0)
               .followed_by_any("b").where(col("price") > 0).one_or_more().within(10**9))
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "runaway": runaway, "p3": BENCHMARK_PATTERNS["P3"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=[], max_partial_matches=5_000)
    good = mm.process(t.slice(0, 40))
    with pytest.raises(CapacityError):
        mm.process(t.slice(40, 3000))
    # the same calls without the failed one: a ManyMatcher that never saw it gives the same rest
    fresh = cc.ManyMatcher(pats, key="name", time="ts", columns=[], max_partial_matches=5_000)
    assert fresh.process(t.slice(0, 40)).equals(good)
    for m in (mm, fresh):
        m.matchers["runaway"].max_partial_matches = 10**9  # let the runaway through from here
    after = [m.process(t.slice(40, 200)) for m in (mm, fresh)]
    assert after[0].equals(after[1]) and after[0].num_rows > 0
    assert mm.close().equals(fresh.close())


def test_errors_name_the_rule():
    p = BENCHMARK_PATTERNS["P1"]
    with pytest.raises(InputError, match="non-empty mapping"):
        cc.ManyMatcher({}, key="name")
    with pytest.raises(InputError, match="non-empty mapping"):
        cc.ManyMatcher([p], key="name")
    with pytest.raises(InputError, match="pattern names must be non-empty strings, got 3"):
        cc.ManyMatcher({3: p}, key="name")
    a = cc.sase("PATTERN SEQ(T a, T b) WHERE [name] AND b.price > a.price WITHIN 10 s")
    b = cc.sase("PATTERN SEQ(T a, T b) WHERE [id] AND b.price > a.price WITHIN 10 s")
    with pytest.raises(InputError, match="the patterns are keyed differently"):
        cc.ManyMatcher({"a": a, "b": b})
    with pytest.raises(InputError, match="collides with match_many's column"):
        cc.ManyMatcher({"a": p}, key="name", columns=["pattern"])
    t = make_ticks(100, 2, 1)
    with pytest.raises(InputError, match="the input has a column 'pattern'"):
        cc.match_many(t.append_column("pattern", pa.array(["x"] * 100)), {"a": p}, key="name")
    out = cc.match_many(t.append_column("pattern", pa.array(["x"] * 100)), {"a": p}, key="name", columns=["price"])
    assert out.column_names[0] == "pattern"
    with pytest.raises(InputError, match="key column 'nope' is missing"):
        cc.match_many(t, {"a": p}, key="nope")


def test_state_and_counts_add_up():
    t = make_ticks(20_000, 10, 4)
    pats = {"P1": BENCHMARK_PATTERNS["P1"], "P5": BENCHMARK_PATTERNS["P5"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=[])
    out = mm.process(t)
    assert mm.rows_received == 20_000
    assert mm.live_partial_matches == sum(m.live_partial_matches for m in mm.matchers.values()) > 0
    assert mm.state_bytes == sum(m.state_bytes for m in mm.matchers.values())
    out = pa.concat_tables([out, mm.close()])
    assert mm.matches_emitted == sum(len(set(_of(out, n).column("match_id").to_pylist())) for n in pats)
    assert _of(out, "P5").equals(cc.match(t, pats["P5"], key="name", time="ts", columns=[]))
    with pytest.raises(InputError, match="closed"):
        mm.process(t.slice(0, 1))


def test_the_input_rows_the_patterns_keep_count_once():
    """Every pattern keeps the same input rows for its output columns: ``state_bytes`` counts
    them once, not once per pattern (the desk's 20 patterns: 20 times)."""
    t = make_ticks(20_000, 10, 4)
    pats = {n: BENCHMARK_PATTERNS[n] for n in ("P3", "P5", "P1")}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=["price"])
    mm.process(t.slice(0, 12_000))
    mm.process(t.slice(12_000))
    ms = list(mm.matchers.values())
    blocks = {row0: tb.nbytes for m in ms for row0, tb in m._state.retained}  # the input's blocks by first row
    assert sorted(blocks) == [0, 12_000] and [row0 for row0, _ in ms[2]._state.retained] == [12_000]  # (P1 dropped one)
    kept = sum(m._state.retained_bytes() for m in ms)
    assert mm.state_bytes == sum(m.state_bytes for m in ms) - kept + sum(blocks.values())


def test_event_time_and_late_rows_as_each_pattern_alone():
    t = make_ticks(6000, 8, 9)
    rng = np.random.default_rng(2)
    jitter = t.set_column(2, "ts", pa.array(np.maximum(0, t.column("ts").to_numpy() + rng.integers(-40, 40, 6000))))
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "p2": BENCHMARK_PATTERNS["P2"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=["price"], out_of_orderness=20)
    alone = {n: cc.Matcher(p, key="name", time="ts", columns=["price"], out_of_orderness=20) for n, p in pats.items()}
    outs, want = [], {n: [] for n in pats}
    late_rows = 0
    for lo in range(0, 6000, 500):
        b = jitter.slice(lo, 500)
        outs.append(mm.process(b, watermark=int(b.column("ts").to_numpy().max()) - 30 if lo % 1000 else None))
        for n, m in alone.items():
            want[n].append(m.process(b, watermark=int(b.column("ts").to_numpy().max()) - 30 if lo % 1000 else None))
        late = mm.pop_late()
        mine = alone["p1"].pop_late()
        alone["p2"].pop_late()
        assert (late is None) == (mine is None) and (late is None or late.equals(mine))
        late_rows += 0 if late is None else late.num_rows
        assert mm.watermark == alone["p1"].watermark
    out = pa.concat_tables(outs + [mm.close()])
    for n, m in alone.items():
        assert _of(out, n).equals(pa.concat_tables(want[n] + [m.close()])), n
    assert late_rows > 0 and out.num_rows > 0


def test_close_before_any_batch_is_typed_with_a_schema():
    t = make_ticks(50, 2, 1)
    pats = {"a": BENCHMARK_PATTERNS["P1"], "b": BENCHMARK_PATTERNS["P2"]}
    out = cc.ManyMatcher(pats, key="name", time="ts", columns=["price"], schema=t.schema).close()
    assert out.num_rows == 0
    assert out.schema.names == ["pattern", "match_id", "name", "stage", "row", "price"]
    assert out.schema.field("name").type == pa.string() and out.schema.field("price").type == pa.float64()
    assert out.schema.field("pattern").type == out.schema.field("stage").type == NAMES_TYPE
    assert cc.match_many(t.slice(0, 0), pats, key="name", time="ts", columns=["price"]).schema.equals(out.schema)


def test_the_pattern_and_stage_columns_are_dictionary_encoded_over_the_names():
    """No string is copied per row: ``pattern`` indexes all the pattern names (one dictionary for
    every pattern's rows), ``stage`` each pattern's stage names in pattern order."""
    t = make_ticks(20_000, 20, 4)
    pats = {"p3": BENCHMARK_PATTERNS["P3"], "p1": BENCHMARK_PATTERNS["P1"]}
    out = cc.match_many(t, pats, key="name", time="ts", columns=[])
    assert out.schema.field("pattern").type == out.schema.field("stage").type == NAMES_TYPE
    for chunk in out.column("pattern").chunks:
        assert chunk.dictionary.to_pylist() == ["p3", "p1"]
    for name, p in pats.items():
        mine = _of(out, name)
        assert mine.num_rows > 0
        for chunk in mine.column("stage").chunks:
            assert chunk.dictionary.to_pylist() == cc.compile(p).stage_names
        alone = cc.match(t, p, key="name", time="ts", columns=[])
        assert alone.schema.field("stage").type == NAMES_TYPE
        assert mine.column("stage").to_pylist() == alone.column("stage").to_pylist()


def test_progress_only_goes_forward():
    from colcep.engine import matcher as mmod

    t = make_ticks(120_000, 20, 5)
    seen = []

    class Meter:
        def update(self, rows, matches):
            seen.append(rows)

        def finish(self, *a, **k):
            seen.append(a[0])

    real = mmod.scan_progress
    import colcep.engine.many as many

    many.scan_progress = lambda *a, **k: Meter()
    try:
        cc.match_many(t, {"a": BENCHMARK_PATTERNS["P1"], "b": BENCHMARK_PATTERNS["P3"]}, key="name", time="ts",
                      threads=1, columns=[])
    finally:
        many.scan_progress = real
    assert len(seen) > 4 and seen == sorted(seen) and seen[-1] == 120_000


@pytest.fixture
def always_parallel(monkeypatch):
    """Every batch runs its shards on the thread pool, in kernel calls of a few rows."""
    from colcep.engine import matcher as cm
    from colcep.engine import shards as shd

    monkeypatch.setattr(shd, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(cm, "CHUNK_ROWS", 7)
    monkeypatch.setattr(cm, "CHUNK_ROWS_PER_KEY", 1)


def _mixed_patterns() -> dict:
    """Patterns reading strings (each its own literals: its own string codes), history
    (``prev``), a timestamp column and plain numbers, over one input."""
    from colcep import last, prev
    return {
        "venue_a": (cc.Pattern.begin("a").where(col("venue") == "A").followed_by("b")
                    .where((col("venue") != "A") & (col("price") > last("price", of="a"))).within(50)),
        "venue_zc": (cc.Pattern.begin("a").where(col("venue").is_in(["Z", "C"])).next("b")
                     .where(col("venue") == "C").within(40)),
        "jump": cc.Pattern.begin("a").where(col("price") > prev("price") + 0.01).followed_by("b")
                .where(col("price") < prev("price", 2)).within(30),
        "p1": BENCHMARK_PATTERNS["P1"],
        "when": cc.Pattern.begin("a").where(col("at") > 15).next("b").where(col("at") < last("at", of="a") + 9),
    }


def _mixed_ticks(n: int) -> pa.Table:
    t = make_ticks(n, 9, 4)
    rng = np.random.default_rng(3)
    venue = pa.array(rng.choice(["A", "B", "C", "Z"], n))
    at = pa.array((t.column("ts").to_numpy() % 40).astype("datetime64[ms]"))
    return t.append_column("venue", venue).append_column("at", at)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("step", [1 << 20, 997, 61])
def test_one_pass_equals_each_pattern_alone(always_parallel, threads, step):
    """The one pass (one key coding, layout and gather for all, per-pattern string codes and
    history) gives each pattern exactly its own Matcher's output, in any batches, on threads."""
    t = _mixed_ticks(3000)
    pats = _mixed_patterns()
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=["price", "venue"], threads=threads)
    alone = {n: cc.Matcher(p, key="name", time="ts", columns=["price", "venue"], threads=threads)
             for n, p in pats.items()}
    outs, want = [], {n: [] for n in pats}
    for lo in range(0, t.num_rows, step):
        outs.append(mm.process(t.slice(lo, step)))
        for n, m in alone.items():
            want[n].append(m.process(t.slice(lo, step)))
    out = pa.concat_tables(outs + [mm.close()])
    for n, m in alone.items():
        got = _of(out, n)
        assert got.equals(pa.concat_tables(want[n] + [m.close()])) and got.num_rows > 0, n


def test_one_pass_on_threads_raises_the_failing_pattern_s_bound(always_parallel):
    """On threads a pattern past its bound stops the others (their calls are interrupted): the
    call raises that pattern's CapacityError, not KeyboardInterrupt, and undoes every pattern."""
    t = make_ticks(6000, 6, 2)
    runaway = (cc.Pattern.begin("a").where(col("volume") > 0)
               .followed_by_any("b").where(col("price") > 0).one_or_more().within(10**9))
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "runaway": runaway, "p3": BENCHMARK_PATTERNS["P3"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=[], max_partial_matches=2_000, threads=2)
    good = mm.process(t.slice(0, 30))
    with pytest.raises(CapacityError, match="key .S000"):
        mm.process(t.slice(30, 3000))
    fresh = cc.ManyMatcher(pats, key="name", time="ts", columns=[], max_partial_matches=2_000, threads=2)
    assert fresh.process(t.slice(0, 30)).equals(good)
    for m in (mm, fresh):
        m.matchers["runaway"].max_partial_matches = 10**9
    after = [m.process(t.slice(30, 300)) for m in (mm, fresh)]
    assert after[0].equals(after[1]) and after[0].num_rows > 0


def test_a_pattern_fed_apart_is_an_error():
    """The patterns share their key codes, so a ManyMatcher's Matcher fed a batch on its own
    would code keys in another order than alone: the next call says so and changes nothing."""
    t = make_ticks(4000, 5, 6)
    pats = {"p1": BENCHMARK_PATTERNS["P1"], "p3": BENCHMARK_PATTERNS["P3"]}
    mm = cc.ManyMatcher(pats, key="name", time="ts", columns=["price"])
    mm.process(t.slice(0, 500))
    mm.matchers["p1"].process(t.slice(500, 500))
    with pytest.raises(InputError, match=r"received different rows \(\[500, 1000\]\): one was fed on its own"):
        mm.process(t.slice(1000))
    assert mm.matchers["p3"].rows_received == 500


def test_conditions_equal_across_patterns_are_evaluated_once(monkeypatch):
    """A condition two patterns hold alike (same structure, same columns) is evaluated once per
    shard for both; one over strings is each pattern's own (its string codes), and each
    pattern's output stays its own Matcher's."""
    from colcep.engine import conditions as cond

    t = _mixed_ticks(2000)
    big = col("volume") > 700.0
    pats = {"a": cc.Pattern.begin("x").where(big).next("y").where(col("price") > last("price", of="x")),
            "b": cc.Pattern.begin("x").where(big).followed_by("y").where(col("venue") == "C").within(50),
            "c": cc.Pattern.begin("x").where(col("venue") == "C").next("y").where(big)}
    calls = []
    real = cond.evaluate
    monkeypatch.setattr(cond, "evaluate", lambda e, *a: calls.append(e.key()) or real(e, *a))
    out = cc.match_many(t, pats, key="name", time="ts", columns=["price"], threads=1)
    assert calls.count(big.key()) == 2  # once for the three patterns: the table, then the end of input
    assert calls.count((col("venue") == "C").key()) == 4  # per pattern (its own string codes), twice
    monkeypatch.setattr(cond, "evaluate", real)
    for name, p in pats.items():
        want = cc.match(t, p, key="name", time="ts", columns=["price"], threads=1)
        assert _of(out, name).equals(want) and want.num_rows > 0, name


@pytest.mark.parametrize("name, n", [("P1_v700_w5s", 0), ("P1_v700_w5s", 5), ("", 3), ("défi", 2), ("x" * 300, 1000)])
def test_the_pattern_column_is_the_name_repeated(name, n):
    got = many._repeated(name, n)
    got.validate(full=True)
    assert got.type == pa.string() and got.to_pylist() == [name] * n
