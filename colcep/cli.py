"""The ``colcep`` command line.

    colcep scan --events 1000000 --symbols 100 --pattern paper_query3 --out out/matches
    colcep scan data/ticks.parquet --pattern my_pattern.py --key name --time ts --out out/m
    colcep scan data/by_symbol/ --direct --pattern p1 --out out/m      # Parquet laid out by key
    colcep generate --events 1000000 --symbols 20000 --by-key --out data/by_symbol   # that layout
    colcep scan ticks.csv --pattern three_rising --in-process --out out/m
    colcep plot out/matches --key S0008                                # one key's price, matches marked
    colcep generate --events 1000000 --symbols 100 --out out/ticks.parquet
    colcep patterns

``scan`` reads Parquet or CSV (files or directories), or generates synthetic ticks
(``--events N``), runs a built-in pattern (``colcep patterns``) or a Python file that defines
``pattern`` (optionally ``KEY``, ``TIME``, ``SEQ``, ``COLUMNS``), on local Spark by default (or
the session of ``spark-submit``), or in this process with ``--in-process``. It writes the
matches as Parquet to ``--out`` with ``_summary.json`` inside, draws ``<out>.png`` beside it
(with matplotlib installed) and prints the summary: matches per stage and per key, their time
span, where the output and the picture are.

Every long step (kernel compile or load, Spark start, the scan with rows/s and matches so far,
writing) is reported on stderr as it starts and ends: redrawn in place on a terminal, one
line every 10 s in a log. The output appears at ``--out`` only when the scan has finished:
it is written to a hidden folder beside it and renamed at the end, so an interrupted or failed
scan leaves nothing that blocks the next run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import shutil
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep import cache
from colcep.cache import kernels_cold
from colcep.engine.many import PATTERN_COL
from colcep.errors import ColcepError, InputError
from colcep.tools.summary import Summary, unique_match_ids
from colcep.tools.examples import EXAMPLES, get_example
from colcep.pattern import Pattern
from colcep.progress import Reporter, SparkWatch as _SparkWatch, scan_done_text, scan_meter_text
from colcep.progress import duration as _duration
from colcep.progress import num as _num

#: Inputs up to this many rows scan faster in-process than on a local Spark session.
IN_PROCESS_HINT_ROWS = 20_000_000
#: Expected kernel compile time on a cold cache, as announced (2 cores).
COMPILE_SECONDS = 120


# ============================================================================ helpers shared with examples/
def format_matches(matches: pa.Table, key: str | None, limit: int = 5) -> str:
    """The first ``limit`` matches, one line each: key, then per stage its rows and values."""
    if matches.num_rows == 0:
        return "(no matches)"
    matches = unique_match_ids(matches)
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


_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def format_time_span(lo: Any, hi: Any, time: str, unit: str | None = "ms") -> str:
    """The time span of the matched events in words. Integer times later than 1980 (in
    ``unit``) read as UTC dates, smaller ones as times since the data's zero."""
    import datetime as dt

    if isinstance(lo, dt.datetime):
        return f"{lo.isoformat(sep=' ')} to {hi.isoformat(sep=' ')} ({_duration((hi - lo).total_seconds())})"
    if not isinstance(lo, (int, float)) or unit not in _PER_SECOND:
        return f"{time} {lo} to {hi}"
    per = _PER_SECOND[unit]
    span = _duration((hi - lo) / per)
    if lo / per > 3.15e8:
        a = dt.datetime.fromtimestamp(lo / per, dt.timezone.utc).replace(tzinfo=None)
        b = dt.datetime.fromtimestamp(hi / per, dt.timezone.utc).replace(tzinfo=None)
        return f"{a.isoformat(sep=' ', timespec='milliseconds')} to {b.isoformat(sep=' ', timespec='milliseconds')}" \
               f" UTC ({span})"
    return f"{time} {_fmt(lo) if isinstance(lo, float) else _num(lo)} to " \
           f"{_fmt(hi) if isinstance(hi, float) else _num(hi)} {unit} ({span})"


