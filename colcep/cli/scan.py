"""``colcep scan``: a pattern found in Parquet / CSV data (or synthetic ticks), the matches written.

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
import shutil
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from colcep.engine import kernel_cache as cache
from colcep.engine.kernel_cache import kernels_cold
from colcep.cli.generate import _check_tick_options, _tick_options, _write_ticks_atomic
from colcep.cli.patterns import _load_patterns
from colcep.engine.many import PATTERN_COL
from colcep.engine.tiers import DEFAULT_TIER
from colcep.errors import ColcepError, InputError
from colcep.pattern import Pattern
from colcep.engine.progress import Reporter, scan_done_text, scan_meter_text
from colcep.engine.progress import num as _num
from colcep.tools.spark_watch import SparkWatch as _SparkWatch
from colcep.tools.summary import Summary, _fmt, format_matches

#: Inputs up to this many rows scan faster in-process than on a local Spark session.
IN_PROCESS_HINT_ROWS = 20_000_000
#: Expected kernel compile time on a cold cache, as announced (2 cores).
COMPILE_SECONDS = 120
#: In-process batch size: a Parquet row group of Arrow's writers (2^20 rows), whole. Each call
#: costs ~1 us per key and pattern whatever its rows; the desk over 5,000 symbols ran at 1,240
#: ns an event in 2^20-row batches, 1,475 in 500,000-row ones and 1,620 where each row group
#: left a 48,576-row tail batch (docs/benchmarks.md).
IN_PROCESS_BATCH_ROWS = 1 << 20

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _duration(seconds: float) -> str:
    """A span in words: ``850 ms``, ``12.5 s``, ``33.3 min``, ``5.2 h``, ``3.1 days``."""
    s = abs(seconds)
    if s < 1:
        return f"{seconds * 1000:.0f} ms"
    if s < 120:
        return f"{seconds:.1f} s"
    if s < 7200:
        return f"{seconds / 60:.1f} min"
    if s < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


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
    if "on several threads" in t:
        one = max(0.0, t["scan"] - t["on several threads"])
        parts[-1] += f" [one thread {one:.1f} s, {100 * one / max(t['scan'], 1e-9):.0f} %]"
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
    tier: str = DEFAULT_TIER  # the kernel tier (colcep.Matcher's ``tier``)

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
    """Validate the job against the input's schema and get the kernels ready (``arrow_spec``
    loads or compiles the step kernel, ``warm_kernels`` every other a scan calls), here, in the
    step that says so, and not in the middle of the scan (or in every Spark worker). Returns the
    task spec, or with several patterns the spec of each by name."""
    from colcep.spark import arrow_spec
    from colcep.tools.file_scan import warm_kernels

    specs = {name: arrow_spec(data.schema, p, job.key, job.time, job.columns, seq=seq, timeouts=job.timeouts,
                              **_spec_kwargs(job)) for name, p in job.named_patterns().items()}
    if job.patterns and PATTERN_COL in next(iter(specs.values())).columns:
        raise InputError(f"the output column {PATTERN_COL!r} names each row's pattern; rename the input's "
                         f"{PATTERN_COL!r} column or leave it out of --columns")
    try:
        warm_kernels(specs, data, _read_columns(specs))
    except ColcepError:
        pass  # the scan itself reports what is wrong with the input, with the row
    return specs if job.patterns else next(iter(specs.values()))


def _read_columns(specs: dict) -> list[str]:
    """The input columns a scan reads: those of every pattern."""
    from colcep.spark import ROW_COL

    return [c for c in dict.fromkeys(n for sp in specs.values() for n in sp.in_schema.names) if c != ROW_COL]


def _spec_kwargs(job: ScanJob) -> dict[str, Any]:
    return {"tier": job.tier, **({"time_unit": job.time_unit} if job.time_unit else {})}


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
            with _system_allocator():
                rows, engine, secs, hint, counted = _scan_in_process(job, data, fmt, seq, tmp, rep)
        else:
            rows, engine, secs, hint = _scan_spark(job, fmt, data, seq, tmp, rep)
        res = ds.dataset(str(tmp), format="parquet")
        if not job.in_process:
            wanted = [c for c in (PATTERN_COL, "match_id", job.key, "stage", "timed_out", job.time)
                      if c is not None and c in res.schema.names]
            counted = _summary(job)
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
        summary["picture"] = _draw_picture(final, rep, counted)
        secs["picture"] = time.perf_counter() - t_pic
    secs["total"] = time.perf_counter() - t_start
    (final / "_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _summary(job: ScanJob) -> Summary:
    """The scan's counts, made as its output is written (with the matches' first times for
    the picture, in constant memory)."""
    return Summary(job.key, job.top, job.time, bool(job.patterns), job.timeouts,
                   starts=job.picture)


def _draw_picture(out_dir: Path, rep: Reporter, counted: Summary) -> str | None:
    """``<out>.png`` beside the output, or None (matplotlib missing / nothing to draw). The
    overview is drawn from ``counted``'s figures (the folder is read only for the drawn key)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        rep.step("no picture: matplotlib is not installed (pip install 'colcep[plot]')")
        return None
    from colcep.tools.plot import plot_scan, scan_picture_path

    png = scan_picture_path(out_dir)
    rep.step(f"drawing the matches -> {png} ...")
    try:
        starts = counted.start_times()
        plot_scan(out_dir, out=png, overview=None if starts is None else (starts, dict(counted.per_key())))
    except Exception as exc:  # noqa: BLE001 - the scan's output stands without its picture
        rep.step(f"no picture: {type(exc).__name__}: {exc}")
        return None
    return str(png)


