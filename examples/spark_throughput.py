"""Measure colcep on Spark against Spark's own cost, on the same data.

    python examples/spark_throughput.py                        # 1,000,000 ticks, 100 symbols, P1
    python examples/spark_throughput.py --events 200000 --pattern paper_query3
    python examples/spark_throughput.py --cold-cache           # also: first-task compile time

Runs, each on the same generated ticks (Parquet) and local Spark session:

- ``bare pass-through``: read, project, a mapInArrow returning its batches (no shuffle);
- ``jvm``: read, project, repartition by key, sort within partitions (no Python);
- ``pass-through``: the same plus a mapInArrow that returns its batches unchanged;
- ``colcep``: ``colcep.spark.match`` (the same plan with a Matcher per task);
- ``direct``: ``colcep.spark.match_parquet`` on the same ticks laid out by symbol (``write_ticks(...,
  partition_by_key=True)``: files of whole symbols, sorted by time);
- ``in-process``: ``colcep.match`` on one core, no Spark.

All Spark jobs end in the ``noop`` sink. Each Spark run is repeated (``--repeat``) and the
best time kept; the first colcep job is reported apart (it loads the kernels in the workers).
With ``--cold-cache`` the workers get an empty NUMBA_CACHE_DIR, so the first job compiles.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--symbols", type=int, default=100)
    ap.add_argument("--pattern", default="p1", help="a built-in pattern name (default p1)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=None, help="default: 2 x cores")
    ap.add_argument("--batch-rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold-cache", action="store_true", help="workers start from an empty Numba cache")
    ap.add_argument("--skip-in-process", action="store_true")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    a = ap.parse_args(argv)

    import colcep
    from colcep.tools.examples import get_example
    from colcep.spark import ScanMetrics, local_session, match, match_parquet
    from colcep.tools.ticks import write_ticks

    ex = get_example(a.pattern)
    work = Path(a.dir or tempfile.mkdtemp(prefix="colcep-bench-"))
    flat = work / f"ticks_{a.events}x{a.symbols}.parquet"
    by_key = work / f"ticks_{a.events}x{a.symbols}_by_key"
    if not flat.exists():
        write_ticks(flat, a.events, a.symbols)
    if not by_key.exists():
        write_ticks(by_key, a.events, a.symbols, partition_by_key=True)
    conf = {}
    if a.cold_cache:
        conf["spark.executorEnv.NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="colcep-numba-cold-")
    parts = a.partitions or 2 * a.cores
    t0 = time.perf_counter()
    spark = local_session(a.cores, shuffle_partitions=parts, batch_rows=a.batch_rows, conf=conf)
    print(f"session start {time.perf_counter() - t0:.1f} s; {a.events:,} ticks, {a.symbols} symbols, pattern "
          f"{a.pattern}, local[{a.cores}], {parts} partitions, Arrow batches of {a.batch_rows:,} rows")
    n = a.events
    key, ts, cols = ex.key, ex.time, list(ex.columns)
    df = spark.read.parquet(str(flat))
    need = list(dict.fromkeys([key, ts, "id", *cols]))
    plan = df.select(*need).repartition(parts, key).sortWithinPartitions(key, ts, "id")

    def passthrough(batches):
        yield from batches

    rows = []

    def report(name: str, secs: float, note: str = "") -> None:
        rows.append((name, secs, n / secs / a.cores, note))
        print(f"  {name:<32} {secs:7.2f} s  {n / secs:12,.0f} rows/s  ({n / secs / a.cores:,.0f} per core) {note}",
              flush=True)

    bare = df.select(*need)
    jobs = {
        "bare pass-through (no shuffle)": lambda: bare.mapInArrow(passthrough, bare.schema)
        .write.format("noop").mode("overwrite").save(),
        "jvm: shuffle + sort": lambda: plan.write.format("noop").mode("overwrite").save(),
        "pass-through mapInArrow": lambda: plan.mapInArrow(passthrough, plan.schema)
        .write.format("noop").mode("overwrite").save(),
        "colcep match": lambda: match(df, ex.pattern, key, ts, cols, seq="id", check_nulls=False)
        .write.format("noop").mode("overwrite").save(),
        "colcep match + null check": lambda: match(df, ex.pattern, key, ts, cols, seq="id")
        .write.format("noop").mode("overwrite").save(),
        "colcep match_parquet": lambda: match_parquet(str(by_key), ex.pattern, key, ts, cols, spark=spark, seq="id",
                                                      num_partitions=parts, batch_rows=a.batch_rows)
        .write.format("noop").mode("overwrite").save(),
    }
    m0 = ScanMetrics(spark)
    t = time.perf_counter()
    match(df, ex.pattern, key, ts, cols, seq="id", metrics=m0).write.format("noop").mode("overwrite").save()
    report("colcep match, first job", time.perf_counter() - t,
           f"[{m0.warm_workers} workers loaded the kernels: {m0.warm_seconds:.1f} s in all; {m0.matches:,} matches]")
    best = {k: float("inf") for k in jobs}
    for _ in range(a.repeat):  # interleaved, so that load from elsewhere hits all alike
        for k, fn in jobs.items():
            best[k] = min(best[k], _best(fn, 1))
    for k, v in best.items():
        report(k, v)
    # steady-state per-task overhead: many tiny tasks
    tiny = df.limit(2000).cache()
    tiny.count()
    many = 64
    mt = ScanMetrics(spark)
    t_tiny = _best(lambda: match(tiny, ex.pattern, key, ts, cols, seq="id", num_partitions=many, metrics=mt)
                   .write.format("noop").mode("overwrite").save(), a.repeat)
    tp = tiny.select(*need).repartition(many, key).sortWithinPartitions(key, ts, "id")
    t_tiny_pt = _best(lambda: tp.mapInArrow(passthrough, tp.schema).write.format("noop").mode("overwrite").save(),
                      a.repeat)
    print(f"  per task, {many} tiny tasks: colcep {t_tiny / many * a.cores * 1000:.1f} ms vs pass-through "
          f"{t_tiny_pt / many * a.cores * 1000:.1f} ms of a core (in-task time {mt.task_seconds / mt.tasks * 1000:.1f}"
          f" ms)")
    spark.stop()
    if not a.skip_in_process:
        tbl = pq.read_table(flat)
        colcep.match(tbl.slice(0, 1000), ex.pattern, key=key, time=ts, columns=cols)
        t = time.perf_counter()
        colcep.match(tbl, ex.pattern, key=key, time=ts, columns=cols)
        secs = time.perf_counter() - t
        rows.append(("in-process", secs, n / secs, ""))
        print(f"  {'in-process colcep.match':<32} {secs:7.2f} s  {n / secs:12,.0f} rows/s  (one core)")
    pt = next(r for r in rows if r[0].startswith("pass-through"))[1]
    cm = next(r for r in rows if r[0] == "colcep match")[1]
    print(f"colcep job / pass-through = {cm / pt:.2f} (colcep adds {100 * (cm / pt - 1):.0f} %)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
