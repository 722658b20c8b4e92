"""Windows on Spark DataFrames: mapInArrow and native groupBy give the local result."""
from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pyarrow as pa
import pytest

from colcep.windows import Count, Global, Session, Sliding, Tumbling, WindowSpecError, aggregate, assign, ohlc
from spark_settings import BATCH_ROWS, SHUFFLE_PARTITIONS, spark_settings

pytestmark = pytest.mark.spark

AGGS = {"n": "count", "s": ("p", "sum"), "f": ("p", "first"), "l": ("p", "last"), "lo": ("v", "min"),
        "hi": ("v", "max"), "m": ("p", "mean")}


@pytest.fixture(scope="module")
def spark(spark):
    """The test process's Spark session (conftest.py) with 64-row Arrow batches (a window's rows
    reach the kernels in many batches) and two shuffle partitions."""
    with spark_settings(spark, {BATCH_ROWS: 64, SHUFFLE_PARTITIONS: 2}):
        yield spark


@pytest.fixture(scope="module")
def ticks() -> pa.Table:
    rng = np.random.default_rng(5)
    n = 300  # distinct times, so first / last have no ties (Spark's min_by breaks ties arbitrarily)
    ts = np.sort(rng.choice(np.arange(20_000), n, replace=False)).astype(np.int64)
    return pa.table({"k": rng.choice(["a", "b", "c"], n), "ts": ts, "p": np.round(rng.normal(size=n), 3),
                     "v": rng.integers(1, 100, n)})


def _norm(v):
    if isinstance(v, float):
        return round(v, 6)  # Spark sums in its own order
    if isinstance(v, dt.datetime) and v.tzinfo is not None:  # Spark returns naive UTC (session time zone)
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def rows(x) -> list:
    """Order-free comparable rows."""
    recs = x.to_pylist() if isinstance(x, pa.Table) else [r.asDict() for r in x.collect()]
    return sorted(repr({k: _norm(v) for k, v in r.items()}) for r in recs)


@pytest.mark.parametrize("window", [Tumbling(1000), Sliding(1000, 300, 70), Session(150), Count(7), Count(7, 3),
                                    Global()])
def test_aggregate_arrow_engine(spark, ticks, window):
    df = spark.createDataFrame(ticks.to_pandas())
    out = aggregate(df, window, AGGS, key="k", engine="arrow")
    assert rows(out) == rows(aggregate(ticks, window, AGGS, key="k"))


@pytest.mark.parametrize("window", [Tumbling(1000, -250), Sliding(1000, 300, 70), Sliding(200, 500)])
def test_aggregate_native_engine(spark, ticks, window):
    df = spark.createDataFrame(ticks.to_pandas())
    out = aggregate(df, window, AGGS, key="k", engine="native")
    assert rows(out) == rows(aggregate(ticks, window, AGGS, key="k"))


@pytest.mark.parametrize("window", [Tumbling(1000), Sliding(1000, 300), Session(150), Count(7, 3)])
def test_assign(spark, ticks, window):
    df = spark.createDataFrame(ticks.to_pandas())
    assert rows(assign(df, window, key="k")) == rows(assign(ticks, window, key="k"))


def test_ohlc_on_timestamps_both_engines(spark):
    base = dt.datetime(2024, 1, 2, 9, 30, tzinfo=dt.timezone.utc)
    stamps = [base + dt.timedelta(seconds=s) for s in (1, 30, 59, 61, 125)]
    t = pa.table({"name": ["X", "X", "Y", "X", "Y"], "ts": pa.array(stamps, pa.timestamp("us", "UTC")),
                  "price": [10.0, 11.0, 5.0, 9.0, 6.0], "volume": [1, 2, 3, 4, 5]})
    df = spark.createDataFrame(t.to_pandas())
    local = rows(ohlc(t, "1min", key="name"))
    for engine in ("arrow", "native"):
        assert rows(ohlc(df, "1min", key="name", engine=engine)) == local


def test_native_engine_rejects_sessions(spark, ticks):
    df = spark.createDataFrame(ticks.to_pandas())
    with pytest.raises(WindowSpecError, match="native"):
        aggregate(df, Session(10), {"n": "count"}, key="k", engine="native")


def _case_frames(spark, case):
    import flinkwin as fw

    t = fw.table(case)
    return t, spark.createDataFrame(t.to_pandas())


FIRING_AGGS = {"n": "count", "s": ("v", "sum"), "f": ("v", "first"), "l": ("v", "last"), "lo": ("v", "min")}


