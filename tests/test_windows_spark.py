"""Windows on Spark DataFrames: mapInArrow and native groupBy give the local result."""
from __future__ import annotations

import datetime as dt
import os
import sys

import numpy as np
import pyarrow as pa
import pytest

from colcep.windows import Count, Global, Session, Sliding, Tumbling, WindowSpecError, aggregate, assign, ohlc

pytestmark = pytest.mark.spark

AGGS = {"n": "count", "s": ("p", "sum"), "f": ("p", "first"), "l": ("p", "last"), "lo": ("v", "min"),
        "hi": ("v", "max"), "m": ("p", "mean")}


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    pyspark = pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[1]").appName("colcep-windows-test")
         .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false").config("spark.sql.execution.arrow.maxRecordsPerBatch", "64")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    del pyspark


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
