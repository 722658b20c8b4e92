"""colcep on Spark equals colcep in process.

The first tests drive ``KeyedStream`` (what one Spark task runs) directly over batches of
every size; the ``spark`` tests run the real mapInArrow job on the test process's local
session over several Arrow batch sizes and partition counts (empty partitions included,
and one huge key) and compare with ``colcep.match`` on the same rows.
"""
import os
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import colcep
from colcep import InputError, PatternError, col
from colcep.tools.examples import P1, P2, get_example
from colcep.spark import ID_BITS, KeyedStream, arrow_spec
from colcep.tools.ticks import make_ticks, write_ticks
from spark_settings import BATCH_ROWS, JAVA_OPTIONS, spark_settings


def canon(tbl: pa.Table, key: str | None = "name") -> Counter:
    """Matches as a multiset of (key, timed_out, ((stage, row), ...)), independent of ids."""
    cols = ["match_id", "stage", "row"] + ([key] if key else []) + \
        (["timed_out"] if "timed_out" in tbl.column_names else [])
    d = tbl.select(cols).to_pydict()
    m: dict = {}
    for i in range(tbl.num_rows):
        k = (d[key][i] if key else None, d["timed_out"][i] if "timed_out" in d else False)
        m.setdefault(d["match_id"][i], [k, []])[1].append((d["stage"][i], d["row"][i]))
    return Counter((k, tuple(v)) for k, v in m.values())


def key_sorted(t: pa.Table, key: str = "name") -> pa.Table:
    return t.take(pc.sort_indices(t, sort_keys=[(key, "ascending"), ("ts", "ascending"), ("id", "ascending")]))


def run_stream(t: pa.Table, pattern, batch: int, columns, timeouts=False, base=0) -> pa.Table:
    spec = arrow_spec(t.schema, pattern, "name", "ts", columns, seq="id", timeouts=timeouts)
    ks = KeyedStream(spec, base)
    outs = []
    for off in range(0, t.num_rows, batch):
        outs += ks.feed(t.slice(off, batch).combine_chunks().to_batches()[0])
    outs += ks.finish()
    return pa.concat_tables(outs) if outs else spec.out_schema.empty_table()


# ============================================================================ KeyedStream (no Spark)
CASES = [("p1", P1, ["price", "volume"]), ("three_rising", get_example("three_rising").pattern, ["price"]),
         ("spike_no_recovery", get_example("spike_no_recovery").pattern, ["price"]),
         ("paper_query3", get_example("paper_query3").pattern, ["price", "volume"])]


