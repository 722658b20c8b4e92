"""The Arrow driver: inputs (tables, batches, pandas, polars, timestamps), bad input with
clear errors and no data loss, output shape, determinism and carried state."""
import datetime as dt

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import colcep as cc
from colcep import Pattern, col, last

RISE = (Pattern.begin("a").where(col("v") > 5)
        .next("b").where(col("p") > last("p", of="a"))
        .within(10))


def ticks():
    return pa.table({"sym": ["x", "y", "x", "y", "x", "x"], "ts": [1, 1, 2, 2, 3, 30],
                     "p": [1.0, 5.0, 2.0, 4.0, 3.0, 9.0], "v": [9.0, 9.0, 9.0, 1.0, 1.0, 9.0]})


def test_one_shot_output_shape():
    out = cc.match(ticks(), RISE, key="sym", time="ts")
    assert out.schema.names == ["match_id", "sym", "stage", "row", "ts", "p", "v"]
    assert out.column("match_id").to_pylist() == [0, 0, 1, 1]
    assert out.column("stage").to_pylist() == ["a", "b", "a", "b"]
    assert out.column("row").to_pylist() == [0, 2, 2, 4]
    assert out.column("sym").to_pylist() == ["x"] * 4
    assert out.column("p").to_pylist() == [1.0, 2.0, 2.0, 3.0]


def test_compact_output_and_selected_columns():
    out = cc.match(ticks(), RISE, key="sym", time="ts", columns=[])
    assert out.schema.names == ["match_id", "sym", "stage", "row"]
    out = cc.match(ticks(), RISE, key="sym", time="ts", columns=["p"])
    assert out.schema.names == ["match_id", "sym", "stage", "row", "p"]


@pytest.mark.parametrize("convert", [lambda t: t, lambda t: t.to_batches()[0], lambda t: t.to_pandas(),
                                     lambda t: pl.from_arrow(t)])
def test_input_kinds(convert):
    out = cc.match(convert(ticks()), RISE, key="sym", time="ts", columns=[])
    assert out.column("row").to_pylist() == [0, 2, 2, 4]


def test_iterable_of_batches_spanning_keys():
    batches = [ticks().slice(i, 1).to_batches()[0] for i in range(6)]
    out = cc.match(iter(batches), RISE, key="sym", time="ts")
    assert out.column("row").to_pylist() == [0, 2, 2, 4]
    assert out.column("p").to_pylist() == [1.0, 2.0, 2.0, 3.0]  # events gathered across batches


def test_timestamp_column_and_string_window():
    t = ticks()
    ts = pa.array([dt.datetime(2024, 1, 1, 0, 0, s) for s in [1, 1, 2, 2, 3, 30]], pa.timestamp("ms"))
    t = t.set_column(1, "ts", ts)
    out = cc.match(t, RISE.within("10s"), key="sym", time="ts", columns=[])
    assert out.column("row").to_pylist() == [0, 2, 2, 4]
    out = cc.match(t, RISE.within("1s"), key="sym", time="ts", columns=[])  # b 1 s after a: out
    assert out.num_rows == 0


def test_window_edge_is_exclusive():
    t = pa.table({"ts": [0, 10], "p": [1.0, 2.0], "v": [9.0, 0.0]})
    assert cc.match(t, RISE, time="ts").num_rows == 0           # 10 - 0 == within: too late
    assert cc.match(t, RISE.within(11), time="ts").num_rows == 2


def test_unsorted_input_is_sorted_by_match_but_refused_by_process():
    t = ticks().take([2, 0, 1, 3, 4, 5])  # x's rows out of order
    out = cc.match(t, RISE, key="sym", time="ts", columns=[])
    assert out.column("row").to_pylist() == [1, 0, 0, 4]  # rows refer to the input as given
    m = cc.Matcher(RISE, key="sym", time="ts")
    with pytest.raises(cc.InputError, match=r"not in order for key 'x': row 1 has time 1"):
        m.process(t)


