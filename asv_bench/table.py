#!/usr/bin/env python3
"""The benchmark figures as a Markdown table, without asv: for each benchmark pattern, colcep's
events/s next to the hand-specialised yardstick's (asv_bench/yardstick.py) on the same ticks,
their ratio, the issue's target, the number of matches and colcep's peak memory.

    python asv_bench/table.py --events 1000000 --symbols 100
    python asv_bench/table.py --events 1e7 --symbols 5000 --patterns P1,P4 --timeout 3600
    python asv_bench/table.py --compile --stream 1e6       # also compile times and a memory stream

Each pattern runs in its own child process (so a slow one can be stopped at ``--timeout`` and
peak memory is per pattern) on the same Parquet file, written once by colcep.tools.ticks.make_ticks.
Timings are the best of ``--repeat`` runs after JIT warm-up. A colcep scan is one Matcher
(``process`` + ``close``) materialising every match; the yardstick goes from the same Arrow
table to match rows (key encoding and grouping by key included); "loop only" times its loop
on arrays already grouped. "peak MiB" is the peak RSS a colcep scan adds above the loaded input.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _child(pattern: str, data: str, repeat: int, budget: float) -> dict:
    import pyarrow.parquet as pq

    from benchmarks.common import MIB, PATTERNS, best_time, peak_above, scan, warm_up, yardstick, yardstick_scan

    warm_up([pattern])
    table = pq.read_table(data)
    n = table.num_rows
    y_time, y_matches = best_time(lambda: yardstick_scan(pattern, table), repeat, budget)
    grouped = yardstick.prepare(table)
    kernel = yardstick.KERNELS[pattern]
    y_loop, _ = best_time(lambda: kernel(*grouped), repeat, budget)
    del grouped
    t0 = time.perf_counter()
    peak, c_matches = peak_above(lambda: scan(PATTERNS[pattern], table))
    first = time.perf_counter() - t0
    c_time = first
    if repeat > 1 and first * (repeat - 1) <= budget:
        more, _ = best_time(lambda: scan(PATTERNS[pattern], table), repeat - 1, budget)
        c_time = min(first, more)
    return {"pattern": pattern, "events": n, "colcep_s": c_time, "yardstick_s": y_time, "yardstick_loop_s": y_loop,
            "colcep_matches": c_matches, "yardstick_matches": y_matches, "peak_mib": peak / MIB}


def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 1e6:
        return f"{x / 1e6:.1f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numba
    import numpy
    import pyarrow

    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, numba {numba.__version__}, "
            f"numpy {numpy.__version__}, pyarrow {pyarrow.__version__}")


def patterns_table(events: int, symbols: int, seed: int, patterns: list[str], repeat: int, timeout: float,
                   budget: float) -> tuple[str, list[dict]]:
    from benchmarks.common import RATIO_TARGET, TARGETS

    from colcep.tools.ticks import make_ticks
    import pyarrow.parquet as pq

    rows, results = [], []
    with tempfile.TemporaryDirectory(prefix="colcep_table_") as tmp:
        data = os.path.join(tmp, "ticks.parquet")
        pq.write_table(make_ticks(events, symbols, seed), data)
        for p in patterns:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", p, "--data", data,
                   "--repeat", str(repeat), "--budget", str(budget)]
            t0 = time.perf_counter()
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                r = {"pattern": p, "events": events, "timeout": timeout}
            except subprocess.CalledProcessError as e:
                r = {"pattern": p, "events": events, "error": (e.stderr or "").strip().splitlines()[-1:]}
            r["wall_s"] = time.perf_counter() - t0
            results.append(r)
            print(f"# {p}: {json.dumps(r)}", file=sys.stderr, flush=True)
    head = ("| pattern | colcep events/s | yardstick events/s | yardstick loop only | colcep / yardstick "
            f"(target ≥ {RATIO_TARGET}) | target events/s | colcep / target | matches | peak MiB |")
    rows.append(head)
    rows.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        p = r["pattern"]
        tgt = TARGETS[p] if events == 10**6 and symbols == 100 else None
        tgt_s = _fmt_rate(TARGETS[p]) + ("" if tgt else " (at 10^6 x 100)")
        if "colcep_s" not in r:
            why = f"> {r['timeout']:.0f} s (stopped)" if "timeout" in r else f"error: {r.get('error')}"
            rows.append(f"| {p} | {why} | — | — | — | {tgt_s} | — | — | — |")
            continue
        c = events / r["colcep_s"]
        y = events / r["yardstick_s"]
        yl = events / r["yardstick_loop_s"]
        ratio = c / y
        ok_ratio = "✓" if ratio >= RATIO_TARGET else "✗"
        vs_target = f"{c / TARGETS[p]:.3f}x {'✓' if c >= TARGETS[p] else '✗'}" if tgt else "—"
        matches = f"{r['colcep_matches']:,}"
        if r["colcep_matches"] != r["yardstick_matches"]:
            matches += f" (yardstick {r['yardstick_matches']:,})"
        rows.append(f"| {p} | {_fmt_rate(c)} | {_fmt_rate(y)} | {_fmt_rate(yl)} | {ratio:.3f}x {ok_ratio} | "
                    f"{tgt_s} | {vs_target} | {matches} | {r['peak_mib']:.1f} |")
    return "\n".join(rows), results


def compile_table() -> tuple[str, dict]:
    from benchmarks.bench_compile import CHILD, run_child

    res = {}
    with tempfile.TemporaryDirectory(prefix="colcep_numba_") as tmp:
        for what in CHILD:
            d = os.path.join(tmp, what)
            os.makedirs(d)
            res[what] = {"cold": run_child(what, d), "warm": run_child(what, d)}
    rows = ["| engine | import s | cold: first scans of P1..P4, s | warm (disk cache): s | first pattern cold / warm, s |",
            "| --- | ---: | ---: | ---: | ---: |"]
    for what, r in res.items():
        cold, warm = r["cold"], r["warm"]
        f = next(iter(cold["first"]))
        rows.append(f"| {what} | {warm['import']:.2f} | {sum(cold['first'].values()):.1f} | "
                    f"{sum(warm['first'].values()):.2f} | {cold['first'][f]:.1f} / {warm['first'][f]:.2f} |")
    return "\n".join(rows), res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--symbols", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--patterns", default="P1,P2,P3,P4", help="comma-separated, or none")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    ap.add_argument("--budget", type=float, default=60.0, help="stop repeating once a scan has taken this long (s)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="stop a pattern after this many seconds")
    ap.add_argument("--compile", action="store_true", help="also time cold / warm compiles (~1 min)")
    ap.add_argument("--stream", type=float, default=0, help="also stream this many events of P4 through one Matcher")
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child, a.data, a.repeat, a.budget)))
        return 0
    events = int(a.events)
    patterns = [p.strip().upper() for p in a.patterns.split(",") if p.strip() and p.strip().lower() != "none"]
    if patterns:
        print(f"## colcep benchmark: {events:,} events over {a.symbols:,} symbols (seed {a.seed}), one core\n")
    print(f"{_machine()}; {time.strftime('%Y-%m-%d')}\n")
    raw = {"events": events, "symbols": a.symbols, "patterns": []}
    if patterns:
        table, raw["patterns"] = patterns_table(events, a.symbols, a.seed, patterns, a.repeat, a.timeout, a.budget)
        print(table)
    if a.compile:
        ctable, craw = compile_table()
        print("\n### Compile time (fresh process, NUMBA_CACHE_DIR empty / filled)\n")
        print(ctable)
        raw["compile"] = craw
    if a.stream:
        import memory_stream

        recs = memory_stream.stream("P4", int(a.stream), batch=min(10**6, max(1000, int(a.stream) // 50)))
        s = memory_stream.summarise(recs)
        print(f"\n### Memory: {s['events']:,} events of P4 through one Matcher\n")
        print(f"RSS {s['rss_start_mib']:.1f} -> {s['rss_end_mib']:.1f} MiB (growth {s['rss_growth_mib']:+.1f} MiB); "
              f"live partial matches max {s['max_live_pm']:,}; {s['bytes_per_live_pm']:.0f} bytes of matcher "
              f"state per live partial match")
        raw["stream"] = s
    if a.json:
        Path(a.json).write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
