"""Live ticks through Spark Structured Streaming: generated ticks land in a folder, a file a
second, and ``colcep.spark.match_stream`` matches them as they arrive.

    python examples/stream_ticks.py                          # 12 files of 200 ticks, one a second
    python examples/stream_ticks.py --files 30 --rows 5000 --every 0.5 --pattern spike_no_recovery
    python examples/stream_ticks.py --bench                  # the figures of docs/guide/spark.md, "Streaming"

A writer thread writes file ``k`` of the ticks (event times = the wall clock, so ``ts`` is "now")
into ``<out>/in/`` at second ``k`` (written aside, then renamed: the file source never sees a
partial file); a streaming query reads the folder with a 2 s watermark, matches per symbol and
writes the matches (and late rows) to ``<out>/matches/`` (Parquet, exactly once, checkpoint in
``<out>/chk/``). Each micro-batch prints a line; at the end the example prints what it found and
the latency from a match's last tick landing to the match's file being committed.

``--bench`` measures, on the same files (one per micro-batch, after two warm-up batches): rows/s
per task of match_stream against pass-through stateful queries that keep a state blob of the
same size per key (applyInPandasWithState and transformWithStateInPandas), the latency at the
default trigger, and colcep's state bytes per key after 10^6 ticks.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from colcep.tools.examples import get_example
from colcep.tools.ticks import make_ticks

SCHEMA = "id long, name string, ts timestamp, price double, volume double"


def tick_files(files: int, rows: int, symbols: int, seed: int, every: float) -> list[pa.Table]:
    """``files`` tables of ``rows`` ticks; ``ts`` is int64 microseconds relative to the end of the
    file's second (``every``): in [-every, 0), to be added to the time the file lands."""
    t = make_ticks(files * rows, symbols, seed)
    ts = t.column("ts").to_numpy().astype(np.float64)
    span = max(1.0, ts.max() - ts.min() + 1)
    rel = ((ts - ts.min()) / span * files * every * 1e6).astype(np.int64)
    k = np.arange(files * rows) // rows
    rel = rel - ((k + 1) * every * 1e6).astype(np.int64)
    t = t.set_column(t.schema.get_field_index("ts"), "ts", pa.array(rel, pa.int64()))
    return [t.slice(k * rows, rows) for k in range(files)]


def at(t: pa.Table, base_us: int) -> pa.Table:
    """The file with its event times placed relative to ``base_us``."""
    ts = pc.add(t.column("ts"), pa.scalar(base_us, pa.int64())).cast(pa.timestamp("us", tz="UTC"))
    return t.set_column(t.schema.get_field_index("ts"), "ts", ts)


def write_file(folder: Path, k: int, t: pa.Table) -> float:
    """Write file ``k`` (event times: the last second before now) aside, then rename it into ``folder``."""
    now = time.time()
    tmp = folder.parent / f".tmp-{k:05d}.parquet"
    pq.write_table(at(t, int(now * 1e6)), tmp)
    os.replace(tmp, folder / f"ticks-{k:05d}.parquet")
    return time.time()


def committed_files(out: Path) -> list[Path]:
    """The files the sink committed (its _spark_metadata log)."""
    log = out / "_spark_metadata"
    if not log.is_dir():
        return []
    entries = sorted((p for p in log.iterdir() if p.name.split(".")[0].isdigit() and not p.name.endswith(".crc")),
                     key=lambda p: int(p.name.split(".")[0]))
    last = max([i for i, p in enumerate(entries) if p.name.endswith(".compact")], default=0)
    files: dict = {}
    for p in entries[last:]:
        for ln in p.read_text().splitlines()[1:]:
            e = json.loads(ln)
            if e.get("action", "add") == "add":
                files[e["path"].replace("file://", "")] = True
            else:
                files.pop(e["path"].replace("file://", ""), None)
    return [Path(f) for f in files]