def test_order_checked_across_batches():
    m = cc.Matcher(RISE, key="sym", time="ts")
    m.process(ticks().slice(0, 5))
    late = pa.table({"sym": ["y"], "ts": [0], "p": [1.0], "v": [1.0]})
    with pytest.raises(cc.InputError, match="key 'y': row 5 has time 0"):
        m.process(late)


@pytest.mark.parametrize("table, message", [
    (pa.table({"sym": ["x"], "p": [1.0], "v": [1.0]}), "time column 'ts' is missing"),
    (pa.table({"ts": [1], "p": [1.0], "v": [1.0]}), "key column 'sym' is missing"),
    (pa.table({"sym": ["x"], "ts": [1.5], "p": [1.0], "v": [1.0]}), "must be an integer or timestamp"),
    (pa.table({"sym": ["x", "y"], "ts": pa.array([1, None], pa.int64()), "p": [1.0, 1.0], "v": [1.0, 1.0]}),
     "time column 'ts' has a null at row 1"),
    (pa.table({"sym": ["x", None], "ts": [1, 2], "p": [1.0, 1.0], "v": [1.0, 1.0]}),
     "key column 'sym' has a null at row 1"),
    (pa.table({"sym": ["x"], "ts": [1], "p": [1.0]}), "unknown column 'v'"),
    (pa.table({"sym": ["x"], "ts": [1], "p": [[1.0]], "v": [1.0]}), "cannot read"),
])
def test_bad_input(table, message):
    with pytest.raises((cc.InputError, cc.PatternError), match=message):
        cc.Matcher(RISE, key="sym", time="ts").process(table)


def test_null_key_named_by_its_input_row_when_match_sorts():
    """match() sorts an unsorted table first; an error still names the row as the input has it."""
    t = pa.table({"sym": ["x", "y", "x", "y", None, "x"], "ts": [5, 4, 3, 2, 1, 6], "p": [1.0] * 6, "v": [1.0] * 6})
    with pytest.raises(cc.InputError, match="key column 'sym' has a null at row 4"):
        cc.match(t, RISE, key="sym", time="ts")
    with pytest.raises(cc.InputError, match="key column 'sym' has a null at row 4"):
        cc.match(t.slice(0, 5).append_column("k2", pa.array([1] * 5)), RISE, key=["k2", "sym"], time="ts")


def test_nulls_in_data_compare_false():
    t = pa.table({"ts": [1, 2, 3], "p": [1.0, None, 2.0], "v": [9.0, 9.0, 0.0]})
    out = cc.match(t, RISE, time="ts", columns=[])
    assert out.column("row").to_pylist() == []  # b (null price) is not > a; row 2 is not next to row 0


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_every_comparison_with_a_null_side_is_false(op):
    """A condition evaluated over columns: a null (NaN) on either side makes each comparison
    false, "!=" included (IEEE's NaN != x is true)."""
    import operator

    from colcep.engine import conditions as cond
    fn = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
          ">=": operator.ge}[op]
    x = np.array([1.0, np.nan, 2.0, np.nan, 3.0])
    y = np.array([1.0, 1.0, np.nan, np.nan, 4.0])
    got = cond.evaluate(fn(col("x"), col("y")), {"x": x, "y": y}, 5, {}).tolist()
    assert got[1:4] == [False, False, False]
    assert got[0] == fn(1.0, 1.0) and got[4] == fn(3.0, 4.0)


def test_string_conditions_across_batches():
    p = Pattern.begin("a").where(col("name") == "IBM").followed_by("b").where(col("name") == first_name())
    t = pa.table({"ts": [1, 2, 3, 4], "name": ["IBM", "MSFT", "AAPL", "IBM"]})
    m = cc.Matcher(p, time="ts", columns=["name"])
    out = pa.concat_tables([m.process(t.slice(0, 2)), m.process(t.slice(2)), m.close()])
    assert out.column("name").to_pylist() == ["IBM", "IBM"]