def test_firings_on_spark_are_flinks(spark):
    """Corpus cases on Spark (arrival order: the row index) give the in-process firings, which
    test_window_triggers checks against Flink's; one Spark job per window kind and a few triggers."""
    import flinkwin as fw

    cases = [c for c in fw.load() if "error" not in c["expected"]]
    picked: dict = {}
    for c in cases:  # the first case of each (window, trigger, evictor) kind
        sig = (c["window"]["kind"], (c["trigger"] or {}).get("kind"), (c["evictor"] or {}).get("kind"),
               bool(c["expected"]["late"]))
        picked.setdefault(sig, c)
    assert len(picked) >= 8
    for c in picked.values():
        t, df = _case_frames(spark, c)
        kw = dict(key="k", trigger=fw.trigger(c["trigger"]), evictor=fw.evictor(c["evictor"]),
                  allowed_lateness=c.get("lateness", 0), out_of_orderness=c.get("bound", 0))
        want = aggregate(t, fw.window(c["window"]), FIRING_AGGS, **kw)
        got = aggregate(df, fw.window(c["window"]), FIRING_AGGS, order="idx", **kw)
        assert rows(got) == rows(want), c["name"]


def test_firings_on_spark_timestamps_and_no_key(spark):
    from colcep import triggers as tr

    ts = np.array([0, 10_000, 65_000, 130_000, 3_599_000, 3_700_000, 20_000], np.int64)
    t = pa.table({"ts": pa.array(ts * 1000, pa.timestamp("us", tz="UTC")), "p": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                  "i": np.arange(7)})
    df = spark.createDataFrame(t.to_pandas())
    kw = dict(trigger=tr.ContinuousEventTime("1min"), allowed_lateness="1h", out_of_orderness="1s")
    want = aggregate(t, Tumbling("1h"), {"n": "count", "s": ("p", "sum")}, **kw)
    got = aggregate(df, Tumbling("1h"), {"n": "count", "s": ("p", "sum")}, order="i", **kw)
    assert rows(got) == rows(want) and "late" in {r["kind"] for r in want.to_pylist()}


@pytest.mark.parametrize("window, trig, evict", [
    (Tumbling("10s"), "continuous", None),
    (Session("3s"), "count", "count"),
])
def test_firings_on_structured_streaming(spark, tmp_path, window, trig, evict):
    """A file stream, one file per micro-batch, gives what WindowAggregator gives for the same
    batches with Spark's watermark (max time of the batches before - delay, in ms)."""
    from colcep import triggers as tr
    from colcep.spark.window_stream import aggregate_stream

    rng = np.random.default_rng(11)
    n = 400
    base = 1_767_225_600_000  # 2026-01-01, ms
    ms = base + np.sort(rng.integers(0, 60_000, n))
    arrival = np.argsort(ms + rng.integers(0, 1500, n), kind="stable")  # out of order within 1.5 s
    batches_idx = np.array_split(arrival, 8)
    batches_idx[5] = np.concatenate([batches_idx[5], batches_idx[1][:5]])  # late rows, behind the watermark
    batches_idx[1] = batches_idx[1][5:]
    full = pa.table({"name": rng.choice(["a", "b", "c"], n), "ts": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),
                     "p": np.round(rng.normal(size=n), 2)})
    src = tmp_path / "in"
    src.mkdir()
    import pyarrow.parquet as pq

    batches = [full.take(pa.array(b)) for b in batches_idx]
    for i, b in enumerate(batches):  # Spark's file source takes files in modification time order
        pq.write_table(b, src / f"part-{i:03d}.parquet")
        os.utime(src / f"part-{i:03d}.parquet", (1_700_000_000 + i, 1_700_000_000 + i))
    trigger = tr.ContinuousEventTime("2s") if trig == "continuous" else tr.Count(5)
    evictor = tr.CountEvictor(3) if evict else None
    aggs = {"n": "count", "s": ("p", "sum")}
    stream = (spark.readStream.schema(spark.createDataFrame(full.slice(0, 1).to_pandas()).schema)
              .option("maxFilesPerTrigger", 1).parquet(str(src)).withWatermark("ts", "2 seconds"))
    out = aggregate_stream(stream, window, aggs, key="name", trigger=trigger, evictor=evictor, allowed_lateness="1s")
    q = (out.writeStream.format("memory").queryName(f"fired_{trig}").outputMode("append")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination()
    got = spark.sql(f"select * from fired_{trig}")
    agg = WindowAggregatorForTest(window, aggs, trigger, evictor)
    want = pa.concat_tables([agg.process(b.sort_by("ts")) for b in batches])  # a micro-batch goes in time order
    assert want.num_rows > 20 and rows(got) == rows(want)


def WindowAggregatorForTest(window, aggs, trigger, evictor):
    from colcep.windows import WindowAggregator

    # Spark's watermark is max - 2 s; WindowAggregator's is max - out_of_orderness - 1
    return WindowAggregator(window, aggs, key="name", trigger=trigger, evictor=evictor, allowed_lateness="1s",
                            out_of_orderness=2_000_000 - 1, time_unit="us")


def test_corpus_on_structured_streaming_one_row_per_micro_batch(spark, tmp_path):
    """Corpus cases, one row per micro-batch, with Spark's watermark delay at the case's bound + 1
    ms (Spark's watermark is max - delay, Flink's max - bound - 1): Flink's firings (key, window,
    firing, kind and the rows' count and sum). Times are moved by a multiple of every size and
    interval (the same windows), and a last row of another key far ahead stands for Flink's final
    watermark; Global windows (which Flink fires at Long.MAX_VALUE) are left to the in-process tests."""
    import math

    import pyarrow.parquet as pq

    import flinkwin as fw
    from colcep.spark.window_stream import aggregate_stream

    cases = [c for c in fw.load() if "error" not in c["expected"] and c["window"]["kind"] != "global"]
    picked: dict = {}
    for c in cases:  # one case of each window kind and trigger, with late rows where there are
        picked.setdefault((c["window"]["kind"], (c["trigger"] or {}).get("kind"), bool(c["evictor"])), c)
    chosen = sorted(picked.values(), key=lambda c: len(c["rows"]))[:6]
    for n_case, case in enumerate(chosen):
        w = case["window"]
        grid = math.lcm(*(x for x in (w.get("size"), w.get("slide"), *_intervals(case["trigger"])) if x))
        base = grid * -(-1_700_000_000_000 // grid)  # ms, after 2023: every window and interval keeps its grid
        src = tmp_path / f"in{n_case}"
        src.mkdir()
        rows = case["rows"] + [["~end", max(r[1] for r in case["rows"]) + 10**6, 0.0]]
        for i, (k, ts, v) in enumerate(rows):
            f = src / f"r{i:04d}.parquet"
            pq.write_table(pa.table({"k": [k], "ts": pa.array([(base + ts) * 1000], pa.timestamp("us", tz="UTC")),
                                     "v": [float(v)]}), f)
            os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
        schema = "k string, ts timestamp, v double"
        stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
                  .withWatermark("ts", f"{case.get('bound', 0) + 1} milliseconds"))
        out = aggregate_stream(stream, fw.window(case["window"], ms=True), {"n": "count", "s": ("v", "sum")}, key="k",
                               trigger=fw.trigger(case["trigger"], ms=True), evictor=fw.evictor(case["evictor"], ms=True),
                               allowed_lateness=f"{case.get('lateness', 0)}ms", time_unit="ms")
        name = f"corpus_{n_case}"
        q = (out.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(tmp_path / f"ck{n_case}")).trigger(availableNow=True).start())
        q.awaitTermination()
        ms = lambda d: int(_norm(d).replace(tzinfo=dt.timezone.utc).timestamp() * 1000) - base  # noqa: E731
        got = sorted((r.k, ms(r.window_start), ms(r.window_end),
                      r.firing, r.kind, r.n, round(r.s, 6))
                     for r in spark.sql(f"select * from {name}").collect() if r.k != "~end")
        values = [r[2] for r in case["rows"]]
        want = sorted((f[0], f[1], f[2], f[3], f[4], len(f[6]), round(sum(values[i] for i in f[6]), 6))
                      for f in case["expected"]["firings"])
        assert got == want, case["name"]