def start_query(spark, src: Path, work: Path, pattern, delay: str, sink: str = "parquet", max_files: int | None = None,
                buckets: int | None = None):
    from colcep.spark import match_stream

    reader = spark.readStream.schema(SCHEMA)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    ticks = reader.parquet(str(src)).withWatermark("ts", delay)
    out = match_stream(ticks, pattern, key="name", time="ts", columns=["price", "volume", "ts"], seq="id",
                       timeouts=True, buckets=buckets)
    w = out.writeStream.format(sink).option("checkpointLocation", str(work / "chk")).outputMode("append")
    return w.start(str(work / "matches")) if sink == "parquet" else w.start()


def _setup(a, local_session):
    """A fresh work folder with an empty ``in/``, the pattern and a local Spark session."""
    work = Path(a.out)
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    return work, get_example(a.pattern).pattern, local_session(a.cores, shuffle_partitions=a.cores)


# ============================================================================ live
def live(a) -> int:
    from colcep.spark import local_session, state_report

    work, pattern, spark = _setup(a, local_session)
    files = tick_files(a.files, a.rows, a.symbols, a.seed, a.every)
    print(f"streaming {a.files} files of {a.rows:,} ticks ({a.symbols} symbols), one every {a.every} s, into "
          f"{work / 'in'}; pattern {a.pattern}, watermark delay {a.delay}")
    # the first file goes in before the query starts, and the others once its micro-batch is
    # done (that one also starts the Python workers and loads the kernels)
    arrived = {0: write_file(work / "in", 0, files[0])}
    t0 = time.time()
    q = start_query(spark, work / "in", work, pattern, a.delay, buckets=a.buckets)
    while not q.recentProgress and q.isActive:
        time.sleep(0.2)
    print(f"  first micro-batch done {time.time() - t0:.1f} s after the start (Python workers, kernels, state store)")

    def writer():
        t1 = time.time()
        for k in range(1, a.files):
            time.sleep(max(0.0, t1 + k * a.every - time.time()))
            arrived[k] = write_file(work / "in", k, files[k])

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    seen = -1

    def show():
        nonlocal seen
        for p in q.recentProgress:
            if p["batchId"] > seen:
                seen = p["batchId"]
                st = p["stateOperators"][0] if p["stateOperators"] else {}
                print(f"  batch {p['batchId']:3d}: {p['numInputRows']:6,} ticks in, {st.get('numRowsUpdated', 0):4} keys "
                      f"updated, watermark {p['eventTime'].get('watermark', '-')}, "
                      f"{p['durationMs'].get('triggerExecution', 0) / 1000:.2f} s")

    while th.is_alive():
        time.sleep(0.2)
        show()
    q.processAllAvailable()
    end = time.time() + a.tail
    while time.time() < end:
        time.sleep(0.2)
        show()
    show()
    report = state_report(q)
    q.stop()
    print("  (matches whose window is still open wait for more ticks: the watermark moves with the data)")
    found = [pq.read_table(f) for f in committed_files(work / "matches")]
    out = pa.concat_tables(found) if found else None
    if out is None or out.num_rows == 0:
        print("no matches yet")
        return 0
    late = out.filter(out.column("late"))
    rejected = out.filter(pc.is_valid(out.column("rejected")))
    m = out.filter(pc.is_valid(out.column("match_id")))  # (late and rejected rows have none)
    ids = {(k, i) for k, i in zip(m.column("name").to_pylist(), m.column("match_id").to_pylist())}
    timed = m.filter(m.column("timed_out"))
    n_to = len({(k, i) for k, i in zip(timed.column("name").to_pylist(), timed.column("match_id").to_pylist())})
    print(f"found {len(ids) - n_to:,} matches and {n_to:,} timed-out partial matches ({m.num_rows:,} rows), "
          f"{late.num_rows:,} late ticks, {rejected.num_rows:,} rejected, in {work / 'matches'}")
    print(f"state: {report['version_bytes']:,} bytes in {report['groups']} groups (buckets of keys), "
          f"{report['version_bytes'] / a.symbols:,.0f} bytes per key (latest state version)")
    lat = latencies(work / "matches", arrived, a.rows)
    if lat:
        print(f"latency from a match's last tick landing to its output: median {statistics.median(lat):.1f} s, "
              f"max {max(lat):.1f} s over {len(lat)} matches (watermark delay {a.delay} + micro-batches)")
    print(m.slice(0, a.show * 3).to_pandas().to_string(index=False))
    spark.stop()
    return 0