def first_name():
    return cc.first("name", of="a")


def test_timeouts_are_flagged_with_their_time():
    p = Pattern.begin("a").where(col("v") > 5).followed_by("b").where(col("v") < 0).within(5)
    t = pa.table({"ts": [1, 2, 20], "v": [9.0, 1.0, 1.0]})
    out = cc.match(t, p, time="ts", timeouts=True, columns=[])
    assert out.column("timed_out").to_pylist() == [True]
    assert out.column("timeout_ts").to_pylist() == [6]
    assert out.column("row").to_pylist() == [0]


def test_capacity_bound_raises_naming_the_key():
    # every event starts a run and every later one extends it: under a window (runs of one start
    # merge, each start times out on its own) the live partial matches grow with the stream
    p = Pattern.begin("a").followed_by_any("b").followed_by_any("c").within(1000)
    t = pa.table({"sym": ["k"] * 50, "ts": list(range(50))})
    with pytest.raises(cc.CapacityError, match=r"key 'k' holds \d+ live partial matches"):
        cc.match(t, p, key="sym", time="ts", max_partial_matches=40)


def test_deterministic_ids_and_order():
    rng = np.random.default_rng(3)
    n = 2000
    t = pa.table({"sym": rng.integers(0, 7, n).astype(str), "ts": np.sort(rng.integers(0, 500, n)),
                  "p": rng.random(n), "v": rng.integers(0, 10, n).astype(float)})
    a = cc.match(t, RISE, key="sym", time="ts")
    b = cc.match(t, RISE, key="sym", time="ts")
    assert a.equals(b) and a.num_rows > 0
    ids = a.column("match_id").to_numpy()
    assert (np.diff(ids) >= 0).all() and ids[0] == 0


def test_state_is_released():
    m = cc.Matcher(RISE, key="sym", time="ts")
    m.process(ticks())
    m.close()
    assert m.live_partial_matches == 0 and m.buffer_nodes == 0
    with pytest.raises(cc.InputError, match="closed"):
        m.process(ticks())


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4", "spike_no_recovery"])
def test_kernel_chunks_and_pooled_output_do_not_change_the_output(monkeypatch, name):
    """A batch runs as kernel calls over chunks of rows appending to pooled output arrays;
    tiny chunks (keys' runs carried from call to call) and a pool dropped after every batch
    give the same table as one call."""
    from colcep.tools import examples
    from colcep.engine import feed, matcher
    from colcep.tools.ticks import make_ticks

    pattern = examples.get_example(name).pattern
    t = make_ticks(3000, symbols=7, seed=11)

    def run():
        m = cc.Matcher(pattern, key="name", time="ts", timeouts=True)
        return pa.concat_tables([m.process(t.slice(0, 1700)), m.process(t.slice(1700)), m.close()])

    whole = run()
    monkeypatch.setattr(matcher, "CHUNK_ROWS", 5)
    monkeypatch.setattr(matcher, "CHUNK_ROWS_PER_KEY", 0)
    monkeypatch.setattr(feed, "OUT_KEEP_EVENTS", 3)
    assert run().equals(whole) and whole.num_rows > 0