def _intervals(t):
    if not t:
        return []
    return ([t["interval"]] if t["kind"] == "continuous" else []) + \
        [x for sub in ([t["of"]] if t["kind"] == "purging" else t.get("of", [])) for x in _intervals(sub)]


def test_firings_on_spark_big_enough_to_sample_and_global_continuous(spark):
    """Enough rows that Spark samples its range bounds (the watermark pass must see the partitions
    the maxima came from), and a Global window with a continuous trigger, whose last firings depend
    on the watermark after the last row of all keys (key a's only row is long before b's last)."""
    from colcep import triggers as tr

    rng = np.random.default_rng(4)
    n = 6000
    t = pa.table({"k": rng.choice(["a", "b", "c", "d"], n), "ts": np.sort(rng.integers(0, 200_000, n)),
                  "p": np.round(rng.normal(size=n), 2), "i": np.arange(n)})
    t = t.take(pa.array(np.argsort(t.column("ts").to_numpy() + rng.integers(0, 3000, n), kind="stable")))
    t = t.set_column(3, "i", pa.array(np.arange(n)))
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    kw = dict(key="k", trigger=tr.ContinuousEventTime(5000), allowed_lateness=1000, out_of_orderness=500)
    aggs = {"n": "count", "s": ("p", "sum")}
    assert rows(aggregate(df, Tumbling(20_000), aggs, order="i", **kw)) == rows(aggregate(t, Tumbling(20_000), aggs, **kw))
    g = pa.table({"k": ["a", "b", "b", "b"], "ts": [0, 10, 50, 100], "p": [1.0, 2.0, 3.0, 4.0], "i": [0, 1, 2, 3]})
    gkw = dict(key="k", trigger=tr.ContinuousEventTime(10))
    want = aggregate(g, Global(), aggs, **gkw)
    # a: at 10, 20 ... 90 (the last watermark is 99), then at the end of input the due timer (100) and on time
    assert want.filter(pa.compute.equal(want["k"], "a")).num_rows == 11
    assert rows(aggregate(spark.createDataFrame(g.to_pandas()), Global(), aggs, order="i", **gkw)) == rows(want)
