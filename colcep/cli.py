"""The ``colcep`` command line.

    colcep scan --generate 1000000 --symbols 100 --pattern paper_query3 --out out/matches
    colcep scan data/ticks.parquet --pattern my_pattern.py --key name --time ts --out out/m
    colcep scan data/by_symbol/ --direct --pattern p1 --out out/m      # Parquet laid out by key
    colcep scan ticks.csv --pattern three_rising --in-process --out out/m
    colcep generate --events 1000000 --symbols 100 --out out/ticks.parquet
    colcep patterns

``scan`` reads Parquet or CSV (files or directories), runs a built-in pattern
(``colcep patterns``) or a Python file that defines ``pattern`` (optionally ``KEY``,
``TIME``, ``SEQ``, ``COLUMNS``), on local Spark by default (or the session of
``spark-submit``), or in this process with ``--in-process``. It writes the matches as
Parquet to ``--out`` with ``_summary.json`` beside them and prints the summary: matches
per stage and per key, and throughput. Progress goes to stderr on a terminal or with
``--progress``.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.errors import ColcepError, InputError
from colcep.examples import EXAMPLES, get_example
from colcep.pattern import Pattern


# ============================================================================ helpers shared with examples/
def summarize(matches: pa.Table, key: str | None, top: int = 10) -> dict[str, Any]:
    """Counts of a match table: matches, matched events, events per stage, matches per key
    (the ``top`` keys), and timed-out partial matches when the table has them."""
    if "timed_out" in matches.column_names:
        to = matches.filter(pc.field("timed_out"))
        matches = matches.filter(~pc.field("timed_out"))
        timed_out = int(pc.count_distinct(to.column("match_id")).as_py()) if to.num_rows else 0
    else:
        timed_out = None
    ids = matches.column("match_id")
    out: dict[str, Any] = {"matches": int(pc.count_distinct(ids).as_py()) if matches.num_rows else 0,
                           "matched_events": matches.num_rows}
    if timed_out is not None:
        out["timed_out"] = timed_out
    if matches.num_rows:
        st = matches.group_by("stage").aggregate([("stage", "count")]).to_pydict()
        out["events_per_stage"] = dict(zip(st["stage"], st["stage_count"]))
    else:
        out["events_per_stage"] = {}
    if key is not None and key in matches.column_names and matches.num_rows:
        per = matches.group_by(key).aggregate([("match_id", "count_distinct")])
        per = per.sort_by([("match_id_count_distinct", "descending"), (key, "ascending")])
        d = per.slice(0, top).to_pydict()
        out["keys_with_matches"] = per.num_rows
        out["top_keys"] = {str(k): int(v) for k, v in zip(d[key], d["match_id_count_distinct"])}
    return out


def format_matches(matches: pa.Table, key: str | None, limit: int = 5) -> str:
    """The first ``limit`` matches, one line each: key, then per stage its rows and values."""
    if matches.num_rows == 0:
        return "(no matches)"
    ids = matches.column("match_id").to_numpy()
    first_ids = list(dict.fromkeys(ids[: max(1, limit) * 64].tolist()))[:limit]
    sub = matches.filter(pc.is_in(matches.column("match_id"), pa.array(first_ids, pa.int64()))).to_pylist()
    skip = {"match_id", "stage", "row", "timed_out", "timeout_ts", key}
    lines = []
    for mid in first_ids:
        evs = [r for r in sub if r["match_id"] == mid]
        head = f"{evs[0][key]}: " if key is not None else ""
        parts = []
        for r in evs:
            vals = " ".join(f"{c}={_fmt(v)}" for c, v in r.items() if c not in skip)
            parts.append(f"{r['stage']}[row {r['row']}{' ' + vals if vals else ''}]")
        lines.append(f"  match {mid}: {head}" + " ".join(parts))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _num(n: float) -> str:
    return f"{n:,.0f}"


def format_summary(s: dict[str, Any]) -> str:
    """The printed form of a scan summary (as :func:`run_scan` returns it)."""
    lines = [f"colcep scan: pattern {s['pattern']}" + (f" ({s['description']})" if s.get("description") else "")]
    lines.append(f"  input     {s['input']}: {_num(s['rows'])} rows")
    lines.append(f"  engine    {s['engine']}")
    m = s["result"]
    to = f", {_num(m['timed_out'])} timed out" if m.get("timed_out") is not None else ""
    lines.append(f"  matches   {_num(m['matches'])} matches, {_num(m['matched_events'])} matched events{to}"
                 f" -> {s['out']}")
    if m["events_per_stage"]:
        lines.append("  by stage  " + " | ".join(f"{k} {_num(v)}" for k, v in m["events_per_stage"].items()))
    if m.get("top_keys"):
        lines.append("  top keys  " + " | ".join(f"{k} {_num(v)}" for k, v in m["top_keys"].items())
                     + f"  ({_num(m['keys_with_matches'])} keys with matches)")
    t = s["seconds"]
    parts = [f"Spark start {t['session']:.1f} s"] if t.get("session") else []
    parts.append(f"kernels {t.get('kernels', 0.0):.1f} s" + (" (compiled; cached for the next run)"
                                                            if t.get("kernels", 0.0) > 10 else ""))
    parts.append(f"scan {t['scan']:.1f} s")
    lines.append(f"  time      {t['total']:.1f} s = {' + '.join(parts)}; {_num(s['rows_per_second'])} rows/s "
                 "over the scan")
    return "\n".join(lines)


class _Progress:
    """A one-line progress meter on stderr, redrawn at most every ``interval`` seconds."""

    def __init__(self, enabled: bool, total: int, interval: float = 0.5):
        self.enabled, self.total, self.interval = enabled, total, interval
        self.t0 = self.last = time.perf_counter()

    def update(self, done: int, matches: int) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.last < self.interval:
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9)
        pct = f"{100.0 * done / self.total:5.1f}% " if self.total else ""
        sys.stderr.write(f"\r  matching: {pct}{_num(done)}/{_num(self.total)} rows, {_num(rate)} rows/s, "
                         f"{_num(matches)} matches   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ============================================================================ the scan
@dataclass
class ScanJob:
    """What ``colcep scan`` runs; see :func:`run_scan`."""

    inputs: list[str]
    pattern: Pattern
    pattern_name: str
    out: str
    key: str | None = "name"
    time: str = "ts"
    seq: str | None = None
    columns: list[str] | None = None
    description: str = ""
    timeouts: bool = False
    in_process: bool = False
    direct: bool = False
    partitions: int | None = None
    batch_rows: int | None = None
    cores: int | None = None
    progress: bool = False
    top: int = 10


def _input_format(paths: Sequence[str]) -> str:
    exts = set()
    for p in paths:
        pp = Path(p)
        files = [f for f in pp.rglob("*") if f.is_file() and not f.name.startswith(("_", "."))] if pp.is_dir() \
            else [pp]
        if not pp.exists():
            raise InputError(f"input {p!r} does not exist")
        exts |= {f.suffix.lower() for f in files}
    if exts <= {".csv"} and exts:
        return "csv"
    if exts and exts <= {".parquet", ".pq", ""}:
        return "parquet"
    raise InputError(f"inputs must be Parquet or CSV files (or folders of them), found suffixes {sorted(exts)}")


def _arrow_dataset(paths: Sequence[str], fmt: str):
    import pyarrow.dataset as ds

    src = [str(p) for p in paths]
    return ds.dataset(src if len(src) > 1 else src[0], format=fmt,
                      partitioning="hive" if fmt == "parquet" else None)


def _prepare_out(out: str) -> Path:
    """Refuse to replace a folder that is not an earlier scan's output."""
    p = Path(out)
    if p.is_file():
        raise InputError(f"--out {out!r} is a file; give a folder for the matches")
    if p.is_dir():
        foreign = [f.name for f in p.iterdir()
                   if not (f.name.startswith(("part-", "_", ".")) and (f.is_file()))]
        if foreign:
            raise InputError(f"--out {out!r} holds other files ({foreign[:3]}); choose an empty or new folder")
        shutil.rmtree(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def _default_seq(schema: pa.Schema, job: ScanJob) -> str | None:
    if job.seq == "":
        return None
    if job.seq is not None:
        return job.seq
    if "id" in schema.names and pa.types.is_integer(schema.field("id").type):
        return "id"
    return None


def run_scan(job: ScanJob) -> dict[str, Any]:
    """Run a scan, write the matches and ``_summary.json`` to ``job.out``; returns the summary."""
    t_start = time.perf_counter()
    fmt = _input_format(job.inputs)
    data = _arrow_dataset(job.inputs, fmt)
    schema = data.schema
    seq = _default_seq(schema, job)
    out_dir = _prepare_out(job.out)
    if job.in_process:
        rows, engine, secs = _scan_in_process(job, data, seq, out_dir)
    else:
        rows, engine, secs = _scan_spark(job, fmt, data, seq, out_dir)
    import pyarrow.dataset as ds

    wanted = [c for c in ("match_id", job.key, "stage", "timed_out") if c is not None]
    res = ds.dataset(str(out_dir), format="parquet")
    result = summarize(res.to_table(columns=[c for c in wanted if c in res.schema.names]), job.key, job.top)
    secs["total"] = time.perf_counter() - t_start
    summary = {
        "pattern": job.pattern_name, "description": job.description,
        "input": ", ".join(job.inputs), "rows": rows, "engine": engine, "out": str(out_dir),
        "key": job.key, "time": job.time, "seq": seq, "result": result, "seconds": secs,
        "rows_per_second": rows / max(secs["scan"], 1e-9),
    }
    (out_dir / "_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _scan_in_process(job: ScanJob, data, seq: str | None, out_dir: Path) -> tuple[int, str, dict]:
    import pyarrow.parquet as pq

    from colcep.spark import DEFAULT_BATCH_ROWS, ROW_COL, KeyedStream, arrow_spec

    t_k = time.perf_counter()
    spec = arrow_spec(data.schema, job.pattern, job.key, job.time, job.columns, seq=seq, timeouts=job.timeouts)
    t0 = time.perf_counter()
    need = [c for c in spec.in_schema.names if c != ROW_COL]
    tbl = data.to_table(columns=need)
    n = tbl.num_rows
    if seq is None:
        tbl = tbl.append_column(ROW_COL, pa.array(np.arange(n, dtype=np.int64)))
    _check_no_nulls(tbl, {c: r for r, c in (("key", job.key), ("time", job.time), ("seq", seq)) if c})
    sort = [(c, "ascending") for c in (job.key, job.time, spec.row) if c is not None]
    tbl = tbl.take(pc.sort_indices(tbl, sort_keys=sort))
    stream = KeyedStream(spec)
    bar = _Progress(job.progress, n)
    step = int(job.batch_rows or DEFAULT_BATCH_ROWS)
    writer = None
    out_file = out_dir / "part-00000.parquet"
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(out_file, spec.out_schema)
    try:
        for off in range(0, max(n, 1), step):
            for t in stream.feed(tbl.slice(off, step)):
                writer.write_table(t)
            bar.update(min(off + step, n), stream.matches)
        for t in stream.finish():
            writer.write_table(t)
    finally:
        writer.close()
        bar.close()
    return n, f"in-process (Arrow batches of {_num(step)} rows)", {"kernels": t0 - t_k,
                                                                  "scan": time.perf_counter() - t0}


def _check_no_nulls(tbl: pa.Table, roles: dict[str, str]) -> None:
    for c, role in roles.items():
        nulls = tbl.column(c).null_count
        if nulls:
            raise InputError(f"{role} column {c!r} has {nulls} nulls; drop or fill them before matching")


def _spark_session(job: ScanJob):
    """The session to use and whether this scan owns it (and stops it at the end)."""
    from pyspark.sql import SparkSession

    from colcep.spark import local_session

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # launched by spark-submit: use its configuration
        return SparkSession.builder.appName("colcep scan").getOrCreate(), True
    if job.progress:
        sys.stderr.write("  starting local Spark ...\n")
    return local_session(job.cores, progress=job.progress, app_name="colcep scan"), True


def _scan_spark(job: ScanJob, fmt: str, data, seq: str | None, out_dir: Path) -> tuple[int, str, dict]:
    from colcep.spark import ScanMetrics, arrow_spec, match, match_parquet

    t_k = time.perf_counter()  # validate and load (or compile) the kernels on the driver, timed apart
    arrow_spec(data.schema, job.pattern, job.key, job.time, job.columns, seq=seq, timeouts=job.timeouts)
    t_kernels = time.perf_counter() - t_k
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        spark, owned = _spark_session(job)
    t_session = time.perf_counter() - t0
    try:
        if job.batch_rows:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(int(job.batch_rows)))
        parts = job.partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
        metrics = ScanMetrics(spark)
        t1 = time.perf_counter()
        if job.direct:
            if fmt != "parquet" or len(job.inputs) != 1:
                raise InputError("--direct reads one Parquet folder laid out by key (Hive partitions or files)")
            out = match_parquet(job.inputs[0], job.pattern, job.key, job.time, job.columns, spark=spark, seq=seq,
                                timeouts=job.timeouts, num_partitions=parts, metrics=metrics,
                                batch_rows=job.batch_rows or 500_000)
            how = "Parquet read by the executors with pyarrow"
        else:
            reader = spark.read
            if fmt == "csv":
                from pyspark.sql.pandas.types import from_arrow_schema

                reader = reader.schema(from_arrow_schema(data.schema, prefer_timestamp_ntz=False)) \
                    .option("header", "true")
                df = reader.csv([str(p) for p in job.inputs])
            else:
                df = reader.parquet(*[str(p) for p in job.inputs])
            out = match(df, job.pattern, job.key, job.time, job.columns, seq=seq, timeouts=job.timeouts,
                        num_partitions=parts, metrics=metrics)
            how = "mapInArrow"
        out.write.mode("overwrite").parquet(str(out_dir))
        t_scan = time.perf_counter() - t1
        rows = int(metrics.rows)
        sc = spark.sparkContext
        batch = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
        engine = (f"Spark {sc.master} ({how}, {parts} partitions, Arrow batches of {_num(int(batch))} rows; "
                  f"{metrics.tasks} tasks, {metrics.warm_workers} worker(s) loaded the kernels in "
                  f"{metrics.warm_seconds:.1f} s)")
    finally:
        if owned:
            spark.stop()
    return rows, engine, {"session": t_session, "kernels": t_kernels, "scan": t_scan}


# ============================================================================ argument parsing
def _load_pattern(spec: str) -> tuple[Pattern, str, dict[str, Any]]:
    """A built-in example name or a Python file defining ``pattern``; returns the pattern,
    a description and the defaults it declares (key, time, seq, columns)."""
    if spec.endswith(".py") or os.path.sep in spec:
        path = Path(spec)
        if not path.is_file():
            raise InputError(f"pattern file {spec!r} does not exist")
        ns = runpy.run_path(str(path))
        pat = ns.get("pattern", ns.get("PATTERN"))
        if not isinstance(pat, Pattern):
            raise InputError(f"{spec} must define `pattern = Pattern.begin(...)...` (a colcep Pattern)")
        defaults = {k.lower(): ns[k] for k in ("KEY", "TIME", "SEQ", "COLUMNS") if k in ns}
        doc = (ns.get("__doc__") or "").strip().splitlines()
        return pat, doc[0] if doc else "", defaults
    try:
        ex = get_example(spec)
    except KeyError as exc:
        raise InputError(f"{exc.args[0]}, or give a Python file that defines `pattern`") from None
    return ex.pattern, ex.description, {"key": ex.key, "time": ex.time, "columns": list(ex.columns)}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="colcep", description="Complex event processing on columnar data.")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("scan", help="find a pattern in Parquet / CSV data and write the matches",
                       description="Find a pattern in Parquet / CSV data (on local Spark by default) and write the "
                                   "matches as Parquet with a summary.")
    s.add_argument("inputs", nargs="*", help="Parquet or CSV files or folders")
    s.add_argument("--pattern", required=True, help="a built-in name (see `colcep patterns`) or a .py file "
                                                    "defining `pattern`")
    s.add_argument("--out", required=True, help="output folder for the matches (Parquet)")
    g = s.add_argument_group("synthetic data")
    g.add_argument("--generate", type=int, metavar="N", help="generate N synthetic ticks first and scan them")
    g.add_argument("--symbols", type=int, default=100, help="symbols of the generated ticks (default 100)")
    g.add_argument("--seed", type=int, default=7, help="seed of the generated ticks (default 7)")
    g.add_argument("--data", help="where to write the generated ticks (default: beside --out, "
                                  "ticks_<N>x<symbols>_seed<seed>.parquet; reused if present)")
    g.add_argument("--by-key", action="store_true", help="write the generated ticks as Hive partitions per symbol")
    c = s.add_argument_group("columns")
    c.add_argument("--key", help="partition column (default: the pattern's, else 'name'); '' for none")
    c.add_argument("--time", help="event-time column (default: the pattern's, else 'ts')")
    c.add_argument("--seq", help="integer tie-breaker / row identity column (default: 'id' when the input has "
                                 "one); '' for none")
    c.add_argument("--columns", help="comma-separated columns copied into the matches (default: the pattern's)")
    c.add_argument("--timeouts", action="store_true", help="also write timed-out partial matches")
    e = s.add_argument_group("engine")
    e.add_argument("--in-process", action="store_true", help="run in this process instead of Spark")
    e.add_argument("--direct", action="store_true", help="Parquet laid out by key: executors read the files "
                                                         "with pyarrow (no JVM conversion)")
    e.add_argument("--cores", type=int, help="cores of the local Spark session (default: all)")
    e.add_argument("--partitions", type=int, help="Spark partitions (default: the session's shuffle partitions)")
    e.add_argument("--batch-rows", type=int, help="Arrow batch size in rows")
    o = s.add_argument_group("output")
    o.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show progress on stderr (default: only on a terminal)")
    o.add_argument("--no-progress", dest="progress", action="store_false")
    o.add_argument("--top", type=int, default=10, help="keys listed in the summary (default 10)")
    o.add_argument("--show", type=int, default=0, metavar="K", help="also print the first K matches")
    o.add_argument("--json", action="store_true", help="print the summary as JSON")
    gen = sub.add_parser("generate", help="write synthetic ticks (Parquet or CSV by suffix)")
    gen.add_argument("--events", type=int, default=1_000_000)
    gen.add_argument("--symbols", type=int, default=100)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--by-key", action="store_true", help="Hive partitions per symbol (a folder)")
    gen.add_argument("--out", required=True)
    sub.add_parser("patterns", help="list the built-in patterns")
    return ap