def test_one_compiled_signature_whatever_the_input_layout():
    """Chunked, sliced, read-only, float32, timestamp, pandas- and polars-derived inputs, batches
    larger than one kernel call, one row, event time: no kernel of ``colcep.kernels`` has a second
    signature, and a second process (the disk cache warm from the first) compiles nothing: a new
    pattern or input layout never waits for a compile. (Kernels called only from other kernels,
    e.g. ``grow`` on int32 and int64 arrays, gain signatures when their caller compiles, so the
    check runs in the warm process.)"""
    import subprocess
    import sys
    script = """
import importlib, pkgutil
import numpy as np, pyarrow as pa, polars as pl
from numba.core.registry import CPUDispatcher
import colcep as cc
import colcep.kernels
from colcep import col, last
from colcep.kernels import nfa
from colcep.engine.matcher import CHUNK_ROWS
p = (cc.Pattern.begin("a").where(col("p") > 0.5).followed_by("b").where(col("p") > last("p", of="a"))
     .within(50))
n = 2 * CHUNK_ROWS + 7
rng = np.random.default_rng(1)
t = pa.table({"k": rng.integers(0, 3, n), "ts": np.arange(n), "p": rng.random(n)})
chunked = pa.concat_tables([t.slice(0, 1000), t.slice(1000)])
ro = np.arange(n); ro.setflags(write=False)
readonly = t.set_column(1, "ts", pa.array(ro))
f32 = t.set_column(2, "p", t.column("p").cast(pa.float32()))
stamps = t.set_column(1, "ts", t.column("ts").cast(pa.timestamp("ms")))
for data in (t, chunked, readonly, t.slice(0, 1), t.slice(17, 5000), t.to_pandas(), pl.from_arrow(t), f32, stamps):
    cc.match(data, p, key="k", time="ts")
cc.match(t, p.skip(cc.SkipPastLastEvent()), key="k", time="ts", timeouts=True)
# out of order (ordered in linear time), grouped by key (in order per key), a dictionary key
cc.match(t.take(pa.array(np.arange(n)[::-1])), p, key="k", time="ts")
cc.match(t.sort_by([("k", "ascending"), ("ts", "ascending")]), p, key="k", time="ts")
cc.match(t.set_column(0, "k", pa.compute.dictionary_encode(t.column("k").cast(pa.string()))), p, key="k", time="ts")
from colcep.engine.ordering import StreamOrder
StreamOrder("k", "ts", "ts").check(t); StreamOrder("k", "ts").check(t.slice(3, 10))
m = cc.Matcher(p, key="k", time="ts", out_of_orderness=5)
m.process(readonly.slice(0, 5000)); m.process(chunked.slice(5000)); m.close()
assert len(nfa.run_batch.signatures) == len(nfa._run_key.signatures) == 1
for info in pkgutil.iter_modules(colcep.kernels.__path__):
    mod = importlib.import_module("colcep.kernels." + info.name)
    for name, f in vars(mod).items():
        if isinstance(f, CPUDispatcher) and f.__module__ == mod.__name__:
            if len(f.signatures) > 1 or sum(f.stats.cache_misses.values()):
                print(info.name, name, f.signatures, dict(f.stats.cache_misses))
print("ok")
"""
    subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)  # warm the cache
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok", res.stdout


def test_first_compile_is_announced_once_per_process(monkeypatch, capsys):
    """A cold kernel cache makes the first kernel call compile for about a minute: the library
    says so once on stderr (unless silenced), never again in the process."""
    from colcep.engine import kernel_cache as cache
    t = pa.table({"ts": [1, 2, 3], "x": [1.0, 2.0, 3.0]})
    p = cc.Pattern.begin("a").where(col("x") > 1)
    monkeypatch.setattr(cache, "kernels_cold", lambda: True)
    monkeypatch.setattr(cache, "_checked", False)
    monkeypatch.setattr(cache, "notice", True)  # (the CLI's tests turn it off: the CLI says it itself)
    cc.match(t, p, time="ts", time_unit="ms")
    cc.match(t, p, time="ts", time_unit="ms")
    err = capsys.readouterr().err
    assert err.count("colcep: compiling its kernels for this machine, once") == 1
    assert cache.cache_dir() in err
    monkeypatch.setattr(cache, "_checked", False)
    monkeypatch.setattr(cache, "notice", False)
    cc.match(t, p, time="ts", time_unit="ms")
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cache, "_checked", False)
    monkeypatch.setattr(cache, "notice", True)
    monkeypatch.setattr(cache, "kernels_cold", lambda: False)
    cc.match(t, p, time="ts", time_unit="ms")
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- a Matcher that never got a row
@pytest.mark.parametrize("key", [None, "sym", ["sym", "venue"]])
@pytest.mark.parametrize("timeouts", [False, True])
def test_close_before_any_batch_gives_the_empty_output(key, timeouts):
    """A Spark task or stream key that got no rows closes with the empty output, not a KeyError."""
    keys = [] if key is None else [key] if isinstance(key, str) else key
    own = ["timed_out", "timeout_ts"] if timeouts else []
    m = cc.Matcher(RISE, key=key, time="ts", timeouts=timeouts, columns=["p"])
    out = m.close()
    assert out.num_rows == 0
    assert out.column_names == ["match_id", *keys, "stage", "row", *own, "p"]
    # the types the input will have are unknown yet: given the schema, they are exact
    data = ticks().append_column("venue", pa.array(["X"] * 6))
    typed = cc.Matcher(RISE, key=key, time="ts", timeouts=timeouts, columns=["p"], schema=data.schema).close()
    fed = cc.Matcher(RISE, key=key, time="ts", timeouts=timeouts, columns=["p"])
    fed.process(data.slice(0, 0))
    assert typed.schema == fed.close().schema == fed.output_schema(data.schema)
    # a restore of a Matcher that never got a row closes alike
    again = cc.Matcher.restore(RISE, cc.Matcher(RISE, key=key, time="ts", timeouts=timeouts, columns=["p"]).snapshot())
    assert again.close().column_names == out.column_names