def format_summary(s: dict[str, Any]) -> str:
    """The printed form of a scan summary (as :func:`run_scan` returns it)."""
    lines = [f"colcep scan: pattern {s['pattern']}" + (f" ({s['description']})" if s.get("description") else "")]
    lines.append(f"  input     {s['input']}: {_num(s['rows'])} rows")
    lines.append(f"  engine    {s['engine']}")
    m = s["result"]
    key = s.get("key")
    to = f", {_num(m['timed_out'])} timed out" if m.get("timed_out") is not None else ""
    keys = f" in {_num(m['keys_with_matches'])} key{'s' if m['keys_with_matches'] != 1 else ''} ({key})" \
        if m.get("keys_with_matches") is not None else ""
    lines.append(f"  found     {_num(m['matches'])} matches ({_num(m['matched_events'])} matched events){keys}{to}")
    if m.get("patterns"):
        import textwrap

        text = " | ".join(f"{n} {_num(p['matches'])}" for n, p in m["patterns"].items()) + "  (matches per pattern)"
        lines.extend(textwrap.wrap(text, 110, initial_indent="  patterns  ", subsequent_indent=" " * 12,
                                   break_on_hyphens=False))
    if m["events_per_stage"]:
        per = m.get("matches_per_stage", {})
        parts = []
        for st, ev in m["events_per_stage"].items():
            nm = per.get(st)
            if nm is None or nm == ev:
                parts.append(f"{st} {_num(ev)}")
            else:
                parts.append(f"{st} {_num(ev)} in {_num(nm)} matches ({ev / max(nm, 1):.2f} each)")
        lines.append("  by stage  " + " | ".join(parts) + "  (matched events per stage)")
    if m.get("top_keys"):
        lines.append("  top keys  " + " | ".join(f"{k} {_num(v)}" for k, v in m["top_keys"].items())
                     + "  (matches per key)")
    if m.get("time_span"):
        lines.append("  when      " + format_time_span(*m["time_span"], s.get("time", "ts"), s.get("time_unit")))
    lines.append(f"  output    {s['out']}/ (Parquet, one row per matched event: "
                 f"{', '.join(s.get('columns') or [])}; summary in _summary.json)")
    if s.get("picture"):
        lines.append(f"  picture   {s['picture']}")
    t = s["seconds"]
    parts = [f"Spark start {t['session']:.1f} s"] if t.get("session") else []
    parts.append(f"kernels {t.get('kernels', 0.0):.1f} s" + (" (compiled; cached for the next run)"
                                                            if t.get("kernels", 0.0) > 10 else ""))
    stages = [f"{st} {t[st]:.1f}" for st in ("reading", "ordering", "matching", "writing") if st in t]
    parts.append(f"scan {t['scan']:.1f} s" + (f" ({', '.join(stages)})" if stages else ""))
    if t.get("picture"):
        parts.append(f"picture {t['picture']:.1f} s")
    lines.append(f"  time      {t['total']:.1f} s = {' + '.join(parts)}; {_num(s['rows_per_second'])} rows/s "
                 "over the scan")
    if s.get("hint"):
        lines.append(f"  hint      {s['hint']}")
    return "\n".join(lines)