def _cmd_scan(a: argparse.Namespace) -> int:
    from colcep.ticks import write_ticks

    pattern, desc, defaults = _load_pattern(a.pattern)
    inputs = list(a.inputs)
    progress = sys.stderr.isatty() if a.progress is None else a.progress
    if a.generate is not None:
        if inputs:
            raise InputError("give either input paths or --generate, not both")
        suffix = "" if a.by_key else ".parquet"
        data = Path(a.data) if a.data else \
            Path(a.out).resolve().parent / f"ticks_{a.generate}x{a.symbols}_seed{a.seed}{suffix}"
        if not data.exists():
            if progress:
                sys.stderr.write(f"  generating {_num(a.generate)} ticks over {a.symbols} symbols -> {data}\n")
            write_ticks(data, a.generate, a.symbols, a.seed, partition_by_key=a.by_key)
        inputs = [str(data)]
    if not inputs:
        raise InputError("give input files or folders, or --generate N")
    key = defaults.get("key", "name") if a.key is None else (a.key or None)
    columns = defaults.get("columns") if a.columns is None else [c for c in a.columns.split(",") if c]
    job = ScanJob(inputs=inputs, pattern=pattern, pattern_name=a.pattern, out=a.out, key=key,
                  time=a.time or defaults.get("time", "ts"), seq=a.seq if a.seq is not None else defaults.get("seq"),
                  columns=columns, description=desc, timeouts=a.timeouts, in_process=a.in_process, direct=a.direct,
                  partitions=a.partitions, batch_rows=a.batch_rows, cores=a.cores, progress=progress, top=a.top)
    summary = run_scan(job)
    if a.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print(format_summary(summary))
    if a.show:
        import pyarrow.dataset as ds

        print(format_matches(ds.dataset(summary["out"], format="parquet").to_table().sort_by("match_id"), key,
                             a.show))
    return 0


def _cmd_generate(a: argparse.Namespace) -> int:
    from colcep.ticks import write_ticks

    t0 = time.perf_counter()
    p = write_ticks(a.out, a.events, a.symbols, a.seed, partition_by_key=a.by_key)
    print(f"wrote {_num(a.events)} ticks over {a.symbols} symbols to {p} in {time.perf_counter() - t0:.1f} s")
    return 0


def _cmd_patterns(a: argparse.Namespace) -> int:
    w = max(len(k) for k in EXAMPLES)
    for name, ex in EXAMPLES.items():
        print(f"{name:<{w}}  {ex.description}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``colcep`` command; returns the exit status."""
    a = _parser().parse_args(argv)
    try:
        return {"scan": _cmd_scan, "generate": _cmd_generate, "patterns": _cmd_patterns}[a.command](a)
    except ColcepError as exc:
        print(f"colcep: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