@pytest.mark.parametrize("name,pattern,columns", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("batch", [1, 13, 997, 50_000])
def test_keyed_stream_equals_in_process(name, pattern, columns, batch):
    ticks = make_ticks(3000 if batch == 1 else 12000, 30, 11)
    want = colcep.match(ticks, pattern, key="name", time="ts", columns=columns, timeouts=name == "paper_query3")
    got = run_stream(key_sorted(ticks), pattern, batch, columns, timeouts=name == "paper_query3", base=3 << ID_BITS)
    assert canon(got) == canon(want)
    assert got.num_rows == want.num_rows
    # the copied columns are the input's values at those rows
    for c in columns:
        assert np.array_equal(got.column(c).to_numpy(), ticks.column(c).to_numpy()[got.column("row").to_numpy()])
    ids = got.column("match_id").to_numpy()
    assert np.all(ids >> ID_BITS == 3)
    assert len(np.unique(ids)) == sum(canon(want).values())


def test_keyed_stream_single_huge_key_small_batches():
    ticks = make_ticks(40000, 1, 2)
    for pattern, cols in ((P1, ["price"]), (P2, ["price"])):
        want = colcep.match(ticks, pattern, key="name", time="ts", columns=cols)
        got = run_stream(ticks, pattern, 777, cols)
        assert canon(got) == canon(want) and len(canon(want)) > 10


def test_keyed_stream_rejects_ungrouped_input():
    t = make_ticks(100, 3, 1)  # arrival order: keys interleave
    spec = arrow_spec(t.schema, P1, "name", "ts", [], seq="id")
    ks = KeyedStream(spec)
    with pytest.raises(InputError, match="not grouped by the key column 'name'"):
        for off in range(0, 100, 10):
            ks.feed(t.slice(off, 10))


def test_arrow_spec_errors():
    t = make_ticks(10, 2).append_column("tags", pa.array([[1]] * 10, pa.list_(pa.int64())))
    with pytest.raises(InputError, match="key column 'symbol' is missing"):
        arrow_spec(t.schema, P1, "symbol", "ts")
    with pytest.raises(InputError, match="time column 'price' must be an integer or timestamp"):
        arrow_spec(t.schema, P1, "name", "price")
    with pytest.raises(InputError, match="stage 'a' reads column 'size', which is missing"):
        arrow_spec(t.schema, colcep.Pattern.begin("a").where(col("size") > 1), "name", "ts")
    with pytest.raises(InputError, match="stage 'x': column 'tags' has type list"):
        arrow_spec(t.schema, colcep.Pattern.begin("x").where(col("tags") > 1), "name", "ts")
    with pytest.raises(InputError, match="seq column 'name'"):
        arrow_spec(t.schema, P1, "name", "ts", seq="name")
    with pytest.raises(PatternError, match="stage 'a'"):
        arrow_spec(t.schema, colcep.Pattern.begin("a").where(col("price") + 1), "name", "ts")
    with pytest.raises(InputError, match="'stage' clashes"):
        arrow_spec(make_ticks(10, 2).rename_columns(["id", "name", "ts", "price", "stage"]).schema,
                   colcep.Pattern.begin("a").where(col("price") > 1), "name", "ts")


# ============================================================================ on Spark
spark_only = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(spark):
    """The test process's Spark session (conftest.py) with 10,000-row Arrow batches."""
    with spark_settings(spark, {BATCH_ROWS: 10_000}):
        yield spark


@pytest.fixture(scope="module")
def ticks():
    return make_ticks(6000, 7, 5)  # 7 symbols: with 8 or more partitions some are empty


@pytest.fixture(scope="module")
def ticks_df(spark, ticks):
    return spark.createDataFrame(ticks).cache()


def test_local_session_java_options(spark):
    """``java_options`` reach the JVM beside the quiet log configuration; given twice, an error."""
    from colcep.spark import local_session

    jvm_args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(JAVA_OPTIONS.split()) <= set(jvm_args), jvm_args
    assert any(a.startswith("-Dlog4j2.configurationFile=file:") for a in jvm_args), jvm_args
    with pytest.raises(InputError, match="either as java_options or in conf's spark.driver.extraJavaOptions"):
        local_session(java_options="-Xss4m", conf={"spark.driver.extraJavaOptions": "-Xss8m"})


def set_batch(spark, rows: int) -> None:
    spark.conf.set(BATCH_ROWS, str(rows))


@spark_only
@pytest.mark.parametrize("batch,parts", [(7, 3), (250, 1), (250, 9), (100_000, 2), (100_000, 12)])
def test_spark_equals_in_process(spark, ticks, ticks_df, batch, parts):
    from colcep.spark import ScanMetrics, match

    set_batch(spark, batch)
    pattern = get_example("three_rising").pattern
    want = colcep.match(ticks, pattern, key="name", time="ts", columns=["price"])
    m = ScanMetrics(spark)
    out = match(ticks_df, pattern, key="name", time="ts", columns=["price"], seq="id", num_partitions=parts,
                metrics=m)
    got = out.toArrow()
    assert canon(got) == canon(want) and len(canon(want)) > 50
    assert m.rows == ticks.num_rows and m.tasks == parts
    assert m.batches >= -(-ticks.num_rows // batch)
    ids = got.column("match_id").to_numpy()
    assert len(np.unique(ids)) == sum(canon(want).values())
    assert set(np.unique(ids >> ID_BITS)) <= set(range(parts))
    assert np.array_equal(got.column("price").to_numpy(), ticks.column("price").to_numpy()[got.column("row")])


@spark_only
@pytest.mark.parametrize("name", ["p2", "paper_query3", "spike_no_recovery", "any_triple"])
def test_spark_patterns(spark, name):
    from colcep.spark import match

    set_batch(spark, 1000)
    ticks = make_ticks(8000, 40, 9)
    ex = get_example(name)
    timeouts = name == "paper_query3"
    want = colcep.match(ticks, ex.pattern, key="name", time="ts", columns=list(ex.columns), timeouts=timeouts)
    got = match(spark.createDataFrame(ticks), ex.pattern, "name", "ts", list(ex.columns), seq="id",
                timeouts=timeouts, num_partitions=3).toArrow()
    assert canon(got) == canon(want)
    assert name == "spike_no_recovery" or len(canon(want)) > 10


@spark_only
def test_spark_single_huge_key(spark):
    """One key of 30,000 rows in batches of 1,000: its partial matches cross 30 batches."""
    from colcep.spark import match

    set_batch(spark, 1000)
    ticks = make_ticks(30000, 1, 4)
    want = colcep.match(ticks, P2, key="name", time="ts", columns=["price"])
    got = match(spark.createDataFrame(ticks), P2, "name", "ts", ["price"], seq="id", num_partitions=2).toArrow()
    assert canon(got) == canon(want) and len(canon(want)) > 20


@spark_only
def test_spark_ids_deterministic_and_row_identity_without_seq(spark, ticks, ticks_df):
    from colcep.spark import match

    set_batch(spark, 500)
    runs = [match(ticks_df, P1, "name", "ts", ["id", "price"], num_partitions=4).toArrow()
            .sort_by([("match_id", "ascending"), ("row", "ascending")]) for _ in range(2)]
    assert runs[0].equals(runs[1])
    got = runs[0]
    # without seq, ``row`` is Spark's id of the input row; the copied ``id`` column identifies the tick
    got = got.set_column(got.schema.get_field_index("row"), "row", got.column("id"))
    want = colcep.match(ticks, P1, key="name", time="ts", columns=["id", "price"])
    assert canon(got) == canon(want) and len(canon(want)) > 10


@spark_only
def test_spark_composite_key(spark, ticks):
    """key=["name", "venue"]: the key columns first, the in-process matches."""
    from colcep.spark import match

    set_batch(spark, 700)
    t = ticks.append_column("venue", pa.array(np.arange(ticks.num_rows) % 3, pa.int32()))
    got = match(spark.createDataFrame(t), P1, ["name", "venue"], "ts", ["price"], seq="id",
                num_partitions=3).toArrow()
    want = colcep.match(t, P1, key=["name", "venue"], time="ts", columns=["price"])
    assert got.schema.names[:3] == ["match_id", "name", "venue"] and got.schema.field("venue").type == pa.int32()

    def joined(x):
        return x.append_column("k", pc.binary_join_element_wise(x.column("name"), pc.cast(x.column("venue"),
                                                                                          pa.string()), "|"))
    assert canon(joined(got), "k") == canon(joined(want), "k") and len(canon(want)) > 10


@spark_only
def test_spark_no_key_and_timestamp_time(spark, ticks):
    from pyspark.sql import functions as F

    from colcep.spark import match

    set_batch(spark, 999)
    pattern = colcep.Pattern.begin("a").where(col("volume") > 1500).followed_by("b") \
        .where(col("price") > colcep.last("price", of="a")).within("2s")
    df = spark.createDataFrame(ticks).withColumn("ts", F.timestamp_millis("ts"))
    got = match(df, pattern, key=None, time="ts", columns=["name"], seq="id").toArrow()
    want = colcep.match(ticks, pattern, key=None, time="ts", columns=["name"])
    assert canon(got, None) == canon(want, None) and len(canon(want, None)) > 10


@spark_only
def test_spark_output_schema(spark, ticks_df):
    from colcep.spark import match, output_schema

    out = match(ticks_df, P1, "name", "ts", ["price", "volume"], seq="id", timeouts=True)
    assert out.schema == output_schema(ticks_df, P1, "name", "ts", ["price", "volume"], timeouts=True)
    assert out.columns == ["match_id", "name", "stage", "row", "timed_out", "timeout_ts", "price", "volume"]
    assert match(ticks_df, P1, "name", "ts", [], seq="id").columns == ["match_id", "name", "stage", "row"]


@spark_only
def test_spark_errors_before_the_job(spark, ticks):
    from pyspark.sql import functions as F

    from colcep.spark import match

    df = spark.createDataFrame(ticks)
    with pytest.raises(InputError, match="key column 'symbol' is missing"):
        match(df, P1, "symbol", "ts")
    with pytest.raises(InputError, match="time column 'when' is missing"):
        match(df, P1, "name", "when")
    with pytest.raises(InputError, match="time column 'price' must be an integer or timestamp"):
        match(df, P1, "name", "price")
    arr = df.withColumn("tags", F.array(F.col("id")))
    with pytest.raises(InputError, match="stage 'x': column 'tags' has type ArrayType"):
        match(arr, colcep.Pattern.begin("x").where(col("tags") > 1), "name", "ts")
    with pytest.raises(PatternError, match="stage 'a'"):
        match(df, colcep.Pattern.begin("a").where(col("name") > 1.0), "name", "ts")
    nulls = df.withColumn("name", F.when(F.col("id") == 17, F.lit(None)).otherwise(F.col("name")))
    with pytest.raises(InputError, match=r"key column 'name' has nulls \(e.g. the row \{'name': None, 'ts': .*'id': 17,"):
        match(nulls, P1, "name", "ts")
    nt = df.withColumn("ts", F.when(F.col("id") == 5, F.lit(None)).otherwise(F.col("ts")))
    with pytest.raises(InputError, match=r"time column 'ts' has nulls \(e.g. the row \{.*'id': 5,"):
        match(nt, P1, "name", "ts")


@spark_only
def test_match_parquet_direct(spark, tmp_path):
    from colcep.spark import match_parquet

    import pyarrow.dataset as ds

    ticks = make_ticks(6000, 6, 8)
    # Hive partitions on the key (what --by-key wrote before issue 21), still read
    ds.write_dataset(ticks, tmp_path / "hive", format="parquet", partitioning=["name"], partitioning_flavor="hive")
    assert len(list((tmp_path / "hive").iterdir())) == 6
    # key ranges, sorted (what --by-key writes now)
    write_ticks(tmp_path / "ranges", 6000, 6, 8, partition_by_key=True, buckets=4)
    assert len(list((tmp_path / "ranges").iterdir())) == 4
    # files that each hold whole keys (two keys per file), not Hive partitions
    flat = tmp_path / "flat"
    flat.mkdir()
    srt = key_sorted(ticks)
    names = srt.column("name").to_pylist()
    for i, (a, b) in enumerate([("S0000", "S0001"), ("S0002", "S0003"), ("S0004", "S0005")]):
        idx = [j for j, n in enumerate(names) if n in (a, b)]
        pq.write_table(srt.take(pa.array(idx)), flat / f"part-{i}.parquet")
    # the same files with their rows in arrival order (keys interleaved): ordered per key as read
    mixed_order = tmp_path / "flat_arrival"
    mixed_order.mkdir()
    arrival = ticks.column("name").to_pylist()
    for i, (a, b) in enumerate([("S0000", "S0001"), ("S0002", "S0003"), ("S0004", "S0005")]):
        idx = [j for j, n in enumerate(arrival) if n in (a, b)]
        pq.write_table(ticks.take(pa.array(idx)), mixed_order / f"part-{i}.parquet")
    pattern = get_example("three_rising").pattern
    want = colcep.match(ticks, pattern, key="name", time="ts", columns=["price"])
    for path, parts in ((tmp_path / "hive", 4), (flat, 2), (tmp_path / "hive", 9), (tmp_path / "ranges", 3),
                        (mixed_order, 2)):
        got = match_parquet(str(path), pattern, "name", "ts", ["price"], spark=spark, seq="id",
                            num_partitions=parts, batch_rows=700).toArrow()
        assert canon(got) == canon(want) and len(canon(want)) > 20, path
        assert len(np.unique(got.column("match_id").to_numpy())) == sum(canon(want).values())
    # without seq: row = group << 40 | position in the group's files, unique and stable
    a = match_parquet(str(flat), pattern, "name", "ts", ["id"], spark=spark).toArrow().sort_by("row")
    b = match_parquet(str(flat), pattern, "name", "ts", ["id"], spark=spark).toArrow().sort_by("row")
    assert a.equals(b)
    a = a.set_column(a.schema.get_field_index("row"), "row", a.column("id"))
    assert canon(a) == canon(colcep.match(ticks, pattern, key="name", time="ts", columns=["id"]))
    # a layout that splits keys over files is refused on the driver
    pq.write_table(ticks.slice(0, 3000), tmp_path / "mixed-0.parquet")
    pq.write_table(ticks.slice(3000), tmp_path / "mixed-1.parquet")
    (tmp_path / "mixed").mkdir()
    for f in ("mixed-0.parquet", "mixed-1.parquet"):
        (tmp_path / f).rename(tmp_path / "mixed" / f)
    with pytest.raises(InputError, match="not laid out by file"):
        match_parquet(str(tmp_path / "mixed"), pattern, "name", "ts", spark=spark)


def test_write_by_key_layout(tmp_path):
    """write_by_key: files of whole keys in key ranges that do not overlap, each sorted by
    (key, time, seq); the file count from the data or ``buckets``."""
    from colcep.spark import write_by_key
    from colcep.spark.parquet import _is_sorted, default_buckets

    assert default_buckets(0, 0) == default_buckets(1000, 5) == 1  # files of 16,384 rows or more
    assert default_buckets(200_000, 100_000) == 12 and default_buckets(10**6, 100) == 61
    assert default_buckets(10**6, 10) == 10  # at most one a key
    assert default_buckets(10**8, 10**6) == 64  # spread over 64 files
    assert default_buckets(10**9, 10**6) == 477  # at most ~2 M rows a file
    assert default_buckets(10**10, 10**7) == 1024  # and at most 1,024 files
    # an integer key, a timestamp time, one key larger than a file's share, rows in no order
    rng = np.random.default_rng(5)
    n = 20_000
    k = np.where(rng.random(n) < 0.4, 7, rng.integers(0, 300, n))
    t = pa.table({"k": k, "t": pa.array(rng.integers(0, 10**9, n)).cast(pa.timestamp("ms")),
                  "seq": np.arange(n)[::-1].copy(), "v": rng.random(n)})
    files = write_by_key(t, tmp_path / "d", "k", "t", seq="seq", buckets=8)
    assert 2 < len(files) <= 8 and [os.path.basename(f) for f in files] == \
        [f"part-{i:05d}.parquet" for i in range(len(files))]
    parts = [pq.read_table(f) for f in files]
    assert sum(p.num_rows for p in parts) == n
    spans = [(pc.min(p.column("k")).as_py(), pc.max(p.column("k")).as_py()) for p in parts]
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # key ranges in order, disjoint
    assert any(lo == hi == 7 for lo, hi in spans)  # the large key has a file to itself
    assert all(_is_sorted(p, ["k", "t", "seq"]) for p in parts)
    back = pa.concat_tables(parts)
    assert back.sort_by([("seq", "ascending")]).equals(t.sort_by([("seq", "ascending")]))
    # rewriting with fewer files replaces the old ones
    assert len(write_by_key(t, tmp_path / "d", "k", "t", buckets=2)) == 2 == len(os.listdir(tmp_path / "d"))
    (tmp_path / "d" / "k=1").mkdir()
    with pytest.raises(InputError, match=r"holds other data \(\['k=1'\]\)"):
        write_by_key(t, tmp_path / "d", "k", "t")
    with pytest.raises(InputError, match="null"):
        write_by_key(pa.table({"k": [1, None], "t": [1, 2]}), tmp_path / "e", "k", "t")
    assert len(write_by_key(t.slice(0, 0), tmp_path / "f", "k", "t")) == 1  # no rows: one empty file


def test_is_sorted_agrees_with_sort():
    """The order check match_parquet runs before it would sort: true exactly when sorting
    would change nothing, over keys (string, integer), times and ties."""
    from colcep.spark.parquet import _is_sorted

    rng = np.random.default_rng(11)
    for trial in range(400):
        n = int(rng.integers(0, 25))
        t = pa.table({"k": pa.array(rng.choice(["a", "b", "cc"], n)) if trial % 2 else pa.array(rng.integers(0, 3, n)),
                      "t": pa.array(rng.integers(0, 3, n)), "s": pa.array(rng.integers(0, 3, n))})
        for cols in (["k", "t", "s"], ["t", "s"], ["k", "s"]):
            srt = t.sort_by([(c, "ascending") for c in cols])
            want = all(t.column(c).equals(srt.column(c)) for c in cols)
            assert _is_sorted(t, cols) == want, (t.to_pydict(), cols)
            assert _is_sorted(srt, cols)
    assert not _is_sorted(pa.table({"k": [1, None], "t": [1, 2]}), ["k", "t"])


@spark_only
def test_match_parquet_many_keys(spark, tmp_path):
    """10^5 symbols (issue 21): partition_by_key=True made 10^5 Hive folders, and pyarrow
    refuses more than 1,024 at once. Now a few files of whole keys, each sorted by time, and
    match_parquet over them equals the in-process match."""
    from colcep.spark import match_parquet
    from colcep.spark.parquet import _is_sorted

    events, symbols = 200_000, 100_000
    ticks = make_ticks(events, symbols, 3)
    path = write_ticks(tmp_path / "by_key", events, symbols, 3, partition_by_key=True)
    files = sorted(path.iterdir())
    assert 1 < len(files) <= 64, len(files)
    seen: set = set()
    for f in files:
        t = pq.read_table(f, columns=["name", "ts", "id"])
        names = set(pc.unique(t.column("name")).to_pylist())
        assert not names & seen  # every key lives in one file ...
        seen |= names
        assert _is_sorted(t, ["name", "ts", "id"])  # ... sorted by time: the task does not re-sort
    assert seen == set(pc.unique(ticks.column("name")).to_pylist())
    pattern = (colcep.Pattern.begin("a").where(col("volume") > 300)
               .next("b").where(col("price") > colcep.last("price", of="a")))
    want = colcep.match(ticks, pattern, key="name", time="ts", columns=["price"])
    got = match_parquet(str(path), pattern, "name", "ts", ["price"], spark=spark, seq="id", num_partitions=4)
    got = got.toArrow()
    assert canon(got) == canon(want) and len(canon(want)) > 10_000


@spark_only
def test_progress_of_spark_scans(spark, tmp_path, capsys, monkeypatch):
    """``progress=`` on match_parquet and match: the meter follows the job that runs the lazy
    DataFrame, its last line drawn (from the last task's accumulators) before the action returns;
    off by default without a terminal; the output is the same."""
    import io
    import re

    from colcep.engine import progress as prog  # the redraw interval of every meter, Spark's too
    from colcep.spark import ScanMetrics, match, match_parquet

    write_ticks(tmp_path / "hive", 6000, 6, 8, partition_by_key=True)
    pattern = get_example("three_rising").pattern
    want = colcep.match(make_ticks(6000, 6, 8), pattern, key="name", time="ts", columns=["price"])
    n = len(np.unique(want.column("match_id").to_numpy()))
    args = (str(tmp_path / "hive"), pattern, "name", "ts", ["price"])
    got = match_parquet(*args, spark=spark, seq="id", num_partitions=3, progress=True).toArrow()
    err = capsys.readouterr().err  # the last line is there as soon as the action has returned
    assert canon(got) == canon(want)
    assert re.fullmatch(r"\[ *\d+\.\d s\] colcep\.spark\.match_parquet: matched 6,000 rows in \d+\.\d s "
                        rf"\([\d,]+ rows/s\): {n:,} matches\n", err.splitlines(keepends=True)[-1]), err
    assert all("colcep.spark.match_parquet: " in ln for ln in err.splitlines()), err
    quiet = match_parquet(*args, spark=spark, seq="id", num_partitions=3)  # the default: no terminal here
    assert canon(quiet.toArrow()) == canon(want) and capsys.readouterr().err == ""
    # on a terminal: one line redrawn (tasks done so far), then the last line; the user's metrics filled in
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(prog, "REDRAW_SECONDS", 0.05)
    metrics = ScanMetrics(spark)
    df = spark.createDataFrame(make_ticks(6000, 6, 8))
    got = match(df, pattern, "name", "ts", ["price"], seq="id", num_partitions=2, metrics=metrics,
                progress=True).toArrow()
    assert canon(got) == canon(want) and int(metrics.tasks) == 2 and int(metrics.rows) == 6000
    out = tty.getvalue()
    assert out.endswith(f"colcep.spark.match: matched 6,000 rows in {out.rsplit(' in ', 1)[1].split(' s ')[0]} s "
                        f"({out.rsplit('(', 1)[1].split(' rows/s')[0]} rows/s): {n:,} matches\n"), out
    assert out.count("\n") == 1 and "tasks done" in out and "\r" in out, out


@spark_only
def test_cli_scan_on_spark(spark, tmp_path, capsys):
    from colcep.cli import main

    set_batch(spark, 10_000)
    base = ["scan", "--generate", "8000", "--symbols", "16", "--pattern", "paper_query3"]
    assert main(base + ["--out", str(tmp_path / "spark"), "--partitions", "3"]) == 0
    printed = capsys.readouterr().out
    assert "Spark local[2] (mapInArrow, 3 partitions" in printed and "8,000 rows" in printed
    assert main(base + ["--in-process", "--out", str(tmp_path / "local")]) == 0
    import pyarrow.dataset as ds

    got = ds.dataset(str(tmp_path / "spark"), format="parquet").to_table()
    want = ds.dataset(str(tmp_path / "local"), format="parquet").to_table()
    assert canon(got) == canon(want) and len(canon(want)) > 10
    # the direct Parquet path from the command line
    assert main(["scan", "--generate", "8000", "--symbols", "16", "--by-key", "--pattern", "paper_query3",
                 "--direct", "--out", str(tmp_path / "direct")]) == 0
    assert "Parquet read by the executors with pyarrow" in capsys.readouterr().out
    got = ds.dataset(str(tmp_path / "direct"), format="parquet").to_table()
    assert canon(got) == canon(want)
    # above 1,024 symbols (pyarrow's Hive writer refused: "Fragment would be written into 3000 partitions")
    assert main(["scan", "--events", "12000", "--symbols", "3000", "--by-key", "--buckets", "5", "--pattern",
                 "p1", "--direct", "--out", str(tmp_path / "many")]) == 0
    assert len(list((tmp_path / "ticks_12000x3000_seed7_by_key_b5").iterdir())) == 5
    got = ds.dataset(str(tmp_path / "many"), format="parquet").to_table()
    ex = get_example("p1")
    want = colcep.match(make_ticks(12000, 3000, 7), ex.pattern, key="name", time="ts", columns=list(ex.columns))
    assert canon(got) == canon(want) and len(canon(want)) > 0


@spark_only
def test_example_on_spark(spark, capsys):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    try:
        import importlib

        ex = importlib.import_module("three_rising")
    finally:
        sys.path.pop(0)
    set_batch(spark, 10_000)
    got = ex.main(["--events", "5000", "--symbols", "5", "--spark", "--show", "1"])
    assert "Spark local[2]" in capsys.readouterr().out
    want = colcep.match(make_ticks(5000, 5, 7), ex.PATTERN, key="name", time="ts", columns=["price"])
    assert canon(got) == canon(want)


@spark_only
def test_pandas_is_one_pyspark_supports_and_no_warning_is_hidden(spark, ticks_df):
    """The spark extra pins pandas below 3 (PySpark 4.3 warns on every pandas UDF that it does not
    yet fully support pandas 3); colcep hides no such warning, and its Spark jobs raise none."""
    import warnings
    from pathlib import Path

    import pandas
    assert int(pandas.__version__.split(".")[0]) < 3
    src = Path(colcep.__file__).parent
    assert not [p for p in src.rglob("*.py") if "fully support pandas" in p.read_text()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        colcep.spark.match(ticks_df, P1, key="name", time="ts", seq="id").count()
    assert not [w for w in caught if "pandas" in str(w.message)], [str(w.message) for w in caught]


@spark_only
def test_spark_match_many_is_each_patterns_own_job(spark, ticks, ticks_df):
    """Several patterns in one job: each pattern's rows are exactly what ``match`` gives it
    alone (match ids included), with one shuffle of the input."""
    from colcep.tools.examples import BENCHMARK_PATTERNS
    from colcep.spark import ScanMetrics, match, match_many

    set_batch(spark, 700)
    pats = {"three_rising": get_example("three_rising").pattern,
            **{n: p for n, p in BENCHMARK_PATTERNS.items() if n != "P4"}}  # (P4's output is huge on 7 keys)
    m = ScanMetrics(spark)
    out = match_many(ticks_df, pats, key="name", time="ts", columns=["price"], seq="id", timeouts=True,
                     num_partitions=3, metrics=m)
    assert out.columns == ["pattern", "match_id", "name", "stage", "row", "timed_out", "timeout_ts", "price"]
    got = out.toArrow()
    assert m.rows == ticks.num_rows and m.tasks == 3  # the rows were read and shuffled once
    order = [("match_id", "ascending"), ("stage", "ascending"), ("row", "ascending")]
    for name, p in pats.items():
        alone = match(ticks_df, p, key="name", time="ts", columns=["price"], seq="id", timeouts=True,
                      num_partitions=3).toArrow().sort_by(order)
        mine = got.filter(pa.compute.equal(got.column("pattern"), name)).drop_columns(["pattern"]).sort_by(order)
        assert mine.equals(alone), name
        want = colcep.match(ticks, p, key="name", time="ts", columns=["price"], timeouts=True)
        assert canon(mine) == canon(want)
    assert got.num_rows > 100
    from colcep.errors import InputError

    with pytest.raises(InputError, match="names each row's pattern"):
        match_many(ticks_df.withColumnRenamed("volume", "pattern"), pats, key="name", time="ts")
    with pytest.raises(InputError, match="non-empty mapping"):
        match_many(ticks_df, {}, key="name", time="ts")


@spark_only
def test_cli_scan_several_patterns_on_spark(spark, tmp_path, capsys):
    """``colcep scan --pattern a,b`` on Spark: one job (``match_many``), the in-process rows."""
    import pyarrow.dataset as ds

    from colcep.cli import main

    set_batch(spark, 10_000)
    base = ["scan", "--events", "8000", "--symbols", "40", "--pattern", "paper_query3,p1,p2", "--no-plot"]
    assert main(base + ["--out", str(tmp_path / "spark"), "--partitions", "3"]) == 0
    printed = capsys.readouterr().out
    assert "Spark local[2] (mapInArrow, 3 partitions" in printed and "patterns  " in printed
    assert main(base + ["--in-process", "--out", str(tmp_path / "local")]) == 0
    got = ds.dataset(str(tmp_path / "spark"), format="parquet").to_table()
    want = ds.dataset(str(tmp_path / "local"), format="parquet").to_table()
    for name in ("paper_query3", "p1", "p2"):
        of = lambda t: t.filter(pa.compute.equal(t.column("pattern"), name)).drop_columns(["pattern"])  # noqa: E731
        assert canon(of(got)) == canon(of(want)) and len(canon(of(want))) > 5, name
    assert main(base + ["--by-key", "--direct", "--out", str(tmp_path / "direct")]) == 2
    assert "--direct scans one pattern" in capsys.readouterr().err