def latencies(folder: Path, arrived: dict, rows: int) -> list[float]:
    """Per match: the commit time of its output file minus the landing time of its last tick's
    file (files 1 on: file 0 landed before the query started)."""
    out = []
    for f in committed_files(folder):
        t = pq.read_table(f)
        t = t.filter(pc.is_valid(t.column("match_id")))
        if not t.num_rows:
            continue
        done = f.stat().st_mtime
        last: dict = {}
        for k, i, r in zip(t.column("name").to_pylist(), t.column("match_id").to_pylist(), t.column("row").to_pylist()):
            last[(k, i)] = max(last.get((k, i), -1), r)
        for r in last.values():
            if r // rows in arrived and r // rows > 0:  # (file 0 landed before the query started)
                out.append(done - arrived[r // rows])
    return out


# ============================================================================ bench
def bench(a) -> int:
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.streaming.state import GroupStateTimeout

    from colcep.spark import local_session

    work, pattern, spark = _setup(a, local_session)
    every = a.rows / a.symbols / a.tick_rate  # event-time seconds per file
    files = tick_files(a.files, a.rows, a.symbols, a.seed, every)
    for k, t in enumerate(files):
        p = work / "in" / f"ticks-{k:05d}.parquet"
        pq.write_table(at(t, 1_767_225_600_000_000 + int((k + 1) * every * 1e6)), p)
        os.utime(p, (1_700_000_000 + k, 1_700_000_000 + k))
    results = {}

    def steady(q, name):
        q.processAllAvailable()
        progs = [p for p in q.recentProgress if p["numInputRows"] > 0][2:]  # after two warm-up batches
        q.stop()
        rows = sum(p["numInputRows"] for p in progs)
        secs = sum(p["durationMs"]["triggerExecution"] for p in progs) / 1000
        st = progs[-1]["stateOperators"][0] if progs and progs[-1]["stateOperators"] else {}
        disk = (st.get("customMetrics") or {}).get("stateOnCurrentVersionSizeBytes", 0)
        results[name] = {"rows_per_s": rows / secs, "rows_per_s_per_task": rows / secs / a.cores,
                         "batch_s": secs / max(1, len(progs)), "state_groups": st.get("numRowsTotal", 0),
                         "state_bytes_per_key": disk / a.symbols}  # (colcep keeps state per bucket of keys)
        r = results[name]
        print(f"  {name:34s} {r['rows_per_s']:9,.0f} rows/s ({r['rows_per_s_per_task']:8,.0f} per task), "
              f"{r['batch_s']:.2f} s per {a.rows:,}-row batch, state {r['state_bytes_per_key']:,.0f} B/key")

    print(f"{a.files} files of {a.rows:,} ticks, {a.symbols} symbols ({a.tick_rate:g} ticks/s each in event time), "
          f"one file per micro-batch, local[{a.cores}]")
    # colcep
    q = start_query(spark, work / "in", work / "colcep", pattern, a.delay, sink="noop", max_files=1, buckets=a.buckets)
    steady(q, "colcep match_stream")
    blob = b"\0" * int(max(64, results["colcep match_stream"]["state_bytes_per_key"]))
    src = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(work / "in"))
           .withWatermark("ts", a.delay))

    def aipws(key, pdfs, state):
        if state.exists:
            state.get
        for pdf in pdfs:
            yield pdf
        state.update((blob,))

    q = (src.groupBy("name").applyInPandasWithState(aipws, SCHEMA, "s binary", "append", GroupStateTimeout.NoTimeout)
         .writeStream.format("noop").option("checkpointLocation", str(work / "chk_aipws")).start())
    steady(q, "pass-through applyInPandasWithState")

    try:
        from google.protobuf import descriptor  # noqa: F401 - transformWithState's client needs protobuf
    except ImportError:
        print("  pass-through transformWithStateInPandas: skipped (pip install protobuf)")
        return finish(a, work, pattern, results, spark)

    class PassThrough(StatefulProcessor):
        def init(self, handle):
            self.s = handle.getValueState("s", "s binary")

        def handleInputRows(self, key, rows, timerValues):
            if self.s.exists():
                self.s.get()
            for pdf in rows:
                yield pdf
            self.s.update((blob,))

        def close(self):
            pass

    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    q = (src.groupBy("name").transformWithStateInPandas(PassThrough(), SCHEMA, "Append", "None")
         .writeStream.format("noop").option("checkpointLocation", str(work / "chk_tws")).start())
    steady(q, "pass-through transformWithStateInPandas")
    return finish(a, work, pattern, results, spark)