def _with_kernels(rep: Reporter, build: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``build`` (which validates the pattern and loads or compiles the kernels), saying
    which of the two happens before it starts; returns its result and the seconds taken."""
    cold = kernels_cold()
    cache.notice = False  # this command says it itself
    if cold:
        rep.step(f"compiling kernels (first run on this machine, ~{COMPILE_SECONDS // 60} min; "
                 "cached for the next runs) ...")
    else:
        rep.step("loading kernels ...")
    t0 = time.perf_counter()
    with rep.ticking("compiling kernels" if cold else "loading kernels", COMPILE_SECONDS if cold else None):
        res = build()
    secs = time.perf_counter() - t0
    done = "compiled" if cold else "loaded" if secs < 10 else "loaded, some compiled for this input's types,"
    rep.step(f"kernels {done} in {secs:.1f} s")
    return res, secs


# ============================================================================ the scan
@dataclass
class ScanJob:
    """What ``colcep scan`` runs; see :func:`run_scan`."""

    inputs: list[str]
    pattern: Pattern  # the first of ``patterns``
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
    progress: bool = True
    top: int = 10
    time_unit: str | None = None
    overwrite: bool = False
    quiet: bool = False
    picture: bool = True
    patterns: dict[str, Pattern] | None = None  # several patterns in one pass (output column ``pattern``)

    def named_patterns(self) -> dict[str, Pattern]:
        return self.patterns or {self.pattern_name: self.pattern}


def _input_format(paths: Sequence[str]) -> str:
    exts = set()
    for p in paths:
        pp = Path(p)
        if not pp.exists():
            raise InputError(f"input {p!r} does not exist")
        files = [f for f in pp.rglob("*") if f.is_file() and not f.name.startswith(("_", "."))] if pp.is_dir() \
            else [pp]
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


def _partial_name(p: Path) -> str:
    return f".{p.name}.partial-"


def _prepare_out(out: str, overwrite: bool = False) -> tuple[Path, Path]:
    """The final output folder and the hidden folder beside it the scan writes to. Refuses to
    replace a folder that is not an earlier scan's output unless ``overwrite``; removes what
    interrupted earlier scans left behind."""
    p = Path(out)
    if p.is_file():
        raise InputError(f"--out {out!r} is a file; give a folder for the matches")
    if p.is_dir() and not overwrite:
        foreign = [f.name for f in p.iterdir()
                   if not (f.name.startswith(("part-", "_", ".")) and (f.is_file()))]
        if foreign:
            raise InputError(f"--out {out!r} holds other files ({foreign[:3]}); choose an empty or new folder, or "
                             "add --overwrite to replace it")
    p.parent.mkdir(parents=True, exist_ok=True)
    for stale in p.parent.glob(_partial_name(p) + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = p.parent / f"{_partial_name(p)}{os.getpid()}"
    return p, tmp


def _commit_out(tmp: Path, final: Path) -> None:
    """Put the finished output in place: the old folder is moved aside, the new one renamed
    in, the old one removed."""
    old = None
    if final.exists():
        old = final.parent / f"{_partial_name(final)}old-{os.getpid()}"
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _default_seq(schema: pa.Schema, job: ScanJob) -> str | None:
    if job.seq == "":
        return None
    if job.seq is not None:
        return job.seq
    if "id" in schema.names and pa.types.is_integer(schema.field("id").type):
        return "id"
    return None


def _spec_and_kernels(job: ScanJob, data, seq: str | None):
    """Validate the job against the input's schema and get the kernels ready: ``arrow_spec``
    loads (or compiles) the step kernel, then some 33,000 input rows run through a throw-away
    stream so that every kernel specialisation a scan calls is compiled here, in the step that
    says so, and not in the middle of the scan (or in every Spark worker). Returns the task
    spec, or with several patterns the spec of each by name."""
    from colcep.engine.ordering import StreamOrder, key_time_order
    from colcep.spark import ROW_COL, KeyedStream, arrow_spec
    from colcep.spark.batch import Streams

    specs = {name: arrow_spec(data.schema, p, job.key, job.time, job.columns, seq=seq, timeouts=job.timeouts,
                              **_spec_kwargs(job)) for name, p in job.named_patterns().items()}
    if job.patterns and PATTERN_COL in next(iter(specs.values())).columns:
        raise InputError(f"the output column {PATTERN_COL!r} names each row's pattern; rename the input's "
                         f"{PATTERN_COL!r} column or leave it out of --columns")
    spec = next(iter(specs.values()))
    try:
        from colcep.engine import matcher

        # more rows than one kernel call takes: a batch split into calls passes its column
        # matrices as slices (another Numba specialisation than a whole small batch)
        rows = 2 * int(getattr(matcher, "CHUNK_ROWS", 1 << 14)) + 1
        sample = data.head(rows, columns=_read_columns(specs))
        if seq is None:
            sample = sample.append_column(ROW_COL, pa.array(np.arange(sample.num_rows, dtype=np.int64)))
        sample = sample.drop_null()
        sort = [(c, "ascending") for c in (job.key, job.time, spec.row) if c is not None]
        sample = sample.take(pc.sort_indices(sample, sort_keys=sort))
        StreamOrder(spec.key, spec.time, spec.row).check(sample)  # the order check's and the order's kernels
        key_time_order(sample, spec.key, spec.time, spec.row)
        for part in (sample, sample.slice(0, 1000)):  # split into kernel calls, and one call
            for one in specs.values():
                stream = KeyedStream(one)
                stream.feed(part)
                stream.finish()
            if len(specs) > 1:
                streams = Streams(specs, grouped=False)
                streams.feed(part)
                streams.finish()
    except ColcepError:
        pass  # the scan itself reports what is wrong with the input, with the row
    return specs if job.patterns else spec


def _read_columns(specs: dict) -> list[str]:
    """The input columns a scan reads: those of every pattern."""
    from colcep.spark import ROW_COL

    return [c for c in dict.fromkeys(n for sp in specs.values() for n in sp.in_schema.names) if c != ROW_COL]


def _spec_kwargs(job: ScanJob) -> dict[str, Any]:
    return {"time_unit": job.time_unit} if job.time_unit else {}


def run_scan(job: ScanJob, rep: Reporter | None = None) -> dict[str, Any]:
    """Run a scan, write the matches and ``_summary.json`` to ``job.out`` (and the picture
    beside it); returns the summary. Progress goes to ``rep`` (default: stderr)."""
    import pyarrow.dataset as ds

    rep = rep or Reporter(quiet=job.quiet, meter=job.progress)
    t_start = time.perf_counter()
    fmt = _input_format(job.inputs)
    data = _arrow_dataset(job.inputs, fmt)
    schema = data.schema
    seq = _default_seq(schema, job)
    if job.columns and job.time in schema.names and job.time not in job.columns:
        job.columns = [job.time, *job.columns]  # every matched event's time: the summary's span, the picture
    final, tmp = _prepare_out(job.out, job.overwrite)
    try:
        if job.in_process:  # (summarised as it writes)
            rows, engine, secs, hint, counted = _scan_in_process(job, data, fmt, seq, tmp, rep)
        else:
            rows, engine, secs, hint = _scan_spark(job, fmt, data, seq, tmp, rep)
        res = ds.dataset(str(tmp), format="parquet")
        if not job.in_process:
            wanted = [c for c in (PATTERN_COL, "match_id", job.key, "stage", "timed_out", job.time)
                      if c is not None and c in res.schema.names]
            counted = Summary(job.key, job.top, job.time, bool(job.patterns), job.timeouts)
            for b in res.to_batches(columns=wanted):  # batch by batch: memory follows the keys, not the output
                counted.add(b)
        result = counted.result()
        if job.patterns:  # every pattern scanned, those without a match too
            zero = {"matches": 0, "matched_events": 0, **({"timed_out": 0} if job.timeouts else {})}
            result["patterns"] = {n: result.get("patterns", {}).get(n, zero) for n in job.patterns}
        summary = {
            "pattern": job.pattern_name, "description": job.description,
            "input": ", ".join(job.inputs), "rows": rows, "engine": engine, "out": str(final),
            "key": job.key, "time": job.time, "time_unit": job.time_unit or "ms", "seq": seq,
            "columns": list(res.schema.names), "result": result, "seconds": secs,
            "rows_per_second": rows / max(secs["scan"], 1e-9), "picture": None, "hint": hint,
        }
        (tmp / "_summary.json").write_text(json.dumps(summary, indent=1, default=str))
        _commit_out(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    rep.step(f"wrote {_num(result['matched_events'])} matched events to {final}/")
    if job.picture:
        t_pic = time.perf_counter()
        summary["picture"] = _draw_picture(final, rep)
        secs["picture"] = time.perf_counter() - t_pic
    secs["total"] = time.perf_counter() - t_start
    (final / "_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _draw_picture(out_dir: Path, rep: Reporter) -> str | None:
    """``<out>.png`` beside the output, or None (matplotlib missing / nothing to draw)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        rep.step("no picture: matplotlib is not installed (pip install 'colcep[plot]')")
        return None
    from colcep.tools.plot import plot_scan, scan_picture_path

    png = scan_picture_path(out_dir)
    rep.step(f"drawing the matches -> {png} ...")
    try:
        plot_scan(out_dir, out=png)
    except Exception as exc:  # noqa: BLE001 - the scan's output stands without its picture
        rep.step(f"no picture: {type(exc).__name__}: {exc}")
        return None
    return str(png)


def _scan_in_process(job: ScanJob, data, fmt: str, seq: str | None, out_dir: Path,
                     rep: Reporter) -> tuple[int, str, dict, str | None]:
    import pyarrow.parquet as pq

    from colcep.tools.file_scan import STAGES, parquet_batches, scan_batches
    from colcep.spark.batch import Streams
    from colcep.spark import DEFAULT_BATCH_ROWS

    specs, t_kernels = _with_kernels(rep, lambda: _spec_and_kernels(job, data, seq))
    t0 = time.perf_counter()
    need = _read_columns(specs if isinstance(specs, dict) else {"": specs})
    spec = next(iter(specs.values())) if isinstance(specs, dict) else specs
    step = int(job.batch_rows or DEFAULT_BATCH_ROWS)
    threads = int(job.cores or os.cpu_count() or 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / "part-00000.parquet"
    schema = Streams(specs).schema
    writer = [pq.ParquetWriter(out_file, schema)]
    counted = [Summary(job.key, job.top, job.time, bool(job.patterns), job.timeouts)]

    def write(t: pa.Table) -> None:
        writer[0].write_table(t)
        counted[0].add(t)

    def batches():
        if fmt == "parquet":
            src = [str(p) for p in job.inputs]
            return parquet_batches(src if len(src) > 1 else src[0], spec.key_columns, need, step)
        return data.to_batches(columns=need, batch_size=step)

    def restart(disorder: str) -> None:
        rep.done()
        rep.step(f"the input is not in time order per key ({disorder}): reading it whole to order it ...")
        writer[0].close()
        writer[0] = pq.ParquetWriter(out_file, schema)
        counted[0] = Summary(job.key, job.top, job.time, bool(job.patterns), job.timeouts)

    total = data.count_rows() if fmt == "parquet" else None
    rows = f"{_num(total)} rows of " if total is not None else ""
    rep.step(f"matching {rows}{', '.join(job.inputs)} in this process on {threads} thread{'s' if threads > 1 else ''} "
             "as it is read, writing the matches as they are found ...")
    t_scan = time.perf_counter()
    meter = lambda r: rep.meter("matching: " + scan_meter_text(r.rows, total, time.perf_counter() - t_scan,  # noqa: E731
                                                               r.matches))
    try:
        res = scan_batches(specs, batches, lambda: data.to_table(columns=need), write, restart, threads, step, meter)
    finally:
        writer[0].close()
        rep.done()
    el = time.perf_counter() - t_scan
    rep.step(scan_done_text(res.rows, el, res.matches))
    secs = {"kernels": t_kernels, "scan": time.perf_counter() - t0}
    secs.update({s: res.seconds[s] for s in STAGES})
    how = "streamed" if res.streamed else "read whole and ordered"
    return res.rows, f"in-process ({how}, batches of {_num(step)} rows, {threads} threads)", secs, None, counted[0]


def _spark_session(job: ScanJob, rep: Reporter):
    """The session to use and whether this scan owns it (and stops it at the end)."""
    from pyspark.sql import SparkSession

    from colcep.spark import local_session

    active = SparkSession.getActiveSession()
    if active is not None:
        rep.step(f"using the active Spark session ({active.sparkContext.master})")
        return active, False
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # launched by spark-submit: use its configuration
        rep.step("joining the spark-submit session ...")
        return SparkSession.builder.appName("colcep scan").getOrCreate(), True
    n = int(job.cores or os.cpu_count() or 1)
    rep.step(f"starting local Spark (local[{n}]; the JVM takes a few seconds) ...")
    with rep.ticking("starting local Spark"), _jvm_start_up_noise_filtered():
        s = local_session(job.cores, progress=False, app_name="colcep scan")
    return s, True


#: What the JVM and Spark's launcher print on every start, which says nothing to a user.
_JVM_NOISE = ("WARNING: Using incubator modules", "Setting default log level to",
              "To adjust logging level use sc.setLogLevel", "NativeCodeLoader: Unable to load native-hadoop")


@contextlib.contextmanager
def _jvm_start_up_noise_filtered() -> Iterator[None]:
    """Start the JVM with its stderr going through a filter that drops the start-up lines of
    ``_JVM_NOISE`` and passes everything else (errors included) to this process's stderr, for
    the JVM's whole life. Python's own stderr is restored as soon as the block ends."""
    try:
        saved = os.dup(2)
        r, w = os.pipe()
    except OSError:  # pragma: no cover - no file descriptors to play with
        yield
        return
    out = os.dup(saved)

    def forward() -> None:
        with os.fdopen(r, "rb", buffering=0) as src:
            pending = b""
            while True:
                chunk = src.read(4096)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for ln in lines:
                    if not any(n.encode() in ln for n in _JVM_NOISE):
                        os.write(out, ln + b"\n")
            if pending:
                os.write(out, pending)

    threading.Thread(target=forward, daemon=True, name="colcep-jvm-stderr").start()
    sys.stderr.flush()
    os.dup2(w, 2)
    os.close(w)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def in_process_hint(master: str, owned: bool, rows: int | None, session_seconds: float) -> str | None:
    """The advice printed after a scan on a local Spark session this command started, when the
    input is small enough for one process (``rows`` None: unknown, e.g. CSV)."""
    if not owned or not master.startswith("local") or (rows is not None and rows > IN_PROCESS_HINT_ROWS):
        return None
    size = f"{_num(rows)} rows fit" if rows is not None else "this input fits"
    return (f"{size} on one machine: --in-process skips Spark (it took {session_seconds:.0f} s to start here, "
            "and each job adds its own overhead) and is usually several times faster at this size")


def _count_rows(data, fmt: str) -> int | None:
    """Input rows from Parquet metadata (None for CSV: counting would read it all)."""
    if fmt != "parquet":
        return None
    try:
        return int(data.count_rows())
    except Exception:  # noqa: BLE001 - only for the progress meter
        return None


def _partitions(job: ScanJob, spark, rows: int | None) -> tuple[int, str]:
    """The scan's partition count and why: --partitions, else from the data and the cluster
    (``colcep.spark.default_partitions``), never Spark's default of 200 shuffle partitions."""
    from colcep.spark import ROWS_PER_TASK, cluster_cores, default_partitions

    if job.partitions:
        return int(job.partitions), "--partitions"
    n, cores = default_partitions(spark, rows), cluster_cores(spark)
    size = f"{_num(rows)} rows" if rows else "input size unknown"
    if rows and n > 2 * cores:
        rule = f"about {_num(ROWS_PER_TASK)} rows a task, a multiple of the {cores} cores"
    else:
        rule = f"twice the {cores} cores"
    return n, f"{rule}; {size}; --partitions N to choose"


def _scan_spark(job: ScanJob, fmt: str, data, seq: str | None, out_dir: Path,
                rep: Reporter) -> tuple[int, str, dict, str | None]:
    from colcep.spark import ScanMetrics, match, match_many, match_parquet

    # validate, and load (or compile) the kernels on the driver, timed apart: the workers then load them
    _, t_kernels = _with_kernels(rep, lambda: _spec_and_kernels(job, data, seq))
    total = _count_rows(data, fmt)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        spark, owned = _spark_session(job, rep)
    t_session = time.perf_counter() - t0
    if owned:
        rep.step(f"Spark started in {t_session:.1f} s")
    try:
        master = spark.sparkContext.master
        hint = in_process_hint(master, owned, total, t_session)
        if job.batch_rows:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(int(job.batch_rows)))
        parts, why = _partitions(job, spark, total)
        rep.step(f"{parts} Spark partitions ({why})")
        metrics = ScanMetrics(spark)
        t1 = time.perf_counter()
        if job.direct:
            if fmt != "parquet" or len(job.inputs) != 1:
                raise InputError("--direct reads one Parquet folder laid out by key (Hive partitions or files)")
            if job.patterns:
                raise InputError("--direct scans one pattern; several patterns in one pass run without it "
                                 "(one shuffle for all of them)")
            rep.step("planning the file groups (Parquet laid out by key) ...")
            out = match_parquet(job.inputs[0], job.pattern, job.key, job.time, job.columns, spark=spark, seq=seq,
                                timeouts=job.timeouts, num_partitions=parts, metrics=metrics,
                                batch_rows=job.batch_rows or 500_000, progress=False,  # the CLI draws its own
                                **_spec_kwargs(job))
            how = "Parquet read by the executors with pyarrow"
        else:
            rep.step(f"reading the input's schema ({'Parquet' if fmt == 'parquet' else 'CSV'}, a Spark job) ...")
            reader = spark.read
            if fmt == "csv":
                from pyspark.sql.pandas.types import from_arrow_schema

                reader = reader.schema(from_arrow_schema(data.schema, prefer_timestamp_ntz=False)) \
                    .option("header", "true")
                df = reader.csv([str(p) for p in job.inputs])
            else:
                df = reader.parquet(*[str(p) for p in job.inputs])
            rep.step("checking the key and time columns for nulls (a Spark job) ...")
            with _SparkWatch(spark, metrics, None, rep):
                opts = dict(seq=seq, timeouts=job.timeouts, num_partitions=parts, metrics=metrics, progress=False,
                            **_spec_kwargs(job))
                out = match_many(df, job.patterns, job.key, job.time, job.columns, **opts) if job.patterns else \
                    match(df, job.pattern, job.key, job.time, job.columns, **opts)
            how = "mapInArrow"
        rep.step(f"matching {_num(total) + ' rows' if total else 'the input'} on Spark {master} "
                 f"({parts} partitions) and writing the matches ...")
        with _SparkWatch(spark, metrics, total, rep):
            out.write.mode("overwrite").parquet(str(out_dir))
        t_scan = time.perf_counter() - t1
        rows = int(metrics.rows)
        rep.step(scan_done_text(rows, t_scan, metrics.matches))
        sc = spark.sparkContext
        batch = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
        engine = (f"Spark {sc.master} ({how}, {parts} partitions, Arrow batches of {_num(int(batch))} rows; "
                  f"{metrics.tasks} tasks, {metrics.warm_workers} worker(s) loaded the kernels in "
                  f"{metrics.warm_seconds:.1f} s" + (f", compiling {_num(metrics.compiles)} of them" if metrics.compiles
                                                     else "") + ")")
    finally:
        if owned:
            rep.step("stopping Spark ...")
            spark.stop()
    return rows, engine, {"session": t_session, "kernels": t_kernels, "scan": t_scan}, hint


# ============================================================================ argument parsing
def _load_patterns(spec: str) -> tuple[dict[str, Pattern], str, dict[str, Any]]:
    """``--pattern``: one pattern (a built-in name or a Python file), several separated by
    commas, ``desk`` (twenty tick signals, ``colcep.tools.examples.desk_patterns``) or a JSON file of
    pattern documents (an object of name -> pattern, or a list of them, each named by a ``"name"``
    beside its fields, else by the file and its place). Returns the patterns by name,
    a description and the defaults they declare (output columns: those of all of them)."""
    if spec == "desk":
        from colcep.tools.examples import desk_patterns

        return desk_patterns(), "twenty tick signals: the five benchmark families, four variants each", \
            {"key": "name", "time": "ts", "columns": ["price", "volume"]}
    if spec.endswith(".json"):
        path = Path(spec)
        if not path.is_file():
            raise InputError(f"pattern file {spec!r} does not exist")
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and "stages" not in doc:  # name -> pattern document
            items = [(str(n), d) for n, d in doc.items()]
        else:  # a list of documents, or one: named by their "name", else by the file and their place
            docs = doc if isinstance(doc, list) else [doc]
            items = [((d.get("name") if isinstance(d, dict) else None) or
                      (path.stem if len(docs) == 1 else f"{path.stem}_{i}"), d) for i, d in enumerate(docs)]
        pats = {}
        for name, d in items:
            if name in pats:
                raise InputError(f"{spec} names the pattern {name!r} twice")
            pats[name] = Pattern.from_json({k: v for k, v in d.items() if k != "name"} if isinstance(d, dict) else d)
        if not pats:
            raise InputError(f"{spec} holds no pattern")
        return pats, f"{len(pats)} patterns from {path.name}", {}
    parts = [spec] if Path(spec).exists() else [p for p in spec.split(",") if p]
    loaded = [(p, *_load_pattern(p)) for p in parts]
    if len(loaded) == 1:
        name, pat, desc, defaults = loaded[0]
        return {name: pat}, desc, defaults
    names = [Path(p).stem if p.endswith(".py") else p for p, *_ in loaded]
    if len(set(names)) < len(names):
        raise InputError(f"--pattern names a pattern twice: {spec!r}")
    defaults: dict[str, Any] = {}
    for name, (_, _, _, d) in zip(names, loaded):
        for k in ("key", "time", "seq"):
            if k in d and defaults.setdefault(k, d[k]) != d[k]:
                raise InputError(f"the patterns declare different {k} columns ({defaults[k]!r}, then {d[k]!r} for "
                                 f"{name!r}); give --{k} to scan them together")
        if d.get("columns") is not None:
            defaults["columns"] = list(dict.fromkeys([*defaults.get("columns", []), *d["columns"]]))
    return {n: pat for n, (_, pat, _, _) in zip(names, loaded)}, ", ".join(names), defaults


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


def _tick_options(g, default_events: int | None) -> None:
    """The synthetic-tick options, spelled the same in ``scan`` and ``generate``."""
    if default_events is None:
        g.add_argument("--events", type=int, metavar="N", help="instead of input paths: generate N synthetic ticks "
                                                               "(id, name, ts in ms, price, volume) and scan them")
        g.add_argument("--generate", type=int, dest="events", metavar="N", help=argparse.SUPPRESS)  # old spelling
    else:
        g.add_argument("--events", type=int, default=default_events, metavar="N",
                       help=f"number of ticks (default {default_events:,})")
    g.add_argument("--symbols", type=int, default=100, metavar="K",
                   help="number of symbols, the key column 'name' (default 100)")
    g.add_argument("--seed", type=int, default=7, help="random seed; the same seed gives the same ticks (default 7)")
    g.add_argument("--by-key", action="store_true",
                   help="write the ticks laid out by symbol, the layout --direct reads: a folder of files "
                        "part-00000.parquet, ... each holding a range of whole symbols sorted by (name, ts, id); "
                        "any number of symbols (colcep.spark.write_by_key)")
    g.add_argument("--buckets", type=int, metavar="B",
                   help="with --by-key: the number of files (key ranges); default from the data: at most about "
                        "2 M rows a file, up to 64 files where each gets 16,384 rows or more, at most 1,024")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="colcep", description="Complex event processing on columnar data.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="{scan,plot,generate,patterns,warmup}")
    s = sub.add_parser("scan", help="find a pattern in Parquet / CSV data and write the matches",
                       description="Find a pattern in Parquet / CSV data (on local Spark by default) and write the "
                                   "matches as Parquet with a summary and a picture.")
    s.add_argument("inputs", nargs="*", help="Parquet or CSV files or folders")
    s.add_argument("--pattern", required=True, help="a built-in name (see `colcep patterns`) or a .py file "
                                                    "defining `pattern`; several, separated by commas, or `desk` "
                                                    "(twenty tick signals), or a .json file of pattern documents, "
                                                    "run in one pass: the output gets a column `pattern`")
    s.add_argument("--out", required=True, help="output folder for the matches (Parquet); the picture goes "
                                                "beside it as <out>.png")
    s.add_argument("--overwrite", action="store_true", help="replace --out even when it holds files that are not "
                                                            "an earlier scan's output")
    g = s.add_argument_group("synthetic data (instead of input paths)")
    _tick_options(g, None)
    g.add_argument("--data", help="where to write the generated ticks (default: beside --out, "
                                  "ticks_<N>x<symbols>_seed<seed>.parquet, or the folder ..._by_key with --by-key; "
                                  "reused if present)")
    c = s.add_argument_group("columns")
    c.add_argument("--key", help="partition column (default: the pattern's, else 'name'); '' for none")
    c.add_argument("--time", help="event-time column (default: the pattern's, else 'ts')")
    c.add_argument("--time-unit", choices=["s", "ms", "us", "ns"],
                   help="unit of an integer time column, for windows given as strings like '30s' (generated "
                        "ticks: ms; otherwise colcep.match's default)")
    c.add_argument("--seq", help="integer tie-breaker / row identity column (default: 'id' when the input has "
                                 "one); '' for none")
    c.add_argument("--columns", help="comma-separated columns copied into the matches (default: the pattern's; "
                                     "the time column is always included)")
    c.add_argument("--timeouts", action="store_true", help="also write timed-out partial matches")
    e = s.add_argument_group("engine")
    e.add_argument("--in-process", action="store_true", help="run in this process instead of Spark (faster for "
                                                             "inputs that fit in memory on one machine)")
    e.add_argument("--direct", action="store_true",
                   help="Parquet laid out by key (files of whole keys, as --by-key writes, or Hive partitions "
                        "key=value/): executors read the files with pyarrow (no JVM conversion, no shuffle)")
    e.add_argument("--cores", type=int, help="cores of the local Spark session (default: all)")
    e.add_argument("--partitions", type=int, help="Spark partitions (default: twice the cluster's cores, more for "
                                                   "large inputs, about 4 million rows a task; said when it runs)")
    e.add_argument("--batch-rows", type=int, help="Arrow batch size in rows (default 500,000)")
    o = s.add_argument_group("output")
    o.add_argument("--no-progress", dest="progress", action="store_false", default=True,
                   help="no progress meter (the step lines stay; the meter is redrawn on a terminal and written "
                        "every 10 s otherwise)")
    o.add_argument("--progress", dest="progress", action="store_true", help=argparse.SUPPRESS)  # the default now
    o.add_argument("-q", "--quiet", action="store_true", help="print only the summary (no steps or progress on "
                                                             "stderr)")
    o.add_argument("--no-plot", dest="plot", action="store_false", default=True,
                   help="do not draw <out>.png")
    o.add_argument("--top", type=int, default=10, help="keys listed in the summary (default 10)")
    o.add_argument("--show", type=int, default=0, metavar="K", help="also print the first K matches")
    o.add_argument("--json", action="store_true", help="print the summary as JSON")

    pl = sub.add_parser("plot", help="draw a scan's matches as PNG (overview, or one key's price with its matches)",
                        description="Draw the matches of a `colcep scan` output folder as PNG. Without --key: "
                                    "matches over time and the top keys, above the top key's price with its "
                                    "first matches marked. With --key: that key's column over time with each "
                                    "match's events marked by stage.")
    pl.add_argument("matches", help="a `colcep scan` output folder (its _summary.json names the input)")
    pl.add_argument("--key", dest="key_value", metavar="VALUE", help="the key to draw, e.g. S0008 (default: "
                                                                     "the overview)")
    pl.add_argument("--column", default="price", help="the column drawn over time (default price)")
    pl.add_argument("--data", help="the scanned input, if it moved since the scan (Parquet or CSV)")
    pl.add_argument("--first", type=int, metavar="M", help="zoom to the time range of the key's first M matches "
                                                          "(default: all with --key, 12 in the overview)")
    pl.add_argument("--out", help="the PNG to write (default: <matches>.png, or <matches>_<key>.png with --key)")

    gen = sub.add_parser("generate", help="write synthetic ticks (Parquet or CSV by suffix)",
                         description="Write synthetic ticks: id, name (the symbol), ts (ms), price (a random walk "
                                     "per symbol), volume.")
    _tick_options(gen, 1_000_000)
    gen.add_argument("--out", required=True, help="the file to write: .parquet or .csv (a folder with --by-key)")
    sub.add_parser("patterns", help="list the built-in patterns", description="List the built-in patterns.")
    w = sub.add_parser("warmup", help="compile the kernels for this machine now (images, cluster init scripts)",
                       description="Compile colcep's kernels into this machine's cache (colcep.cache) ahead of the "
                                   "first scan, independent groups in parallel processes; what is cached already "
                                   "is only loaded.")
    w.add_argument("--groups", help="comma-separated kernel groups (default: all of cep,sql,windows)")
    w.add_argument("--processes", type=int, metavar="N", help="processes at once (default: the cores, one per group)")
    return ap


def _check_tick_options(a: argparse.Namespace) -> None:
    if a.buckets is not None and not a.by_key:
        raise InputError("--buckets sets the number of files of --by-key; add --by-key")
    if a.buckets is not None and a.buckets < 1:
        raise InputError(f"--buckets must be at least 1, got {a.buckets}")


def _write_ticks_atomic(path: Path, events: int, symbols: int, seed: int, by_key: bool,
                        buckets: int | None = None) -> Path:
    """``write_ticks`` to a hidden name beside ``path``, renamed at the end (an interrupted
    run leaves no half file that a later scan would reuse)."""
    from colcep.tools.ticks import write_ticks

    tmp = path.with_name(f".{path.stem}.partial-{os.getpid()}{path.suffix}")
    try:
        write_ticks(tmp, events, symbols, seed, partition_by_key=by_key, buckets=buckets)
        if by_key and path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    return path


def _cmd_scan(a: argparse.Namespace) -> int:
    patterns, desc, defaults = _load_patterns(a.pattern)
    inputs = list(a.inputs)
    rep = Reporter(quiet=a.quiet, meter=a.progress)
    if a.events is not None:
        if inputs:
            raise InputError("give either input paths or --events N (synthetic ticks), not both")
        _check_tick_options(a)
        suffix = ("_by_key" + (f"_b{a.buckets}" if a.buckets else "")) if a.by_key else ".parquet"
        data = Path(a.data) if a.data else \
            Path(a.out).parent / f"ticks_{a.events}x{a.symbols}_seed{a.seed}{suffix}"
        if data.exists():
            rep.step(f"reusing the ticks in {data}")
        else:
            rep.step(f"generating {_num(a.events)} ticks over {a.symbols} symbols -> {data} ...")
            with rep.ticking("generating ticks"):
                _write_ticks_atomic(data, a.events, a.symbols, a.seed, a.by_key, a.buckets)
        inputs = [str(data)]
    if not inputs:
        raise InputError("give input files or folders, or --events N to scan synthetic ticks")
    key = defaults.get("key", "name") if a.key is None else (a.key or None)
    columns = defaults.get("columns") if a.columns is None else [c for c in a.columns.split(",") if c]
    job = ScanJob(inputs=inputs, pattern=next(iter(patterns.values())), pattern_name=a.pattern, out=a.out, key=key,
                  patterns=patterns if len(patterns) > 1 else None,
                  time=a.time or defaults.get("time", "ts"), seq=a.seq if a.seq is not None else defaults.get("seq"),
                  columns=columns, description=desc, timeouts=a.timeouts, in_process=a.in_process, direct=a.direct,
                  partitions=a.partitions, batch_rows=a.batch_rows, cores=a.cores, progress=a.progress, top=a.top,
                  time_unit=a.time_unit or ('ms' if a.events is not None else None),  # generated ticks: ms
                  overwrite=a.overwrite, quiet=a.quiet, picture=a.plot)
    summary = run_scan(job, rep)
    if a.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print(format_summary(summary))
    if a.show:
        import pyarrow.dataset as ds

        print(format_matches(ds.dataset(summary["out"], format="parquet").to_table().sort_by("match_id"), key,
                             a.show))
    return 0


def _cmd_plot(a: argparse.Namespace) -> int:
    from colcep.tools.plot import plot_key, plot_scan, scan_picture_path

    folder = Path(a.matches)
    if not folder.is_dir():
        raise InputError(f"{a.matches!r} is not a folder of matches (the --out of `colcep scan`)")
    summary_file = folder / "_summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    data = a.data or (summary.get("input") if summary.get("input") and Path(summary["input"]).exists() else None)
    if a.key_value is None:
        png = Path(a.out) if a.out else scan_picture_path(folder)
        plot_scan(folder, column=a.column, max_matches=a.first if a.first is not None else 12, data=data, out=png)
    else:
        png = Path(a.out) if a.out else folder.with_name(f"{folder.name}_{a.key_value}.png")
        key = summary.get("key", "name")
        import pyarrow.dataset as ds

        matches = ds.dataset(str(folder), format="parquet").to_table()
        value: Any = a.key_value
        if key in matches.column_names and pa.types.is_integer(matches.schema.field(key).type):
            value = int(value)
        if key in matches.column_names and not pc.any(pc.equal(matches.column(key), value)).as_py():
            raise InputError(f"no matches for {key} = {a.key_value!r} in {a.matches}")
        if data is None and a.column not in matches.column_names:
            raise InputError(f"the matches have no {a.column!r} column and the input is not found: give --data")
        plot_key(data, matches, value, key=key, time=summary.get("time", "ts"), column=a.column,
                 time_unit=summary.get("time_unit") or "ms", seq=summary.get("seq"), max_matches=a.first,
                 title=None, out=png)
    print(f"wrote {png}")
    return 0


def _cmd_generate(a: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _check_tick_options(a)
    p = _write_ticks_atomic(out, a.events, a.symbols, a.seed, a.by_key, a.buckets)
    print(f"wrote {_num(a.events)} ticks over {a.symbols} symbols to {p} in {time.perf_counter() - t0:.1f} s")
    return 0


def _cmd_patterns(a: argparse.Namespace) -> int:
    w = max(len(k) for k in EXAMPLES)
    for name, ex in EXAMPLES.items():
        print(f"{name:<{w}}  {ex.description}")
    print(f"{'desk':<{w}}  twenty tick signals in one pass (P1-P5, four variants each; "
          "colcep.tools.examples.desk_patterns)")
    return 0


def _cmd_warmup(a: argparse.Namespace) -> int:
    from colcep import cache
    from colcep.tools.warmup import warmup

    if a.processes is not None and a.processes < 1:
        raise InputError(f"--processes must be at least 1, got {a.processes}")
    t0 = time.perf_counter()
    groups = [g for g in a.groups.split(",") if g] if a.groups else None
    warmup(groups, a.processes, report=lambda line: print(f"colcep warmup: {line}", flush=True))
    print(f"colcep warmup: kernels ready in {cache.cache_dir()} ({time.perf_counter() - t0:.1f} s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``colcep`` command; returns the exit status (0 ok, 2 a usage or input
    error, 130 interrupted)."""
    a = _parser().parse_args(argv)
    try:
        return {"scan": _cmd_scan, "plot": _cmd_plot, "generate": _cmd_generate,
                "patterns": _cmd_patterns, "warmup": _cmd_warmup}[a.command](a)
    except ColcepError as exc:
        print(f"colcep: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ncolcep: interrupted; nothing was written to --out (partial output removed)"
              if a.command == "scan" else "\ncolcep: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