def test_a_bound_schema_is_checked_at_construction():
    with pytest.raises(cc.InputError, match="key column 'name' is missing"):
        cc.Matcher(RISE, key="name", time="ts", schema=ticks().schema)
    m = cc.Matcher(RISE, key="sym", time="ts", schema=ticks().schema)
    assert m.process(ticks()).equals(cc.match(ticks(), RISE, key="sym", time="ts"))
    with pytest.raises(cc.InputError, match="column 'v' is missing from this batch"):
        m.process(ticks().drop_columns(["v"]))


@pytest.mark.parametrize("lateness", [None, 50])
def test_output_columns_come_from_every_retained_batch_and_chunk(lateness):
    """A match's rows are read back from the input batches still retained (several calls back,
    tables of several record batches, event time: rows held and fed out of arrival order), with
    strings and nulls among the columns: the same output as one call over the whole input."""
    rng = np.random.default_rng(5)
    n = 3000
    ts = np.cumsum(rng.integers(0, 3, n))
    if lateness:
        ts = ts + rng.integers(0, lateness // 2, n)  # out of order within the lateness
    price = rng.normal(100, 1, n)
    tag = pa.array([None if i % 7 == 0 else f"t{i % 13}" for i in range(n)])
    vol = pa.array([None if i % 11 == 0 else float(i % 997) for i in range(n)])
    full = pa.table({"k": [f"k{i % 3}" for i in range(n)], "ts": ts, "price": price, "tag": tag, "vol": vol})
    p = (Pattern.begin("a").where(col("price") > 101.0)
         .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
         .followed_by("c").where(col("price") < 99.5).within(400))
    kw = dict(key="k", time="ts", columns=["price", "tag", "vol"], out_of_orderness=lateness)
    whole = cc.Matcher(p, **kw)
    want = pa.concat_tables([whole.process(full), whole.close()])
    m = cc.Matcher(p, **kw)
    got = []
    for lo in range(0, n, 250):  # each call a table of record batches of 1 to 60 rows
        part = full.slice(lo, 250)
        cuts = np.unique(np.r_[0, np.sort(rng.integers(0, 250, 8)), 250])
        got.append(m.process(pa.Table.from_batches([rb for a, b in zip(cuts[:-1], cuts[1:])
                                                    for rb in part.slice(a, b - a).to_batches()])))
    got.append(m.close())
    got = pa.concat_tables(got)
    assert want.num_rows > 100 and len(set(want.column("match_id").to_pylist())) > 10
    assert got.to_pylist() == want.to_pylist()