@contextlib.contextmanager
def _system_allocator() -> Iterator[None]:
    """Arrow's buffers from the C library's allocator while the scan runs, not mimalloc (Arrow's
    default): a scan allocates and frees each batch's columns on two threads, and mimalloc gave
    those pages back and took them again (a desk's 5 x 10^6 ticks: 16.0 s of CPU, 2.4 s of it in
    the kernel, against 14.2 s and 1.3 s; 9.6 s of wall time against 10.5 s)."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)


def _scan_in_process(job: ScanJob, data, fmt: str, seq: str | None, out_dir: Path,
                     rep: Reporter) -> tuple[int, str, dict, str | None]:
    from colcep.tools.file_scan import STAGES, parquet_batches, scan_batches
    from colcep.tools.writer import BackgroundWriter, compact_dictionaries, match_writer
    from colcep.spark.batch import Streams, with_dictionary_keys

    specs, t_kernels = _with_kernels(rep, lambda: _spec_and_kernels(job, data, seq))
    t0 = time.perf_counter()
    specs = {n: with_dictionary_keys(s) for n, s in specs.items()} if isinstance(specs, dict) else \
        with_dictionary_keys(specs)
    need = _read_columns(specs if isinstance(specs, dict) else {"": specs})
    spec = next(iter(specs.values())) if isinstance(specs, dict) else specs
    step = int(job.batch_rows or IN_PROCESS_BATCH_ROWS)
    threads = int(job.cores or os.cpu_count() or 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / "part-00000.parquet"
    schema = Streams(specs).schema
    writer = [match_writer(out_file, schema)]
    counted = [_summary(job)]

    def write_now(t: pa.Table) -> None:
        writer[0].write_table(compact_dictionaries(t))
        counted[0].add(t)

    background = [BackgroundWriter(write_now)]  # writing overlaps with matching the next batch

    def write(t: pa.Table) -> None:
        background[0].put(t)

    def batches():
        if fmt == "parquet":
            src = [str(p) for p in job.inputs]
            return parquet_batches(src if len(src) > 1 else src[0], spec.key_columns, need, step)
        return data.to_batches(columns=need, batch_size=step)

    def restart(disorder: str) -> None:
        rep.done()
        rep.step(f"the input is not in time order per key ({disorder}): reading it whole to order it ...")
        background[0].abort()
        writer[0].close()
        writer[0] = match_writer(out_file, schema)
        counted[0] = _summary(job)
        background[0] = BackgroundWriter(write_now)

    total = data.count_rows() if fmt == "parquet" else None
    rows = f"{_num(total)} rows of " if total is not None else ""
    rep.step(f"matching {rows}{', '.join(job.inputs)} in this process on {threads} thread{'s' if threads > 1 else ''} "
             "as it is read, writing the matches as they are found ...")
    t_scan = time.perf_counter()
    meter = lambda r: rep.meter("matching: " + scan_meter_text(r.rows, total, time.perf_counter() - t_scan,  # noqa: E731
                                                               r.matches))
    try:
        res = scan_batches(specs, batches, lambda: data.to_table(columns=need), write, restart, threads, step, meter)
        t_wait = time.perf_counter()
        background[0].close()
        res.seconds["writing"] += time.perf_counter() - t_wait  # what was left to write after the matching
    except BaseException:
        background[0].abort()
        raise
    finally:
        writer[0].close()
        rep.done()
    el = time.perf_counter() - t_scan
    rep.step(scan_done_text(res.rows, el, res.matches))
    secs = {"kernels": t_kernels, "scan": time.perf_counter() - t0}
    secs.update({s: res.seconds[s] for s in STAGES})
    secs["on several threads"] = res.parallel
    how = "streamed" if res.streamed else "read whole and ordered"
    return (res.rows, f"in-process ({how}, batches of {_num(step)} rows, {threads} threads, {job.tier} step)", secs,
            None, counted[0])


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


# ============================================================================ the command
def add_parser(sub) -> None:
    """The ``scan`` subcommand and its arguments."""
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
    e.add_argument("--tier", choices=["auto", "generic", "compiled"], default=DEFAULT_TIER,
                   help="the step kernel: auto (default: each shape of pattern's step compiled in the background "
                        "once a pattern has stepped 10^6 rows, the generic interpreter meanwhile), generic (the "
                        "interpreter only), or compiled (a compile of ~5-10 s per new shape, cached on disk, in "
                        "the kernels step)")
    e.add_argument("--batch-rows", type=int, help="Arrow batch size in rows (default 1,048,576 in "
                   "this process, 500,000 on Spark)")
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


def run(a: argparse.Namespace) -> int:
    """Run the scan ``a`` asks for and print its summary; the exit status."""
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
                  overwrite=a.overwrite, quiet=a.quiet, picture=a.plot, tier=a.tier)
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