def finish(a, work: Path, pattern, results: dict, spark) -> int:
    from colcep.spark.stream import step, stream_spec

    spark.stop()
    # state bytes per key after 10^6 ticks, through the per-key step (what each key stores)
    t = make_ticks(a.state_rows, a.symbols, a.seed)
    ts = t.column("ts").to_numpy()  # rescaled to tick_rate ticks/s per symbol
    us = ((ts - ts.min()) / max(1, ts.max() - ts.min()) * (a.state_rows / a.symbols / a.tick_rate) * 1e6).astype(np.int64)
    t = t.set_column(2, "ts", pa.array(us + 1_767_225_600_000_000, pa.int64()))
    spec = stream_spec(t.schema, pattern, "name", "ts", ["price", "volume", "ts"], seq="id", timeouts=True)
    states: dict = {}
    delay_us = 2_000_000
    wm = None
    t0 = time.perf_counter()
    for off in range(0, t.num_rows, 50_000):
        b = t.slice(off, 50_000)
        for k in dict.fromkeys(b.column("name").to_pylist()):
            _, states[k], _ = step(spec, b.filter(pc.equal(b.column("name"), k)), states.get(k), wm)
        wm = int(pc.max(b.column("ts")).as_py()) - delay_us
    el = time.perf_counter() - t0
    sizes = [s.nbytes for s in states.values()]
    results["state_after_rows"] = {"rows": a.state_rows, "keys": len(sizes), "mean": statistics.mean(sizes),
                                   "max": max(sizes), "step_rows_per_s": a.state_rows / el}
    r = results["state_after_rows"]
    print(f"  state after {a.state_rows:,} ticks in {len(sizes)} keys: {r['mean']:,.0f} bytes per key on average, "
          f"max {r['max']:,} (snapshot + rows waiting for the 2 s watermark); the step alone ran "
          f"{r['step_rows_per_s']:,.0f} rows/s on one core")
    (work / "bench.json").write_text(json.dumps(results, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=12, help="files (micro-batches) to write (default 12)")
    ap.add_argument("--rows", type=int, default=200, help="ticks per file (default 200)")
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between files (default 1)")
    ap.add_argument("--delay", default="2 seconds", help="the watermark delay (default '2 seconds')")
    ap.add_argument("--tail", type=float, default=5.0, help="seconds to keep the query running after the last file")
    ap.add_argument("--pattern", default="paper_query3", help="a built-in pattern (default paper_query3)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--show", type=int, default=2, help="matches to print (default 2)")
    ap.add_argument("--out", default="out/stream_ticks", help="working folder (replaced)")
    ap.add_argument("--bench", action="store_true", help="measure instead (see the module docstring)")
    ap.add_argument("--buckets", type=int, default=None,
                    help="match_stream's buckets of keys (default: 4 per shuffle partition; 0: a group per key)")
    ap.add_argument("--state-rows", type=int, default=1_000_000, help="--bench: ticks for the state size")
    ap.add_argument("--tick-rate", type=float, default=10.0, help="--bench: ticks per second per symbol in event time")
    a = ap.parse_args(argv)
    return bench(a) if a.bench else live(a)


if __name__ == "__main__":
    sys.exit(main())
